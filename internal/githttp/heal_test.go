package githttp_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// corruptObject flips bytes in the middle of the first object of type
// typ ("" for the last object of any type) in the cached repository's
// largest pack, keeping the file's size: damage inside object data,
// where the structural check of a materialization does not look.
func corruptObject(t *testing.T, e *env, repo, typ string) {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(e.cache.Dir(), "repos", repo+".git", "objects", "pack", "*.pack"))
	if len(packs) == 0 {
		t.Fatal("no cached pack")
	}
	sort.Slice(packs, func(i, j int) bool { return size(packs[i]) > size(packs[j]) })
	p := packs[0]
	// verify-pack lines: "<id> <type> <size> <packed size> <offset>".
	out := gitOut(t, "", "verify-pack", "-v", strings.TrimSuffix(p, ".pack")+".idx")
	at, packed := int64(-1), int64(0)
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 || len(f[0]) != 40 {
			continue
		}
		n, _ := strconv.ParseInt(f[3], 10, 64)
		off, _ := strconv.ParseInt(f[4], 10, 64)
		if typ == "" && off > at || typ != "" && f[1] == typ && at < 0 {
			at, packed = off, n
		}
	}
	if at < 0 {
		t.Fatalf("no %s object in %s", typ, p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := at + packed/2; i < at+packed/2+4; i++ {
		b[i] ^= 0xff
	}
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, b, 0o444); err != nil {
		t.Fatal(err)
	}
}

// rot makes the damage corruptObject did look like bit rot: it records the
// packs' current size, change time and inode as verified in the cache's
// list (repocache's ghost-verified, "<file> <size> <ctime ns> <inode>"),
// as if their bytes had changed without any write the cache could see.
func rot(t *testing.T, e *env, repo string) {
	t.Helper()
	dir := filepath.Join(e.cache.Dir(), "repos", repo+".git")
	files, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*"))
	var b strings.Builder
	for _, f := range files {
		var st syscall.Stat_t
		if err := syscall.Stat(f, &st); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %d %d %d\n", filepath.Base(f), st.Size, st.Ctim.Nano(), st.Ino)
	}
	if err := os.WriteFile(filepath.Join(dir, "ghost-verified"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func size(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return st.Size()
}

// counter returns the value of the counter or histogram count name with
// the label value lv (any labels when "").
func counter(t *testing.T, reg *prometheus.Registry, name, lv string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := lv == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetValue() == lv
			}
			if !match {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				sum += float64(h.GetSampleCount())
			} else {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func TestDamagedCachePackIsRebuiltBeforeServing(t *testing.T) {
	e, reg := limitEnv(t, "", nil)
	src := workTree(t)
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "--all")
	// A blob: git upload-pack would copy it out without noticing.
	corruptObject(t, e, "pub", "")
	rebuilds := counter(t, reg, "ghost_cache_materialize_seconds", "rebuild")

	dst := filepath.Join(t.TempDir(), "c")
	git(t, "", "clone", "-q", e.remote("alice/pub", ""), dst)
	git(t, dst, "fsck", "--full", "--strict")
	if got := counter(t, reg, "ghost_cache_materialize_seconds", "rebuild"); got != rebuilds+1 {
		t.Fatalf("%v rebuilds, want 1", got-rebuilds)
	}
}

func TestFailingGitIsRetriedOnARebuiltCache(t *testing.T) {
	e, reg := limitEnv(t, "", nil)
	src := workTree(t)
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "--all")
	// A commit, which git reads (and fails on) before it sends anything.
	corruptObject(t, e, "pub", "commit")
	rot(t, e, "pub")

	dst := filepath.Join(t.TempDir(), "c")
	git(t, "", "clone", "-q", e.remote("alice/pub", ""), dst)
	git(t, dst, "fsck", "--full", "--strict")
	if n := counter(t, reg, "ghost_cache_heal_retries_total", ""); n != 1 {
		t.Fatalf("%v heal retries, want 1", n)
	}
}

func TestFailureMidStreamHealsTheNextRequest(t *testing.T) {
	// The first fetch's git sends 128 KiB (past what is held back) and
	// fails: too late to retry.
	gitPath := failOnceGit(t, 128<<10/21)
	e, reg := limitEnv(t, gitPath, nil)
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	b := make([]byte, 64<<10)
	rand.Read(b)
	write(t, src, "a.bin", string(b))
	git(t, src, "add", ".")
	git(t, src, "commit", "-q", "-m", "a")
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "main")
	// Rotten data that git would serve without noticing.
	corruptObject(t, e, "pub", "blob")
	rot(t, e, "pub")

	dst := filepath.Join(t.TempDir(), "c")
	if out, err := gitErr(t, "", "clone", "-q", e.remote("alice/pub", ""), dst); err == nil {
		t.Fatalf("first clone succeeded:\n%s", out)
	}
	os.RemoveAll(dst)
	git(t, "", "clone", "-q", e.remote("alice/pub", ""), dst)
	git(t, dst, "fsck", "--full", "--strict")
	if n := counter(t, reg, "ghost_cache_heal_retries_total", ""); n != 0 {
		t.Fatalf("%v heal retries, want none", n)
	}
}

// failOnceGit writes a git wrapper whose first protocol v2 fetch command
// answers the start of a packfile section and n side-band progress
// packets of 21 bytes, which a client takes without complaint, and then
// fails. Everything else runs git.
func failOnceGit(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	once := filepath.Join(dir, "once")
	os.WriteFile(once, nil, 0o644)
	gitPath := filepath.Join(dir, "git")
	os.WriteFile(gitPath, []byte(fmt.Sprintf(`#!/bin/sh
if [ "$1" = upload-pack ] && [ "$3" != --advertise-refs ]; then
	req=$(mktemp)
	cat >"$req"
	if grep -q command=fetch "$req" && rm %q 2>/dev/null; then
		rm -f "$req"
		printf '000dpackfile\n'
		i=0
		while [ $i -lt %d ]; do
			printf '0015\002remote progress\n'
			i=$((i+1))
		done
		exit 1
	fi
	git "$@" <"$req"
	rc=$?
	rm -f "$req"
	exit $rc
fi
exec git "$@"
`, once, n)), 0o755)
	return gitPath
}

func TestEarlyFailureIsRetriedUnseen(t *testing.T) {
	// git fails after writing a little: that output is held back, so the
	// request can still be retried on the healed cache.
	e, reg := limitEnv(t, failOnceGit(t, 10), nil)
	src := workTree(t)
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "--all")
	corruptObject(t, e, "pub", "blob")
	rot(t, e, "pub")

	dst := filepath.Join(t.TempDir(), "c")
	git(t, "", "clone", "-q", e.remote("alice/pub", ""), dst)
	git(t, dst, "fsck", "--full", "--strict")
	if n := counter(t, reg, "ghost_cache_heal_retries_total", ""); n != 1 {
		t.Fatalf("%v heal retries, want 1", n)
	}
}
