package web

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
)

// fakeGit writes a shell script standing in for git, which records its
// pid in dir/pid and runs body: a fault git itself cannot be made to
// show (endless output, a hang).
func fakeGit(t *testing.T, body string) (gitRepo, string) {
	t.Helper()
	dir := t.TempDir()
	script := filepath.Join(dir, "git")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+dir+"/pid\nexec "+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return gitRepo{run: &gitexec.Runner{Path: script}, dir: dir}, filepath.Join(dir, "pid")
}

// waitGone waits until the process whose pid is in file has exited.
func waitGone(t *testing.T, file string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(file)
		if err == nil {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if pid > 0 && syscall.Kill(pid, 0) != nil {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("git was left running")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGitStopsAtThePage: git's output is read up to the page and git is
// stopped there, however much more it has to say.
func TestGitStopsAtThePage(t *testing.T) {
	g, pid := fakeGit(t, "yes 'refs/heads/x\037"+strings.Repeat("a", 40)+"\037\0371700000000'")
	refs, more, err := g.refPage(context.Background(), "refs/heads", "", refsPage, false)
	if err != nil || len(refs) != refsPage || !more {
		t.Fatalf("refPage = %d refs, more %v, %v", len(refs), more, err)
	}
	waitGone(t, pid)
}

// TestGitStopsWhenTheClientGoes: a client that goes away stops git.
func TestGitStopsWhenTheClientGoes(t *testing.T) {
	g, pid := fakeGit(t, "sleep 600")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := g.log(ctx, "main", "", 0, 50)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("log after the client went away: %v", err)
	}
	waitGone(t, pid)
}

// TestGitDeadline: a git process that outlives the page's git deadline
// is stopped, and the page answers 503.
func TestGitDeadline(t *testing.T) {
	g, pid := fakeGit(t, "sleep 600")
	g.timeout = 100 * time.Millisecond
	_, _, err := g.lsTree(context.Background(), "main:", 10)
	if !errors.Is(err, errGitTimeout) {
		t.Fatalf("lsTree past the deadline: %v", err)
	}
	waitGone(t, pid)
	var he *httpError
	if !errors.As(classify("tree", err), &he) || he.status != 503 {
		t.Fatalf("a git deadline is %v, want 503", classify("tree", err))
	}
}

// TestFieldReaderCaps: fields are kept up to their caps, whatever their
// size, and the rest is skipped.
func TestFieldReaderCaps(t *testing.T) {
	in := "id1\x1f" + strings.Repeat("s", 200<<10) + "\x1fmore\x1fand\x1fmore\x00id2\x1fshort\x00"
	fr := &fieldReader{r: bufio.NewReaderSize(strings.NewReader(in), 16), end: 0, sep: 0x1f, n: 3, caps: []int{8, 100, 5}}
	f, err := fr.next()
	if err != nil || len(f) != 3 || f[0] != (field{"id1", false}) || len(f[1].s) != 100 || !f[1].cut || f[2] != (field{"more\x1f", true}) {
		t.Fatalf("first record: %+v, %v", f, err)
	}
	if f, err := fr.next(); err != nil || len(f) != 2 || f[1].s != "short" {
		t.Fatalf("second record: %+v, %v", f, err)
	}
	if _, err := fr.next(); err != io.EOF {
		t.Fatalf("after the last record: %v", err)
	}
}
