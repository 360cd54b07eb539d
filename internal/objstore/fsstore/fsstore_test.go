package fsstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/objstore/storetest"
)

func newStore(t *testing.T) *fsstore.Store {
	t.Helper()
	s, err := fsstore.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) objstore.Store { return newStore(t) })
}

// TestCrossProcessCAS runs several processes (this test binary re-executed)
// that each increment a counter object with read + PutIfMatch. If two
// processes ever both won a CAS on the same ETag, an increment would be
// lost and the final value would fall short of the total number of wins.
func TestCrossProcessCAS(t *testing.T) {
	if dir := os.Getenv("FSSTORE_CAS_CHILD_DIR"); dir != "" {
		casChild(t, dir)
		return
	}
	dir := t.TempDir()
	s := newStoreAt(t, dir)
	ctx := context.Background()
	if _, err := s.Put(ctx, "counter", strings.NewReader("0"), 1); err != nil {
		t.Fatal(err)
	}
	const procs = 4
	outs := make([]*bytes.Buffer, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrossProcessCAS$", "-test.v")
		cmd.Env = append(os.Environ(), "FSSTORE_CAS_CHILD_DIR="+dir)
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	wins := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
		m := regexp.MustCompile(`wins=(\d+)`).FindStringSubmatch(outs[i].String())
		if m == nil {
			t.Fatalf("child %d printed no result:\n%s", i, outs[i])
		}
		n, _ := strconv.Atoi(m[1])
		wins += n
	}
	b, _, err := objstore.ReadAll(ctx, s, "counter", 64)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := strconv.Atoi(string(b)); got != wins || wins == 0 {
		t.Fatalf("counter = %d after %d winning CASes across %d processes: an update was lost", got, wins, procs)
	}
	t.Logf("%d processes, %d winning CASes, no lost update", procs, wins)
}

func casChild(t *testing.T, dir string) {
	s := newStoreAt(t, dir)
	ctx := context.Background()
	wins := 0
	for range 300 {
		b, info, err := objstore.ReadAll(ctx, s, "counter", 64)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(b))
		v := strconv.Itoa(n + 1)
		_, err = s.PutIfMatch(ctx, "counter", strings.NewReader(v), int64(len(v)), info.ETag)
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, objstore.ErrPreconditionFailed):
			t.Fatal(err)
		}
	}
	fmt.Printf("wins=%d\n", wins)
}

func newStoreAt(t *testing.T, dir string) *fsstore.Store {
	t.Helper()
	s, err := fsstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeyConflictsAreErrors(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	if _, err := s.Put(ctx, "a", strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "a/b", strings.NewReader("y"), 1); err == nil {
		t.Fatal("put of a/b over object a succeeded; the filesystem cannot hold both")
	}
	if _, _, err := s.Get(ctx, "a/b"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get(a/b) = %v, want ErrNotFound", err)
	}
	if got, _, err := objstore.ReadAll(ctx, s, "a", 8); err != nil || string(got) != "x" {
		t.Fatalf("object a = %q, %v", got, err)
	}
}
