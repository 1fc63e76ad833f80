package lake

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempWith writes data to a new CreateTemp file in dir and closes it.
func tempWith(t *testing.T, dir, data string) string {
	t.Helper()
	f, err := CreateTemp(dir, "put-*.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// TestConformancePutFile: storing a local file, as a temp file of ours
// (PutTempFile, linked into a local lake) or as anyone's file (PutFileAs,
// copied), keeps PutOnce's write-once rules on every backend.
func TestConformancePutFile(t *testing.T) {
	puts := []struct {
		name string
		put  func(l *Lake, path, key string, d Digest, n int64) error
	}{
		{"PutTempFile", func(l *Lake, path, key string, d Digest, n int64) error {
			return l.PutTempFile(context.Background(), path, key, d, n)
		}},
		{"PutFileAs", func(l *Lake, path, key string, d Digest, n int64) error {
			return l.PutFileAs(context.Background(), path, key, d, n)
		}},
	}
	for _, p := range puts {
		t.Run(p.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, l *Lake) {
				ctx := context.Background()
				tmp := t.TempDir()
				key := ObjectKey(Sum([]byte("alpha")))
				tests := []struct {
					name       string
					data       string
					size       int64 // the size the caller claims; -1: the data's
					wantErr    error
					wantStored bool // the key holds an object afterwards
				}{
					{"source shorter than claimed is corruption, nothing stored", "alph", 5, ErrCorrupt, false},
					{"first put stores", "alpha", -1, nil, true},
					{"same bytes again is success", "alpha", -1, nil, true},
					{"other bytes are corruption", "alphA", -1, ErrCorrupt, true},
				}
				for _, tc := range tests {
					t.Run(tc.name, func(t *testing.T) {
						path := tempWith(t, tmp, tc.data)
						n := tc.size
						if n < 0 {
							n = int64(len(tc.data))
						}
						err := p.put(l, path, key, Sum([]byte(tc.data)), n)
						if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
							t.Fatalf("err = %v, want %v", err, tc.wantErr)
						}
						if err != nil && !strings.Contains(err.Error(), key) {
							t.Errorf("error %q does not name the key", err)
						}
						if err := os.Remove(path); err != nil {
							t.Errorf("the caller's file: %v", err)
						}
						ok, err := l.Exists(ctx, key)
						if err != nil || ok != tc.wantStored {
							t.Errorf("exists = %v, %v after %q", ok, err, tc.name)
						}
					})
				}
				got, err := l.GetVerified(ctx, key, Sum([]byte("alpha")))
				if err != nil || string(got) != "alpha" {
					t.Errorf("stored = %q, %v; want the first put kept", got, err)
				}
				if dir, ok := l.LocalDir(); ok {
					filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
						if err == nil && strings.HasSuffix(path, ".tmp") {
							t.Errorf("temp file left in the lake: %s", path)
						}
						return nil
					})
				}
			})
		})
	}
}

// TestPutTempFileLinks: in a local lake on the temp file's file system the
// object is the temp file itself (no second copy of its bytes), with the mode
// the lake's other objects get (read-only); on another file system it is a
// copy.
func TestPutTempFileLinks(t *testing.T) {
	ctx := context.Background()
	l := openFile(t)
	dir, _ := l.LocalDir()
	if _, err := l.PutOnce(ctx, "objects/other", []byte("through PutOnce")); err != nil {
		t.Fatal(err)
	}
	objectMode := mode(t, l.LocalPath("objects/other"))

	for _, tc := range []struct {
		name     string
		tmpDir   string
		wantLink bool
	}{
		{"same file system", filepath.Dir(dir), true},
		{"another file system", "/dev/shm", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.wantLink && !otherDevice(tc.tmpDir, dir) {
				t.Skipf("%s is not on another file system than %s", tc.tmpDir, dir)
			}
			data := "shard of " + tc.name
			path := tempWith(t, tc.tmpDir, data)
			defer os.Remove(path)
			key := ObjectKey(Sum([]byte(data)))
			if err := l.PutTempFile(ctx, path, key, Sum([]byte(data)), int64(len(data))); err != nil {
				t.Fatal(err)
			}
			src, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			obj, err := os.Stat(l.LocalPath(key))
			if err != nil {
				t.Fatal(err)
			}
			if got := os.SameFile(src, obj); got != tc.wantLink {
				t.Errorf("object is the temp file itself: %v, want %v", got, tc.wantLink)
			}
			if got := obj.Mode().Perm(); got != objectMode {
				t.Errorf("object mode %v, want %v as PutOnce writes", got, objectMode)
			}
			if got, err := l.GetVerified(ctx, key, Sum([]byte(data))); err != nil || string(got) != data {
				t.Errorf("read back %q, %v", got, err)
			}
		})
	}
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// otherDevice reports whether a and b are folders on different file systems.
func otherDevice(a, b string) bool {
	if fa, err := os.Stat(a); err != nil || !fa.IsDir() {
		return false
	}
	same, ok := sameDevice(a, b)
	return ok && !same
}

// TestObjectWriter: an object written through ObjectWriter is stored under
// the digest of exactly the bytes written, on every backend, and leaves no
// temp file behind.
func TestObjectWriter(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed first %v", closeFirst), func(t *testing.T) { testObjectWriter(t, closeFirst) })
	}
}

// testObjectWriter writes an object and commits it, after Close (twice) if
// closeFirst: the bytes are then all in the temp file, the buffer let go.
func testObjectWriter(t *testing.T, closeFirst bool) {
	forEachBackend(t, func(t *testing.T, l *Lake) {
		ctx := context.Background()
		tmp := t.TempDir()
		o, err := NewObjectWriter(tmp, "obj-*.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for i := range 3000 { // more than the 1 MiB buffer
			line := []byte(strings.Repeat(string(rune('a'+i%26)), 500+i%7))
			if err := o.Line(line); err != nil {
				t.Fatal(err)
			}
			want = append(append(want, line...), '\n')
		}
		if o.Size() != int64(len(want)) {
			t.Errorf("size %d, wrote %d", o.Size(), len(want))
		}
		if closeFirst {
			for range 2 {
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
			}
			st, err := os.Stat(o.f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != int64(len(want)) || o.w != nil {
				t.Errorf("after Close: temp file of %d bytes, buffer kept %v; want %d bytes", st.Size(), o.w != nil, len(want))
			}
		}
		commitChecked(ctx, t, l, o, want)
		if left, _ := os.ReadDir(tmp); len(left) != 0 {
			t.Errorf("temp files left: %v", left)
		}
	})
}

// commitChecked commits o and checks that it is stored under the digest of
// want and reads back as want.
func commitChecked(ctx context.Context, t *testing.T, l *Lake, o *ObjectWriter, want []byte) {
	t.Helper()
	key, d, err := o.Commit(ctx, l, ObjectKey)
	if err != nil {
		t.Fatal(err)
	}
	if d != Sum(want) || key != ObjectKey(Sum(want)) {
		t.Errorf("stored under %s (%s), want the digest of the bytes written %s", key, d, Sum(want))
	}
	if got, err := l.GetVerified(ctx, key, Sum(want)); err != nil || string(got) != string(want) {
		t.Errorf("read back %d bytes, %v; want %d", len(got), err, len(want))
	}
}

// TestLocalObjectsReadOnly: every file a local lake stores (PutOnce, a copied
// file, a linked temp file, a ledger event) has no write permission, so no
// process but root's can open it for writing (DuckDB reading the lake for a
// query is one); as another user than root the open is tried and must fail.
func TestLocalObjectsReadOnly(t *testing.T) {
	ctx := context.Background()
	l := openFile(t)
	dir, _ := l.LocalDir()
	var keys []string
	put := []byte("put once")
	if _, err := l.PutOnce(ctx, "objects/put", put); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, "objects/put")
	src := tempWith(t, t.TempDir(), "a user's file")
	d, _, err := l.PutFile(ctx, src, ObjectKey)
	if err != nil {
		t.Fatal(err)
	}
	keys = append(keys, ObjectKey(d))
	data := "a temp file of batchlake's"
	tmp := tempWith(t, filepath.Dir(dir), data)
	defer os.Remove(tmp)
	tk := ObjectKey(Sum([]byte(data)))
	if err := l.PutTempFile(ctx, tmp, tk, Sum([]byte(data)), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, tk)
	job := Sum([]byte("job"))
	if _, err := NewLedger(l, "t").Transition(ctx, job, "s0", Created, 0, "", nil); err != nil {
		t.Fatal(err)
	}
	keys = append(keys, LedgerKey(job, "s0", 1))
	for _, k := range keys {
		p := l.LocalPath(k)
		if m := mode(t, p); m&0o222 != 0 {
			t.Errorf("%s: mode %v is writable", k, m)
		}
		if os.Geteuid() != 0 {
			if f, err := os.OpenFile(p, os.O_WRONLY, 0); err == nil {
				f.Close()
				t.Errorf("%s: opened for writing", k)
			}
		}
	}
	if fi, err := os.Stat(src); err != nil || fi.Mode().Perm()&0o200 == 0 {
		t.Errorf("the user's own file lost its write permission: %v %v", fi.Mode(), err)
	}
}
