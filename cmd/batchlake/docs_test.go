package main

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideDoc matches citations of documents that are not part of the
// repository (a team contract, provider and stack notes kept elsewhere). The
// repository explains itself: docs/contract.md, docs/lake.md and the README
// say the rules. The pattern is built from pieces so this file does not match.
var outsideDoc = regexp.MustCompile(`CONTRACT(\.md|\s*§)|\b` + `providers\.md|\bstack` + `\.md|shared/` + `reference`)

// TestNoOutsideCitations fails when a file of the repository cites a document
// that lives outside it.
func TestNoOutsideCitations(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	files := trackedFiles(t, root)
	if len(files) < 50 {
		t.Fatalf("found only %d files under %s; is this the repository root?", len(files), root)
	}
	for _, rel := range files {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue // binary
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := outsideDoc.FindString(line); m != "" {
				t.Errorf("%s:%d cites %q, a document outside the repository; cite docs/ or say the rule", rel, i+1, m)
			}
		}
	}
}

// trackedFiles lists the repository's files: git's list when git is at hand,
// else every file outside dot-folders and build output.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	if out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output(); err == nil && len(out) > 0 {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}
