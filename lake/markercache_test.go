package lake

import (
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/batchlake/batchlake/internal/testrun"
)

// manifestReads is how many manifests the watched S3 server was asked for
// since the last take, which starts the count again.
type manifestReads struct{ w *testrun.LakeWatch }

func (c manifestReads) take() int {
	n := 0
	for _, r := range c.w.Arrived() {
		if strings.HasPrefix(r, http.MethodGet+" ") && strings.Contains(r, "/"+ManifestPrefix) {
			n++
		}
	}
	c.w.Reset("", "", "")
	return n
}

// familyOf is f as sorted strings, to compare two reads of a family.
func familyOf(f *Family) []string {
	var out []string
	for k, m := range f.Jobs {
		out = append(out, fmt.Sprintf("job %s tenant %s parent %s", k, m.Tenant, m.ParentJobKey))
	}
	for p, cs := range f.Children {
		cs = slices.Clone(cs)
		slices.Sort(cs)
		out = append(out, fmt.Sprintf("children of %s: %v", p, cs))
	}
	slices.Sort(out)
	return out
}

// TestMarkerCacheOnS3: a remote lake's manifests, read once, are taken
// from the cache folder by every later process that lists them, with no
// request each; a cached file that is not the lake's bytes is read from the
// lake again and mended; a new manifest is read; nothing is taken from the
// cache without a listing's MD5 to check it against.
func TestMarkerCacheOnS3(t *testing.T) {
	ctx := context.Background()
	watch := testrun.NewLakeWatch()
	gets := manifestReads{watch}
	srv := httptest.NewServer(watch.Wrap(newFakeS3(t, "lake").Server()))
	t.Cleanup(srv.Close)
	u := s3URL(srv.URL, "lake")
	cache := t.TempDir()
	// Each open is a new process's lake.
	open := func(withCache bool) *Lake {
		l := openLake(t, u)
		if withCache {
			l.SetMarkerCache(cache)
		}
		return l
	}
	w := open(false)
	root := putFamilyManifest(t, w, "root", "")
	var jobs []Digest
	for i := range 11 {
		jobs = append(jobs, putFamilyManifest(t, w, fmt.Sprintf("child %d", i), root.Hex()))
	}
	read := func(l *Lake) []string {
		t.Helper()
		f, err := ReadFamily(ctx, l)
		if err != nil {
			t.Fatal(err)
		}
		return familyOf(f)
	}
	gets.take()
	want := read(open(false))
	if n := gets.take(); n != 12 {
		t.Fatalf("without a cache: %d manifest reads, want 12", n)
	}
	if got := read(open(true)); !slices.Equal(got, want) {
		t.Fatalf("first read through the cache:\n%v\nwant\n%v", got, want)
	}
	if n := gets.take(); n != 12 {
		t.Fatalf("first read through the cache: %d manifest reads, want 12", n)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.json"))
	if len(files) != 12 {
		t.Fatalf("cache holds %d manifests, want 12", len(files))
	}
	if got := read(open(true)); !slices.Equal(got, want) {
		t.Fatalf("second process:\n%v\nwant\n%v", got, want)
	}
	if n := gets.take(); n != 0 {
		t.Fatalf("second process: %d manifest reads, want none", n)
	}

	// A cached file holding another manifest (valid, sealed, of this lake):
	// read from the lake again, and the file mended.
	lakeBytes, err := w.readAll(ctx, ManifestKey(jobs[3]))
	if err != nil {
		t.Fatal(err)
	}
	sum := md5.Sum(lakeBytes)
	vf := (&markerDisk{dir: cache}).path(ManifestKey(jobs[3]), sum[:])
	forged, err := w.readAll(ctx, ManifestKey(jobs[4]))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, forged, 0o644); err != nil {
		t.Fatal(err)
	}
	gets.take()
	if got := read(open(true)); !slices.Equal(got, want) {
		t.Fatalf("with a forged cache file:\n%v\nwant\n%v", got, want)
	}
	if n := gets.take(); n != 1 {
		t.Fatalf("with a forged cache file: %d manifest reads, want 1", n)
	}
	if b, _ := os.ReadFile(vf); string(b) != string(lakeBytes) {
		t.Fatal("the forged cache file was not mended")
	}

	// A new job: its manifest alone is read.
	late := putFamilyManifest(t, w, "late child", root.Hex())
	gets.take()
	got := read(open(true))
	if n := gets.take(); n != 1 {
		t.Fatalf("after a new job: %d manifest reads, want 1", n)
	}
	if len(got) != len(want)+1 || !slices.Contains(got, fmt.Sprintf("job %s tenant t parent %s", late.Hex(), root.Hex())) {
		t.Fatalf("after a new job: %v", got)
	}

	// No listing, no MD5 to check a cached file against: read from the lake.
	l := open(true)
	if _, err := l.GetManifest(ctx, jobs[0]); err != nil {
		t.Fatal(err)
	}
	if n := gets.take(); n != 1 {
		t.Fatalf("a manifest read with no listing: %d reads, want 1", n)
	}
}

// A marker whose bytes do not hash to the MD5 its listing gave (an S3 ETag
// that is not an MD5) is not kept; a local lake keeps no cache.
func TestMarkerCacheKeepsOnlyWhatItCanCheck(t *testing.T) {
	dir := t.TempDir()
	c := newMarkerDisk(dir)
	job := ManifestKey(HashFields("job"))
	b := []byte(`{"format":"x"}`)
	sum := md5.Sum([]byte("other bytes"))
	c.put(job, sum[:], b)
	c.put(job, nil, b)
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("kept %d files of bytes it cannot check", len(files))
	}
	right := md5.Sum(b)
	c.put(job, right[:], b)
	c.listed[job] = right[:]
	if got, _ := c.get(job); string(got) != string(b) {
		t.Fatalf("cached %q, got %q", b, got)
	}
	// A folder that cannot be made (a file in its place): keeping stops,
	// warned once, and nothing is kept.
	blocked := filepath.Join(dir, "blocked")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cb := newMarkerDisk(blocked)
	cb.put(job, right[:], b)
	if !cb.off.Load() {
		t.Fatal("a folder that cannot be written is tried for every marker")
	}
	l := openLake(t, t.TempDir())
	l.SetMarkerCache(t.TempDir())
	if l.mdisk != nil {
		t.Fatal("a local lake keeps a marker cache")
	}
}

// TestMarkerCacheBounded: a folder past its bound of files loses its oldest
// markers, down to nine tenths of the bound, once the process keeps one;
// the newest stay, and files being written are left alone.
func TestMarkerCacheBounded(t *testing.T) {
	dir := t.TempDir()
	c := newMarkerDisk(dir)
	c.maxFiles = 20
	old := time.Now().Add(-time.Hour)
	var keys []string
	for i := range 24 {
		k := ManifestKey(HashFields(fmt.Sprint("job", i)))
		b := []byte(fmt.Sprintf(`{"n":%d}`, i))
		sum := md5.Sum(b)
		p := c.path(k, sum[:])
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		// Written in turn: job0 the oldest.
		if err := os.Chtimes(p, old.Add(time.Duration(i)*time.Minute), old.Add(time.Duration(i)*time.Minute)); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, p)
	}
	inFlight := filepath.Join(dir, ".fetch-123")
	if err := os.WriteFile(inFlight, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(inFlight, old.Add(-time.Hour), old.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	b := []byte(`{"n":"new"}`)
	sum := md5.Sum(b)
	newest := ManifestKey(HashFields("newest"))
	c.put(newest, sum[:], b)
	select {
	case <-c.trimmed:
	case <-time.After(30 * time.Second):
		t.Fatal("keeping a marker did not check the folder's bound")
	}
	for i, p := range keys {
		_, err := os.Stat(p)
		if gone := errors.Is(err, fs.ErrNotExist); gone != (i < 7) { // 25 kept, down to 18: the 7 oldest go
			t.Errorf("marker %d of 24 (oldest first): removed %v, want %v", i, gone, i < 7)
		}
	}
	if _, err := os.Stat(c.path(newest, sum[:])); err != nil {
		t.Errorf("the marker just kept: %v", err)
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Errorf("a file being written: %v", err)
	}
	// Once a process: a second put does not look at the folder again.
	c.put(ManifestKey(HashFields("another")), sum[:], b)
	if ents, _ := os.ReadDir(dir); len(ents) != 18+1+1 {
		t.Errorf("%d files after a second put, want 20 (18 markers, the in-flight file and the new one)", len(ents))
	}
}
