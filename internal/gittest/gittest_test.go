package gittest

import (
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	env := Env(t.TempDir())
	dir := t.TempDir() + "/repo"
	Generate(t, env, dir, Shape{Commits: 50, BlobBytes: 1000, Files: 7})
	if n := strings.TrimSpace(Git(t, env, dir, "rev-list", "--count", "main")); n != "50" {
		t.Fatalf("rev-list --count = %s, want 50", n)
	}
	if files := strings.Fields(Git(t, env, dir, "ls-files")); len(files) != 7 {
		t.Fatalf("%d files, want 7", len(files))
	}
	Git(t, env, dir, "fsck", "--full")
}
