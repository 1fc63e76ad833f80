package lake

import (
	"context"
	"os"
	"testing"
)

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
	put := func(name, parent string) Digest {
		t.Helper()
		d := HashFields(name)
		m := Manifest{Version: ManifestVersion, JobKey: d.Hex(), Tenant: "t", ParentJobKey: parent}
		if _, err := l.PutJSON(ctx, ManifestKey(d), FormatManifest, m); err != nil {
			t.Fatal(err)
		}
		return d
	}
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
