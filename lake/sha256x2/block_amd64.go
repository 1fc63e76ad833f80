//go:build amd64 && !purego

package sha256x2

import "golang.org/x/sys/cpu"

//go:generate go run gen.go

//go:noescape
func blocks1(h *[8]uint32, p *byte, n int)

//go:noescape
func blocks2(ha, hb *[8]uint32, pa, pb *byte, n int)

func hasSHA() bool

// Accelerated says whether the SHA extensions are used; tests turn it off to
// run the portable code on the same machine.
var Accelerated = hasSHA() && cpu.X86.HasSSSE3 && cpu.X86.HasSSE41

// block1 hashes the whole blocks of p into h.
func block1(h *[8]uint32, p []byte) {
	n := len(p) / BlockSize
	if n == 0 {
		return
	}
	if !Accelerated {
		blockGeneric(h, p[:n*BlockSize])
		return
	}
	blocks1(h, &p[0], n)
}

// block2 hashes the whole blocks of pa into ha and of pb into hb; pa and pb
// are as long.
func block2(ha *[8]uint32, pa []byte, hb *[8]uint32, pb []byte) {
	n := len(pa) / BlockSize
	if n == 0 {
		return
	}
	if !Accelerated {
		blockGeneric(ha, pa[:n*BlockSize])
		blockGeneric(hb, pb[:n*BlockSize])
		return
	}
	_ = pb[n*BlockSize-1]
	blocks2(ha, hb, &pa[0], &pb[0], n)
}
