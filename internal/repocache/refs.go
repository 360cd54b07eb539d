package repocache

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/wal"
)

// reconcileRefs makes the repository's refs equal to want in one
// update-ref transaction, deleting refs want lacks. Refs edited by hand
// are thereby corrected on every materialization.
func (c *Cache) reconcileRefs(ctx context.Context, git *gitexec.Runner, dir string, want []wal.Ref) error {
	out, err := git.Run(ctx, dir, nil, nil, "for-each-ref", "--format=%(objectname) %(refname)")
	if err != nil {
		return fmt.Errorf("list cached refs: %w", err)
	}
	have := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		id, name, ok := strings.Cut(sc.Text(), " ")
		if ok {
			have[name] = id
		}
	}
	var dels, upds strings.Builder
	wantSet := make(map[string]bool, len(want))
	for _, r := range want {
		wantSet[r.Name] = true
		if have[r.Name] != r.ID {
			fmt.Fprintf(&upds, "update %s %s\n", r.Name, r.ID)
		}
	}
	for name := range have {
		if !wantSet[name] {
			fmt.Fprintf(&dels, "delete %s\n", name)
		}
	}
	if dels.Len() == 0 && upds.Len() == 0 {
		return nil
	}
	_, err = git.Run(ctx, dir, nil, strings.NewReader(dels.String()+upds.String()), "update-ref", "--stdin")
	if err == nil || dels.Len() == 0 || upds.Len() == 0 {
		if err != nil {
			return fmt.Errorf("reconcile refs: %w", err)
		}
		return nil
	}
	// One transaction cannot replace "a" by "a/b" in the files backend;
	// deleting first and then updating reaches the same state.
	if _, err := git.Run(ctx, dir, nil, strings.NewReader(dels.String()), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("reconcile refs (deletes): %w", err)
	}
	if _, err := git.Run(ctx, dir, nil, strings.NewReader(upds.String()), "update-ref", "--stdin"); err != nil {
		return fmt.Errorf("reconcile refs (updates): %w", err)
	}
	return nil
}

// DefaultBranch picks HEAD's target: main, then master, then the first
// branch in name order, then main for an empty repository.
func DefaultBranch(refs []wal.Ref) string {
	first := ""
	for _, r := range refs {
		if r.Name == "refs/heads/main" {
			return r.Name
		}
	}
	for _, r := range refs {
		if r.Name == "refs/heads/master" {
			return r.Name
		}
		if first == "" && strings.HasPrefix(r.Name, "refs/heads/") {
			first = r.Name
		}
	}
	if first == "" {
		return "refs/heads/main"
	}
	return first
}

func (c *Cache) setHead(ctx context.Context, dir string, refs []wal.Ref) error {
	want := DefaultBranch(refs)
	b, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err == nil && strings.TrimSpace(string(b)) == "ref: "+want {
		return nil
	}
	if _, err := c.git.Run(ctx, dir, nil, nil, "symbolic-ref", "HEAD", want); err != nil {
		return fmt.Errorf("set HEAD: %w", err)
	}
	return nil
}
