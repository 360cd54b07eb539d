package pulls

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/gitexec"
)

// work runs git on a node's copy of a repository (Dir, never written)
// with a scratch object directory that takes every object git writes:
// the scratch repository of docs/adr/0119-server-side-merge.md. Objects
// of the copies named by alternates are readable; nothing reaches a
// copy, which stays a function of the log (docs/design.md §5).
type work struct {
	git *gitexec.Runner
	dir string
	env []string
	tmp string
}

// newWork makes the scratch area under tmpDir for the copy at dir, with
// the objects of the copies at more readable too (a fork's head).
func newWork(git *gitexec.Runner, tmpDir, dir string, more ...string) (*work, error) {
	tmp, err := os.MkdirTemp(tmpDir, "pull-")
	if err != nil {
		return nil, fmt.Errorf("scratch: %w", err)
	}
	objects := filepath.Join(tmp, "objects")
	if err := os.MkdirAll(filepath.Join(objects, "pack"), 0o755); err != nil {
		os.RemoveAll(tmp)
		return nil, fmt.Errorf("scratch: %w", err)
	}
	alts := []string{filepath.Join(dir, "objects")}
	for _, d := range more {
		alts = append(alts, filepath.Join(d, "objects"))
	}
	return &work{
		git: git, dir: dir, tmp: tmp,
		env: []string{
			"GIT_OBJECT_DIRECTORY=" + objects,
			"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + strings.Join(alts, string(os.PathListSeparator)),
		},
	}, nil
}

func (w *work) close() { os.RemoveAll(w.tmp) }

// run runs git and returns its stdout (small outputs only).
func (w *work) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return w.git.Run(ctx, w.dir, w.env, stdin, args...)
}

// exitCode is the exit status of a failed git, or -1.
func exitCode(err error) int { return gitexec.ExitCode(err) }

// mergeTree merges commits ours and theirs with git merge-tree
// --write-tree (git 2.38 and later), which computes their merge base
// itself. It returns the merged tree, or the conflicted paths (at most
// maxConflicts) and ErrNotMergeable.
func (w *work) mergeTree(ctx context.Context, ours, theirs string) (string, []string, error) {
	out, err := w.run(ctx, nil, "merge-tree", "--write-tree", "--name-only", "-z", "--no-messages", ours, theirs)
	fields := strings.Split(string(out), "\x00")
	switch {
	case err == nil && isOID(fields[0]):
		return fields[0], nil, nil
	case exitCode(err) == 1 && isOID(fields[0]):
		var paths []string
		for _, p := range fields[1:] {
			if p == "" {
				break
			}
			if len(paths) == 0 || paths[len(paths)-1] != p {
				paths = append(paths, p)
			}
			if len(paths) == maxConflicts {
				break
			}
		}
		return "", paths, fmt.Errorf("%w: %d conflicting file(s)", ErrNotMergeable, len(paths))
	case err != nil && strings.Contains(err.Error(), "unrelated histories"):
		return "", nil, fmt.Errorf("%w: the branches share no history", ErrNotMergeable)
	case err != nil:
		return "", nil, fmt.Errorf("merge-tree: %w", err)
	}
	return "", nil, fmt.Errorf("merge-tree: unexpected output %q", truncate(string(out), 100))
}

// maxConflicts bounds the conflicting paths reported.
const maxConflicts = 100

func isOID(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// commitObj is a commit object, parsed as much as merging needs.
type commitObj struct {
	id      string
	tree    string
	parents []string
	// author and committer are those lines after their keyword,
	// verbatim.
	author    string
	committer string
	// message is what follows the headers. A replay drops the other
	// headers (a signature would no longer hold; an encoding header goes
	// with it).
	message string
}

// parseCommit reads a raw commit object.
func parseCommit(id string, raw []byte) (commitObj, error) {
	c := commitObj{id: id}
	head, msg, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		head, msg = bytes.TrimSuffix(raw, []byte("\n")), nil
	}
	for _, line := range strings.Split(string(head), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "tree":
			c.tree = v
		case "parent":
			c.parents = append(c.parents, v)
		case "author":
			c.author = v
		case "committer":
			c.committer = v
		}
	}
	c.message = string(msg)
	if !isOID(c.tree) || c.author == "" {
		return commitObj{}, fmt.Errorf("commit %s: malformed object", id)
	}
	return c, nil
}

// maxCommitBytes bounds a commit object read: a merge reads messages and
// authors, never more.
const maxCommitBytes = 1 << 20

// readCommits reads the commit objects ids (one git cat-file --batch).
func (w *work) readCommits(ctx context.Context, ids []string) ([]commitObj, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	cmd := w.git.Command(ctx, w.dir, w.env, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(ids, "\n") + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, cmd.Wrap(err)
	}
	out := make([]commitObj, 0, len(ids))
	br := bufio.NewReader(stdout)
	var rerr error
	for _, id := range ids {
		line, err := br.ReadString('\n')
		if err != nil {
			rerr = fmt.Errorf("cat-file: %w", err)
			break
		}
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "commit" {
			rerr = fmt.Errorf("object %s is not a commit (%s)", id, strings.TrimSpace(line))
			break
		}
		size, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil || size > maxCommitBytes {
			rerr = fmt.Errorf("commit %s: size %s", id, f[2])
			break
		}
		raw := make([]byte, size+1)
		if _, err := io.ReadFull(br, raw); err != nil {
			rerr = fmt.Errorf("cat-file: %w", err)
			break
		}
		c, err := parseCommit(f[0], raw[:size])
		if err != nil {
			rerr = err
			break
		}
		out = append(out, c)
	}
	if rerr != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, rerr
	}
	if err := cmd.Wait(); err != nil {
		return nil, cmd.Wrap(err)
	}
	return out, nil
}

// revList lists the commits of tip that base does not reach, oldest
// first (--topo-order), at most max (more is ErrNotMergeable for a
// rebase, and cut for a list). It reports whether it cut.
func (w *work) revList(ctx context.Context, tip, base string, max int) ([]string, bool, error) {
	args := []string{"rev-list", "--topo-order", "--reverse", tip}
	if base != "" {
		args = append(args, "--not", base)
	}
	out, err := w.run(ctx, nil, args...)
	if err != nil {
		return nil, false, err
	}
	ids := strings.Fields(string(out))
	if len(ids) > max {
		return ids[:max], true, nil
	}
	return ids, false, nil
}

// identity is who a commit the server writes names.
type identity struct {
	name, email string
	when        time.Time
}

func (id identity) line() string {
	return fmt.Sprintf("%s <%s> %d +0000", id.name, id.email, id.when.Unix())
}

// cleanIdentity makes a name usable in a commit's identity line.
func cleanIdentity(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if s = strings.TrimSpace(s); s == "" {
		return "ghost"
	}
	return s
}

// rawCommit formats a commit object.
func rawCommit(tree string, parents []string, author, committer, message string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "tree %s\n", tree)
	for _, p := range parents {
		fmt.Fprintf(&b, "parent %s\n", p)
	}
	fmt.Fprintf(&b, "author %s\ncommitter %s\n\n%s", author, committer, message)
	return b.Bytes()
}

// objectID is git's SHA-1 name of an object of kind with content b.
func objectID(kind string, b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "%s %d\x00", kind, len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// writeCommits writes commit objects with one git hash-object, which
// checks each, and returns their ids, each checked against the id
// computed here (so a chain can name a parent not written yet).
func (w *work) writeCommits(ctx context.Context, raws [][]byte) ([]string, error) {
	var paths []string
	want := make([]string, len(raws))
	for i, raw := range raws {
		want[i] = objectID("commit", raw)
		p := filepath.Join(w.tmp, "commit-"+strconv.Itoa(i))
		if err := os.WriteFile(p, raw, 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	out, err := w.run(ctx, strings.NewReader(strings.Join(paths, "\n")+"\n"), "hash-object", "-t", "commit", "-w", "--stdin-paths")
	if err != nil {
		return nil, err
	}
	got := strings.Fields(string(out))
	if len(got) != len(want) {
		return nil, fmt.Errorf("hash-object wrote %d commits of %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return nil, fmt.Errorf("hash-object named commit %d %s, expected %s", i, got[i], want[i])
		}
	}
	return got, nil
}

// mergeSpec is what a merge makes.
type mergeSpec struct {
	method     Method
	base, head string // the tips: the base's, and the pull request's head
	title, msg string // the commit message's first line and the rest (merge and squash)
	author     identity
	committer  identity
}

// maxRebaseCommits bounds the commits a rebase merge replays, and the
// commits a squash message lists.
const maxRebaseCommits = 250

// merge makes the merge of spec in the scratch area and returns the
// base's new tip. Conflicts are ErrNotMergeable with the paths.
func (w *work) merge(ctx context.Context, spec mergeSpec) (string, []string, error) {
	switch spec.method {
	case MethodMerge, MethodSquash:
		tree, conflicts, err := w.mergeTree(ctx, spec.base, spec.head)
		if err != nil {
			return "", conflicts, err
		}
		parents := []string{spec.base, spec.head}
		if spec.method == MethodSquash {
			parents = parents[:1]
		}
		msg := spec.title + "\n"
		if spec.msg != "" {
			msg += "\n" + strings.TrimRight(spec.msg, "\n") + "\n"
		}
		ids, err := w.writeCommits(ctx, [][]byte{rawCommit(tree, parents, spec.author.line(), spec.committer.line(), msg)})
		if err != nil {
			return "", nil, err
		}
		return ids[0], nil, nil
	case MethodRebase:
		return w.rebase(ctx, spec)
	}
	return "", nil, fmt.Errorf("%w: merge method %q", ErrInvalid, spec.method)
}

// rebase replays the head's commits that the base lacks onto the base,
// oldest first, keeping each one's author and message; the committer is
// the merger. git 2.39's merge-tree cannot be told the merge base, so
// each replay of C onto the new tip X is the merge of two synthetic
// commits whose only common ancestor is a root commit with the tree of
// C's parent: a cherry-pick, three-way, without a work tree.
func (w *work) rebase(ctx context.Context, spec mergeSpec) (string, []string, error) {
	ids, cut, err := w.revList(ctx, spec.head, spec.base, maxRebaseCommits)
	if err != nil {
		return "", nil, err
	}
	if cut {
		return "", nil, fmt.Errorf("%w: more than %d commits to rebase", ErrNotMergeable, maxRebaseCommits)
	}
	if len(ids) == 0 {
		return "", nil, fmt.Errorf("%w: the head has no commits the base lacks", ErrNotMergeable)
	}
	commits, err := w.readCommits(ctx, ids)
	if err != nil {
		return "", nil, err
	}
	for _, c := range commits {
		if len(c.parents) != 1 {
			return "", nil, fmt.Errorf("%w: commit %s is a merge commit; rebase replays only single-parent commits (merge or squash instead)", ErrNotMergeable, c.id[:12])
		}
	}
	// The trees of the parents, and of the tip as it grows.
	need := []string{spec.base}
	for _, c := range commits {
		need = append(need, c.parents[0])
	}
	trees, err := w.treesOf(ctx, need)
	if err != nil {
		return "", nil, err
	}
	tip, tipTree := spec.base, trees[spec.base]
	var raws [][]byte
	for _, c := range commits {
		tree := c.tree
		if parentTree := trees[c.parents[0]]; parentTree != tipTree {
			t, conflicts, err := w.pick(ctx, parentTree, tipTree, c.tree)
			if err != nil {
				if errors.Is(err, ErrNotMergeable) {
					err = fmt.Errorf("%w: replaying %s", err, c.id[:12])
				}
				return "", conflicts, err
			}
			tree = t
		}
		raw := rawCommit(tree, []string{tip}, c.author, spec.committer.line(), c.message)
		raws = append(raws, raw)
		tip, tipTree = objectID("commit", raw), tree
	}
	out, err := w.writeCommits(ctx, raws)
	if err != nil {
		return "", nil, err
	}
	return out[len(out)-1], nil, nil
}

// treesOf returns the tree of each commit.
func (w *work) treesOf(ctx context.Context, ids []string) (map[string]string, error) {
	var in strings.Builder
	for _, id := range ids {
		in.WriteString(id + "^{tree}\n")
	}
	out, err := w.run(ctx, strings.NewReader(in.String()), "cat-file", "--batch-check=%(objectname)")
	if err != nil {
		return nil, err
	}
	lines := strings.Fields(string(out))
	if len(lines) != len(ids) {
		return nil, fmt.Errorf("trees of %d commits: got %d", len(ids), len(lines))
	}
	m := make(map[string]string, len(ids))
	for i, id := range ids {
		if !isOID(lines[i]) {
			return nil, fmt.Errorf("tree of %s: %q", id, lines[i])
		}
		m[id] = lines[i]
	}
	return m, nil
}

// synthetic is the identity of the scratch commits pick makes; they are
// never part of what is pushed.
const synthetic = "ghost <ghost@invalid> 0 +0000"

// pick merges the change from baseTree to theirsTree into oursTree: a
// three-way merge with an explicit base, through merge-tree on synthetic
// commits (rebase's doc).
func (w *work) pick(ctx context.Context, baseTree, oursTree, theirsTree string) (string, []string, error) {
	root := rawCommit(baseTree, nil, synthetic, synthetic, "base\n")
	rootID := objectID("commit", root)
	ours := rawCommit(oursTree, []string{rootID}, synthetic, synthetic, "ours\n")
	theirs := rawCommit(theirsTree, []string{rootID}, synthetic, synthetic, "theirs\n")
	ids, err := w.writeCommits(ctx, [][]byte{root, ours, theirs})
	if err != nil {
		return "", nil, err
	}
	return w.mergeTree(ctx, ids[1], ids[2])
}

// pack writes a pack of every object tip reaches that none of not
// reaches, into the scratch area, and returns its path ("" when it holds
// nothing).
func (w *work) pack(ctx context.Context, tip string, not []string) (string, error) {
	in := tip + "\n--not\n" + strings.Join(not, "\n") + "\n"
	prefix := filepath.Join(w.tmp, "push")
	out, err := w.run(ctx, strings.NewReader(in), "pack-objects", "--revs", "-q", prefix)
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(out))
	if !isOID(name) {
		return "", fmt.Errorf("pack-objects: unexpected output %q", truncate(string(out), 100))
	}
	path := prefix + "-" + name + ".pack"
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Size() <= 32 { // a header and a trailer: no objects
		return "", nil
	}
	return path, nil
}

// isAncestor reports whether a is an ancestor of b (or b itself).
func (w *work) isAncestor(ctx context.Context, a, b string) (bool, error) {
	_, err := w.run(ctx, nil, "merge-base", "--is-ancestor", a, b)
	switch exitCode(err) {
	case -1:
		if err != nil {
			return false, err
		}
		return true, nil
	case 0:
		return true, nil
	case 1:
		return false, nil
	}
	return false, err
}

// mergeBase is the best common ancestor of a and b, or "" when they share
// no history.
func (w *work) mergeBase(ctx context.Context, a, b string) (string, error) {
	out, err := w.run(ctx, nil, "merge-base", a, b)
	if exitCode(err) == 1 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}
