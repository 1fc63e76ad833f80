package ingest

import "io"

// Progress is told how many bytes of the input have been read so far. It is
// called from the reading goroutine, once per read (about 1 MiB).
type Progress func(done int64)

// progressReader counts the bytes read through it and tells tell, if set.
type progressReader struct {
	r    io.Reader
	n    int64
	tell Progress
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if p.tell != nil {
		p.tell(p.n)
	}
	return n, err
}

// withProgress counts what is read from r; nil means no reporting.
func withProgress(r io.Reader, p Progress) io.Reader {
	if p == nil {
		return r
	}
	return &progressReader{r: r, tell: p}
}
