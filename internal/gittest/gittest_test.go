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

func TestInputAndCombined(t *testing.T) {
	env := Env(t.TempDir())
	dir := t.TempDir()
	Git(t, env, dir, "init", "-q")
	id := strings.TrimSpace(Input(t, env, dir, strings.NewReader("hello\n"), "hash-object", "-w", "--stdin"))
	if got := Git(t, env, dir, "cat-file", "-p", id); got != "hello\n" {
		t.Fatalf("cat-file -p %s = %q, want the input back", id, got)
	}
	// stderr joins stdout, on success and on failure.
	out, err := Combined(env, dir, nil, "checkout", "-b", "side")
	if err != nil || !strings.Contains(out, "Switched to a new branch 'side'") {
		t.Fatalf("checkout -b says so on stderr, Combined must show it: %q, %v", out, err)
	}
	out, err = Combined(env, dir, nil, "checkout", "nosuchbranch")
	if err == nil || !strings.Contains(out, "did not match") {
		t.Fatalf("checkout of a missing branch: %q, %v", out, err)
	}
}
