package repocache

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// HeadBranch is the full name of the branch HEAD names in a repository
// with refs whose default-branch setting is setting (without
// refs/heads/): that branch when it exists, otherwise DefaultBranch's
// choice. A setting can name a missing branch only after a push deleted
// it in a race with the change of the setting; the repository then
// serves as if unset until the branch is pushed again
// (docs/adr/0110-default-branch.md).
func HeadBranch(refs []wal.Ref, setting string) string {
	if setting != "" {
		full := "refs/heads/" + setting
		if _, ok := slices.BinarySearchFunc(refs, full, func(r wal.Ref, n string) int { return strings.Compare(r.Name, n) }); ok {
			return full
		}
	}
	return DefaultBranch(refs)
}

// SetDefaultBranch records repo's default-branch setting (the
// repository record's, "" for none) for the materializations that
// follow, in whoever's request: each sets HEAD by HeadBranch. The git
// service calls it before every Materialize with the setting it read for
// that request, so a node learns a change at its next git request for
// the repository; callers that do not know the setting (scans, the web
// pages) leave HEAD as the last request set it.
func (c *Cache) SetDefaultBranch(repo, branch string) {
	if branch == "" {
		c.heads.Delete(repo)
		return
	}
	c.heads.Store(repo, branch)
}

func (c *Cache) defaultBranch(repo string) string {
	v, _ := c.heads.Load(repo)
	s, _ := v.(string)
	return s
}

func (c *Cache) setHead(ctx context.Context, repo, dir string, refs []wal.Ref) error {
	want := HeadBranch(refs, c.defaultBranch(repo))
	b, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	if err == nil && strings.TrimSpace(string(b)) == "ref: "+want {
		return nil
	}
	if _, err := c.git.Run(ctx, dir, nil, nil, "symbolic-ref", "HEAD", want); err != nil {
		return fmt.Errorf("set HEAD: %w", err)
	}
	return nil
}
