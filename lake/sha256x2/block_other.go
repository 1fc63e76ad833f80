//go:build !amd64 || purego

package sha256x2

// Accelerated is false: this build has only the portable code.
var Accelerated = false

func block1(h *[8]uint32, p []byte) { blockGeneric(h, p[:len(p)&^(BlockSize-1)]) }

func block2(ha *[8]uint32, pa []byte, hb *[8]uint32, pb []byte) {
	blockGeneric(ha, pa[:len(pa)&^(BlockSize-1)])
	blockGeneric(hb, pb[:len(pb)&^(BlockSize-1)])
}
