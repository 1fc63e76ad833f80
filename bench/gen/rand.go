package gen

import "math/bits"

// splitmix64 is a fast, well-mixed 64-bit hash step.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// mix combines a key and a value into a new well-mixed key.
func mix(a, b uint64) uint64 { return splitmix64(a ^ splitmix64(b+0x632be59bd9b4e019)) }

// Streams keep independent draws apart.
const (
	streamPlan uint64 = iota + 1
	streamLine
	streamShuffle
	streamPerm
	streamExtra
	streamInputShuffle
)

// rng is a splitmix64 generator: tiny, fast and good enough for synthetic data.
type rng struct{ s uint64 }

func newRNG(seed, stream, i uint64) rng { return rng{s: mix(mix(seed, stream), i)} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a uniform number in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a uniform number in [0, n) for 0 < n < 2^32.
func (r *rng) intn(n int) int { return int(((r.next() >> 32) * uint64(n)) >> 32) }

// permute maps x in [0, n) to a pseudo-random position in [0, n), a bijection
// fixed by key: a balanced 4-round Feistel network over the smallest even
// number of bits covering n, cycle-walking until the value falls inside.
func permute(x, n, key uint64) uint64 {
	if n <= 1 {
		return 0
	}
	width := bits.Len64(n - 1)
	if width < 2 {
		width = 2
	}
	if width%2 == 1 {
		width++
	}
	half := uint(width / 2)
	mask := uint64(1)<<half - 1
	for {
		l, r := x>>half, x&mask
		for round := uint64(0); round < 4; round++ {
			l, r = r, l^(mix(key+round, r)&mask)
		}
		x = l<<half | r
		if x < n {
			return x
		}
	}
}
