// Package gittest holds helpers for tests that drive the real git binary:
// an isolated environment (no user or system config leaks in) and
// generators for repositories of a chosen shape.
package gittest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Env returns an environment for git subprocesses that ignores the
// machine's git configuration and fixes identities and dates, so tests
// behave the same everywhere.
func Env(home string) []string {
	env := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Ghost Test",
		"GIT_AUTHOR_EMAIL=test@ghost.invalid",
		"GIT_COMMITTER_NAME=Ghost Test",
		"GIT_COMMITTER_EMAIL=test@ghost.invalid",
		"GIT_AUTHOR_DATE=2026-01-01T00:00:00Z",
		"GIT_COMMITTER_DATE=2026-01-01T00:00:00Z",
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); k == "PATH" || k == "TMPDIR" {
			env = append(env, kv)
		}
	}
	return env
}

// Git runs git with args in dir under env and returns its stdout; it fails
// the test with git's stderr on error.
func Git(tb testing.TB, env []string, dir string, args ...string) string {
	tb.Helper()
	out, err := Run(env, dir, nil, args...)
	if err != nil {
		tb.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// Input runs git like Git with stdin as its standard input, for the
// plumbing that reads it (pack-objects, fast-import, index-pack --stdin).
func Input(tb testing.TB, env []string, dir string, stdin io.Reader, args ...string) string {
	tb.Helper()
	out, err := Run(env, dir, stdin, args...)
	if err != nil {
		tb.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// Run runs git and returns stdout, or an error carrying stderr.
func Run(env []string, dir string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Combined runs git and returns its stdout and stderr in the one stream a
// terminal shows, with the exit error: a push's answer (the server's
// "remote:" lines, "[remote rejected]") is on stderr even when it succeeds.
func Combined(env []string, dir string, stdin io.Reader, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Shape describes a generated repository's history.
type Shape struct {
	Commits int // commits on main, each adding or rewriting one file
	// BlobBytes is the size of each commit's file: incompressible random
	// bytes, so the repository's pack is about Commits*BlobBytes.
	BlobBytes int
	Files     int    // distinct paths the commits cycle through (default 100)
	Seed      uint64 // content seed
}

// Generate creates a non-bare repository in dir (which must not exist or be
// empty) with the given shape, quickly, through git fast-import.
func Generate(tb testing.TB, env []string, dir string, s Shape) {
	tb.Helper()
	if s.Files <= 0 {
		s.Files = 100
	}
	Git(tb, env, "", "init", "-q", "-b", "main", dir)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	rng := rand.NewChaCha8([32]byte{byte(s.Seed), byte(s.Seed >> 8), 'g'})
	blob := make([]byte, s.BlobBytes)
	for i := 1; i <= s.Commits; i++ {
		rng.Read(blob)
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", i, len(blob))
		w.Write(blob)
		fmt.Fprintf(w, "\ncommit refs/heads/main\ncommitter Ghost Test <test@ghost.invalid> %d +0000\ndata <<EOT\ncommit %d\nEOT\n", 1767225600+i, i)
		fmt.Fprintf(w, "M 100644 :%d dir%02d/file%04d.bin\n\n", i, (i%s.Files)%10, i%s.Files)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		tb.Fatalf("git fast-import: %v: %s", err, stderr.String())
	}
	Git(tb, env, dir, "reset", "-q", "--hard", "main")
}
