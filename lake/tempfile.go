package lake

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// CreateTemp creates a new temporary file in dir (the system's temporary
// folder if dir is ""), named from pattern as os.CreateTemp names it. Unlike
// os.CreateTemp's 0600 the file gets the mode the objects of a local lake get
// (0666 less the umask, as fileblob creates them), so that PutTempFile can
// link the file itself into a local lake. So a temp file is as private as the
// umask makes it (os.CreateTemp's are private whatever the umask): keep a
// private umask, or --tmp-dir in a private folder, for private data.
func CreateTemp(dir, pattern string) (*os.File, error) {
	if dir == "" {
		dir = os.TempDir()
	}
	if strings.ContainsRune(pattern, os.PathSeparator) {
		return nil, fmt.Errorf("lake temp file %q: pattern contains a path separator", pattern)
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 0; ; try++ {
		name := filepath.Join(dir, prefix+randomHex(8)+suffix)
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) && try < 100 {
			continue
		}
		return f, err
	}
}

// PutTempFile stores a file made by CreateTemp under key, its digest and size
// known; the caller has closed it and will only remove it afterwards. In a
// local-folder lake the file is hard-linked into place when it can be (same
// file system): the lake gets the file itself instead of a second copy of
// its bytes, which for a plan's shards is a copy of the whole input. link(2)
// never replaces a name, so the object appears complete, exactly once. When
// the link is not possible (another file system, no hard links, not a local
// lake) the file is uploaded as PutFileAs does.
func (l *Lake) PutTempFile(ctx context.Context, path, key string, d Digest, n int64) error {
	if l.dir != "" {
		if linked, err := l.linkInto(ctx, path, key, d, n); linked || err != nil {
			return err
		}
	}
	return l.PutFileAs(ctx, path, key, d, n)
}

// linkInto hard-links path to key's file. It reports false, with no error,
// when the link could not be made for a reason an upload does not share.
func (l *Lake) linkInto(ctx context.Context, path, key string, d Digest, n int64) (bool, error) {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() != n {
		return false, nil // the upload reports it (the size check is its own)
	}
	dst := l.LocalPath(key)
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return false, nil
	}
	// The object is this very file: read-only, as createOnce makes them.
	if err := os.Chmod(path, fi.Mode().Perm()&^0o222); err != nil {
		return false, nil
	}
	err = os.Link(path, dst)
	switch {
	case err == nil:
		flushBehindPath(dst)
		return true, nil
	case !errors.Is(err, fs.ErrExist):
		return false, nil // EXDEV, EPERM, a file system without hard links
	}
	return true, l.sameObject(ctx, key, d, n)
}

// copyInto stores the local file at path under key of a local lake: copied
// file to file (copy_file_range: the kernel moves the bytes, instead of a
// read and a write through user space per 32 KiB, as through fileblob's
// writer) by createOnce, so the object appears complete and at most once
// (fileblob's IfNotExist checks, then renames). It reports false, with no
// error, when the lake's folder cannot take the temp file, for the upload
// path to try.
func (l *Lake) copyInto(ctx context.Context, path, key string, d Digest, n int64) (bool, error) {
	src, err := os.Open(path)
	if err != nil {
		return true, fmt.Errorf("lake put %s: %w", key, err)
	}
	defer src.Close()
	created, err := createOnce(l.LocalPath(key), src, n, false)
	switch {
	case errors.Is(err, errNoTemp):
		return false, nil
	case err != nil:
		return true, fmt.Errorf("lake put %s: %w", key, err)
	case !created:
		return true, l.sameObject(ctx, key, d, n)
	}
	return true, nil
}

// putLocal is putOnce on a local lake: the bytes go through createOnce, so
// of two writers of one key exactly one is told it created it (fileblob's
// IfNotExist stats, then renames: both could be told so, the last one
// winning).
func (l *Lake) putLocal(ctx context.Context, key string, open func() (io.Reader, error), sum Digest, size int64) (bool, error) {
	r, err := open()
	if err != nil {
		return false, err
	}
	if c, ok := r.(io.Closer); ok {
		defer c.Close()
	}
	created, err := createOnce(l.LocalPath(key), r, size, true)
	if err != nil {
		return false, fmt.Errorf("lake put %s: %w", key, err)
	}
	if !created {
		return false, l.sameObject(ctx, key, sum, size)
	}
	return true, nil
}

// readOnly drops the write permission bits of f: an object is never written
// again, and a process of another user, or of the same user but not root,
// cannot open it for writing (DuckDB reading a table file for a query is one
// such process).
func readOnly(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	return f.Chmod(fi.Mode().Perm() &^ 0o222)
}

// errNoTemp: createOnce could not make its temp file beside the target.
var errNoTemp = errors.New("no temp file beside the target")

// createOnce makes a new file at dst holding r's n bytes: they are written
// to a temp file beside dst (named as fileblob names its own, so that verify
// knows a leftover), then link(2)ed into place. link never replaces a name,
// so of concurrent creators exactly one is told created=true, and the file
// is complete before it is visible; the others get created=false and no
// error, and compare the bytes themselves. sync flushes the bytes to disk
// before the link, for small commit markers whose loss would be worse than
// the fsync, once every file stored before them is flushed (waitFlushed);
// any other file is flushed behind (flushBehind). It is the one write-once
// create of a local lake: objects, markers and ledger events all go
// through it. A file of bulkCopyMin bytes or more is copied past the page
// cache (bulkCopy).
func createOnce(dst string, r io.Reader, n int64, sync bool) (created bool, err error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		return false, fmt.Errorf("%w: %v", errNoTemp, err)
	}
	tmp, err := CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".*.tmp")
	if err != nil {
		return false, fmt.Errorf("%w: %v", errNoTemp, err)
	}
	defer os.Remove(tmp.Name())
	var m int64
	if n >= bulkCopyMin {
		m, err = bulkCopy(tmp, r)
	} else {
		m, err = io.Copy(tmp, r)
	}
	switch {
	case err == nil && sync:
		// A marker names files stored before it: they reach the disk first.
		if err = waitFlushed(); err == nil {
			err = tmp.Sync()
		}
	case err == nil:
		flushBehind(tmp)
	}
	if err == nil {
		err = readOnly(tmp)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return false, err
	case m != n:
		// The source changed under us: storing it would store bytes that
		// do not match the key.
		return false, fmt.Errorf("source has %d bytes, want %d: %w", m, n, ErrCorrupt)
	}
	if err := os.Link(tmp.Name(), dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// sameObject checks that the existing object at key holds the bytes with
// digest d and size n: a write-once put of the same bytes is a success,
// other bytes are ErrCorrupt.
func (l *Lake) sameObject(ctx context.Context, key string, d Digest, n int64) error {
	got, m, err := l.hashOnce(ctx, key)
	if err != nil {
		return wrapOp("put", key, err)
	}
	if got != d || m != n {
		return fmt.Errorf("lake put %s: key holds other bytes (%s, want %s): %w", key, got, d, ErrCorrupt)
	}
	return nil
}

// ObjectWriter writes a new object of the lake through a local temp file,
// hashing the bytes as they are written, so that storing it needs no second
// read to learn its digest; Commit stores it with PutTempFile (a local lake
// links the file itself).
type ObjectWriter struct {
	f        *os.File
	w        *bufio.Writer // nil once closed, and for a bulk object
	b        *bulkWriter   // a bulk object's writer (NewBulkObjectWriter); nil once closed
	h        hash.Hash
	n        int64
	closeErr error
}

// objectBuffers keeps the ObjectWriters' 1 MiB write buffers between
// objects: a small job writes several objects, and allocating and zeroing a
// new buffer for each was a visible part of its cost.
var objectBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<20) }}

// NewObjectWriter starts an object in a CreateTemp file in dir.
func NewObjectWriter(dir, pattern string) (*ObjectWriter, error) {
	f, err := CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	w := objectBuffers.Get().(*bufio.Writer)
	w.Reset(io.MultiWriter(f, h))
	return &ObjectWriter{f: f, w: w, h: h}, nil
}

// writeBehindFor makes the object's file start its way to the disk as it is
// written (writeBehind), when l is a local lake on the file's file system:
// the file itself is linked into it, and its flush before the marker that
// names it (flushBehind) then finds most of its pages written. A remote
// lake's temporary files are uploaded and removed, and one on another file
// system copied and removed: they never need the disk. Call it before the
// first write.
func (o *ObjectWriter) writeBehindFor(l *Lake) {
	dir, local := l.LocalDir()
	if !local || o.w == nil || o.w.Buffered() > 0 || o.n > 0 {
		return
	}
	if same, ok := sameDevice(o.f.Name(), dir); !ok || !same {
		return
	}
	var dst io.Writer = newWriteBehind(o.f)
	if o.h != nil {
		dst = io.MultiWriter(dst, o.h)
	}
	o.w.Reset(dst)
}

// NewUnhashedObjectWriter starts an object that is edited in place once
// written (Rewrite), and so hashed only then.
func NewUnhashedObjectWriter(dir, pattern string) (*ObjectWriter, error) {
	f, err := CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	w := objectBuffers.Get().(*bufio.Writer)
	w.Reset(f)
	return &ObjectWriter{f: f, w: w}, nil
}

// Rewrite hands the file written so far to edit, which may change it in
// place and returns its new size, and then hashes it: the object is what
// edit left. Nothing may be written after it.
func (o *ObjectWriter) Rewrite(edit func(f *os.File) (int64, error)) error {
	if o.w == nil || o.h != nil {
		return fmt.Errorf("lake object %s: internal error: Rewrite of an object hashed as written, or closed", o.f.Name())
	}
	if err := o.w.Flush(); err != nil {
		return err
	}
	n, err := edit(o.f)
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := hashFrom(h, io.NewSectionReader(o.f, 0, n)); err != nil {
		return err
	}
	o.h, o.n = h, n
	return nil
}

// written is the file of an unhashed object, everything written so far in
// it, for reading; nothing may be written after it.
func (o *ObjectWriter) written() (*os.File, error) {
	if o.w == nil || o.h != nil {
		return nil, fmt.Errorf("lake object %s: internal error: reading an object hashed as written, or closed", o.f.Name())
	}
	if err := o.w.Flush(); err != nil {
		return nil, err
	}
	return o.f, nil
}

// NewBulkObjectWriter starts an object of many megabytes that nothing reads
// soon after in a CreateTemp file in dir, written past the page cache where
// the file system allows (bulkWriter).
func NewBulkObjectWriter(dir, pattern string) (*ObjectWriter, error) {
	f, err := CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &ObjectWriter{f: f, b: newBulkWriter(f, h), h: h}, nil
}

// NewBulkObjectWriterHashedBy is NewBulkObjectWriter for a caller that
// hashes what it writes itself, into h, every byte in order (so that
// sha256x2.Write2 hashes them beside another stream): the writer does not,
// and Commit names the object by h's sum.
func NewBulkObjectWriterHashedBy(dir, pattern string, h hash.Hash) (*ObjectWriter, error) {
	f, err := CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	return &ObjectWriter{f: f, b: newBulkWriter(f, nil), h: h}, nil
}

// Write appends p.
func (o *ObjectWriter) Write(p []byte) (int, error) {
	if o.b != nil {
		n, err := o.b.Write(p)
		o.n += int64(n)
		return n, err
	}
	n, err := o.w.Write(p)
	o.n += int64(n)
	return n, err
}

// Line appends b and a newline.
func (o *ObjectWriter) Line(b []byte) error {
	o.Write(b)
	_, err := o.Write(newline)
	return err
}

var newline = []byte{'\n'}

// Size is the number of bytes written so far.
func (o *ObjectWriter) Size() int64 { return o.n }

// Close ends the writing without storing: the temp file stays until Commit
// or Abort, and the write buffer is let go (for writers that wait before
// they are committed). Nothing may be written after it.
func (o *ObjectWriter) Close() error {
	if o.b != nil {
		if o.closeErr = o.b.Flush(); o.closeErr == nil {
			flushBehind(o.f)
		}
		if err := o.f.Close(); o.closeErr == nil {
			o.closeErr = err
		}
		o.b = nil
	}
	if o.w != nil {
		o.closeErr = o.w.Flush()
		if err := o.f.Close(); o.closeErr == nil {
			o.closeErr = err
		}
		o.w.Reset(nil)
		objectBuffers.Put(o.w)
		o.w = nil
	}
	return o.closeErr
}

// Commit stores the object under keyFor(its digest) and removes the temp
// file; it returns the key and the digest.
func (o *ObjectWriter) Commit(ctx context.Context, l *Lake, keyFor func(Digest) string) (string, Digest, error) {
	defer o.Abort()
	var d Digest
	if err := o.Close(); err != nil {
		return "", d, err
	}
	if o.h == nil {
		return "", d, fmt.Errorf("lake object %s: internal error: Commit of an unhashed object before Rewrite", o.f.Name())
	}
	o.h.Sum(d[:0])
	key := keyFor(d)
	return key, d, l.PutTempFile(ctx, o.f.Name(), key, d, o.n)
}

// Abort removes the temp file; safe after Commit.
func (o *ObjectWriter) Abort() {
	if o.b != nil {
		// The writes in flight end before their file is closed (and its
		// descriptor perhaps given to another file).
		o.b.release()
		o.b = nil
	}
	o.f.Close()
	os.Remove(o.f.Name())
}
