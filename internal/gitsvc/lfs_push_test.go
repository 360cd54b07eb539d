package gitsvc_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/gittest"
)

// lfsHolds is a gitsvc.LFSObjects over a set, recording what it was
// asked: a stand-in for the store's references, which the server test
// (internal/server TestLFSPushWithMissingObjectRefused) covers with the
// real client and store.
type lfsHolds struct {
	mu    sync.Mutex
	has   map[string]bool
	asked int
}

func (h *lfsHolds) Missing(_ context.Context, _ string, oids []string) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.asked += len(oids)
	var out []string
	for _, o := range oids {
		if !h.has[o] {
			out = append(out, o)
		}
	}
	return out, nil
}

// OpenFor is unused here: these pushes have push protection off.
func (h *lfsHolds) OpenFor(context.Context, string, string, string) (io.ReadCloser, int64, error) {
	return nil, 0, errors.New("lfsHolds holds no bytes")
}

func pointer(content string) (string, string) {
	sum := sha256.Sum256([]byte(content))
	oid := hex.EncodeToString(sum[:])
	return oid, fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", oid, len(content))
}

// TestLFSPointersChecked: a push is refused when a pointer names an
// object the repository lacks, lands when it holds them all, and is
// refused without asking the store when it names more distinct objects
// than Options.MaxLFSPointers; files that merely look like pointers are
// not asked about.
func TestLFSPointersChecked(t *testing.T) {
	holds := &lfsHolds{has: map[string]bool{}}
	e := newStreamEnvWith(t, func(o *gitsvc.Options) { o.LFS = holds; o.MaxLFSPointers = 3 })
	src := filepath.Join(t.TempDir(), "src")
	e.gitIn("", "init", "-q", "-b", "main", src)
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		e.gitIn(src, "add", name)
	}
	a, pa := pointer("model a")
	b, pb := pointer("model b")
	write("a.bin", pa)
	write("b.bin", pb)
	write("notes.txt", "version https://git-lfs.github.com/spec/v1 is the pointer format\n")
	e.gitIn(src, "commit", "-qm", "two models")
	holds.has[a] = true

	out, err := e.tryGitIn(src, "push", e.url+"/r1", "main")
	if err == nil {
		t.Fatalf("a push naming an object the repository lacks landed:\n%s", out)
	}
	if !strings.Contains(out, b) || strings.Contains(out, a) {
		t.Errorf("the refusal should name %s (missing) and not %s (held):\n%s", b, a, out)
	}
	if holds.asked != 2 {
		t.Errorf("the store was asked about %d oids, want the 2 pointers", holds.asked)
	}

	holds.has[b] = true
	e.gitIn(src, "push", "-q", e.url+"/r1", "main")

	for i := range 4 {
		_, p := pointer(fmt.Sprintf("more %d", i))
		write(fmt.Sprintf("m%d.bin", i), p)
	}
	e.gitIn(src, "commit", "-qm", "four more")
	holds.asked = 0
	out, err = e.tryGitIn(src, "push", e.url+"/r1", "main")
	if err == nil || !strings.Contains(out, "at most 3") {
		t.Fatalf("a push naming 4 objects past a bound of 3: %v\n%s", err, out)
	}
	if holds.asked != 0 {
		t.Errorf("the store was asked about %d oids of a push past the bound", holds.asked)
	}
}

// tryGitIn runs git and returns its output and error text together, for
// a command expected to fail.
func (e *streamEnv) tryGitIn(dir string, args ...string) (string, error) {
	out, err := gittest.Run(e.git, dir, nil, args...)
	if err != nil {
		return out + "\n" + err.Error(), err
	}
	return out, nil
}
