package lake

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
)

// putFamilyManifest stores a bare manifest of job name (its key the hash of
// name) with parent (a job key, or none).
func putFamilyManifest(t *testing.T, l *Lake, name, parent string) Digest {
	t.Helper()
	d := HashFields(name)
	m := Manifest{Version: ManifestVersion, JobKey: d.Hex(), Tenant: "t", ParentJobKey: parent}
	if _, err := l.PutJSON(context.Background(), ManifestKey(d), FormatManifest, m); err != nil {
		t.Fatal(err)
	}
	return d
}

// ReadFamily reads a manifest once per Lake (manifests are write-once) and
// still sees every manifest written since: a process making many retry
// children reads the lake's manifests once, not once per child.
func TestReadFamilyReadsEachManifestOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	put := func(name, parent string) Digest { return putFamilyManifest(t, l, name, parent) }
	root := put("root", "")
	child := put("child", root.Hex())
	f, err := ReadFamily(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Jobs) != 2 || len(f.Children[root.Hex()]) != 1 {
		t.Fatalf("first read: %d jobs, children %v", len(f.Jobs), f.Children)
	}
	// The root's manifest now reads as garbage: a second ReadFamily of this
	// Lake must not read it again. A new grandchild must be seen.
	if err := os.WriteFile(l.LocalPath(ManifestKey(root)), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	grand := put("grandchild", child.Hex())
	f, err = ReadFamily(ctx, l)
	if err != nil {
		t.Fatalf("second read re-read a manifest it had: %v", err)
	}
	if got := f.Descendants(root.Hex(), ""); len(got) != 2 || got[1] != grand.Hex() {
		t.Errorf("descendants of the root %v, want child and grandchild", got)
	}
	// Another Lake (another process) has no cache: it reads every manifest.
	l2, err := Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if _, err := ReadFamily(ctx, l2); err == nil {
		t.Error("a fresh Lake read the damaged manifest without an error")
	}
}

// ReadFamily reads many manifests at once and indexes every one: a root,
// children of it and a chain of grandchildren, more jobs than it reads at a
// time.
func TestReadFamilyIndexesEveryManifest(t *testing.T) {
	ctx := context.Background()
	l, err := Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	put := func(name, parent string) string { return putFamilyManifest(t, l, name, parent).Hex() }
	root := put("root", "")
	want := map[string]string{root: ""}
	for i := range 3 * familyReaders {
		parent := root
		if i%2 == 1 {
			parent = put(fmt.Sprintf("child %d", i-1), root) // the next job's parent
			want[parent] = root
		}
		k := put(fmt.Sprintf("job %d", i), parent)
		want[k] = parent
	}
	f, err := ReadFamily(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Jobs) != len(want) {
		t.Fatalf("%d jobs, want %d", len(f.Jobs), len(want))
	}
	children := 0
	for k, parent := range want {
		m := f.Jobs[k]
		if m == nil || m.JobKey != k || m.ParentJobKey != parent {
			t.Errorf("job %s: %+v, want its manifest (parent %q)", k, m, parent)
		}
		if parent != "" && !slices.Contains(f.Children[parent], k) {
			t.Errorf("job %s is not among its parent's children %v", k, f.Children[parent])
		}
		if parent != "" {
			children++
		}
	}
	if got := f.Descendants(root, ""); len(got) != children {
		t.Errorf("%d descendants of the root, want %d", len(got), children)
	}
}
