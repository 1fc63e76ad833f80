package lake

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestDirectReader: aligned reads of a file on the disk (direct I/O where the
// file system has it) and in the temp folder return its bytes, the last
// block short with io.EOF; a read at an unaligned offset, of a length that
// is not whole blocks or into an unaligned buffer is refused, not passed to
// a kernel that would fail it only under direct I/O.
func TestDirectReader(t *testing.T) {
	disk := diskTempDir(t, "bulkread-test")
	data := make([]byte, 5*DirectAlign+123)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for name, dir := range map[string]string{"disk": disk, "temp": t.TempDir()} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			r, err := OpenDirectReader(path)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			t.Logf("direct I/O: %v", r.Direct())
			buf := AlignedBuffer(2 * DirectAlign)
			if len(buf) != 2*DirectAlign || len(AlignedBuffer(1)) != DirectAlign {
				t.Fatalf("AlignedBuffer(%d) is %d bytes, AlignedBuffer(1) %d", 2*DirectAlign, len(buf), len(AlignedBuffer(1)))
			}
			var got []byte
			for off := int64(0); ; off += int64(len(buf)) {
				n, err := r.ReadAt(buf, off)
				got = append(got, buf[:n]...)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if n != len(buf) {
					t.Fatalf("read at %d: %d bytes without io.EOF", off, n)
				}
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes, not the file's %d", len(got), len(data))
			}
			for _, c := range []struct {
				name string
				b    []byte
				off  int64
			}{
				{"offset", buf, 100},
				{"length", buf[:DirectAlign+1], 0},
				{"buffer", AlignedBuffer(3 * DirectAlign)[1 : 1+DirectAlign], 0},
			} {
				if _, err := r.ReadAt(c.b, c.off); err == nil {
					t.Errorf("an unaligned %s: read, want an error", c.name)
				}
			}
		})
	}
}
