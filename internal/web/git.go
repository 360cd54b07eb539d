package web

import (
	"bufio"
	"context"
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

// The page's git reads. Every page runs a small, fixed number of git
// processes whatever the size of the repository or the page: refs come
// from one for-each-ref, a directory from one ls-tree, objects from one
// cat-file --batch-command, a log page from one log, a commit from one
// diff-tree. Never one process per file or per commit.

// errNoObject reports a revision, path or object that does not exist.
var errNoObject = errors.New("no such object")

// gitRepo runs git in one materialized bare repository, through
// gitexec (a sanitized environment; cancellation stops the process).
type gitRepo struct {
	run *gitexec.Runner
	dir string
}

func (g gitRepo) command(ctx context.Context, args ...string) *gitexec.Cmd {
	return g.run.Command(ctx, g.dir, []string{"GIT_NO_REPLACE_OBJECTS=1"}, args...)
}

// output runs git and returns at most limit bytes of its stdout
// (limit <= 0: all of it), and whether the output was cut.
func (g gitRepo) output(ctx context.Context, limit int64, args ...string) ([]byte, bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := g.command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, fmt.Errorf("git %s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("git %s: %w", args[0], err)
	}
	var r io.Reader = out
	if limit > 0 {
		r = io.LimitReader(out, limit+1)
	}
	b, rerr := io.ReadAll(r)
	cut := limit > 0 && int64(len(b)) > limit
	if cut {
		b = b[:limit]
		cancel() // stop git: the rest is not wanted
	}
	werr := cmd.Wait()
	if cut {
		return b, true, nil
	}
	if rerr != nil {
		return nil, false, fmt.Errorf("git %s: %w", args[0], rerr)
	}
	if werr != nil {
		return nil, false, cmd.Wrap(werr)
	}
	return b, false, nil
}

// ref is a branch or tag.
type ref struct {
	Name    string // short name: "main", "v1.0"
	Full    string // refs/heads/main
	Tag     bool
	Commit  string // peeled commit id
	When    time.Time
	Subject string
}

// refs lists branches and tags in one for-each-ref.
func (g gitRepo) refs(ctx context.Context) ([]ref, error) {
	out, _, err := g.output(ctx, 0, "for-each-ref",
		"--format=%(refname)%1f%(objectname)%1f%(*objectname)%1f%(creatordate:unix)%1f%(contents:subject)%1e",
		"refs/heads", "refs/tags")
	if err != nil {
		return nil, err
	}
	var refs []ref
	for _, rec := range strings.Split(string(out), "\x1e") {
		rec = strings.TrimPrefix(rec, "\n")
		f := strings.Split(rec, "\x1f")
		if len(f) != 5 {
			continue
		}
		r := ref{Full: f[0], Commit: f[1], Subject: f[4]}
		if f[2] != "" {
			r.Commit = f[2]
		}
		if s, ok := strings.CutPrefix(f[0], "refs/heads/"); ok {
			r.Name = s
		} else {
			r.Name, r.Tag = strings.TrimPrefix(f[0], "refs/tags/"), true
		}
		if sec, err := strconv.ParseInt(f[3], 10, 64); err == nil {
			r.When = time.Unix(sec, 0).UTC()
		}
		refs = append(refs, r)
	}
	return refs, nil
}

// head returns the branch HEAD points at ("main"), read from the file.
func (g gitRepo) head() string {
	b, err := os.ReadFile(filepath.Join(g.dir, "HEAD"))
	if err != nil {
		return ""
	}
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
	if !ok {
		return ""
	}
	return s
}

// isHex reports whether s looks like a full or abbreviated object id.
func isHex(s string) bool {
	if len(s) < 4 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// resolve splits "ref/and/path" into a revision and a path, matching the
// longest branch or tag name (names may hold slashes), or else a commit
// id as the first segment. It returns the name as given and the commit.
func resolve(refs []ref, rest string) (name, commit, path string, ok bool) {
	best := -1
	for i, r := range refs {
		if (rest == r.Name || strings.HasPrefix(rest, r.Name+"/")) && (best < 0 || len(r.Name) > len(refs[best].Name)) {
			best = i
		}
	}
	if best >= 0 {
		r := refs[best]
		return r.Name, r.Commit, strings.TrimPrefix(strings.TrimPrefix(rest, r.Name), "/"), true
	}
	first, p, _ := strings.Cut(rest, "/")
	if isHex(first) {
		return first, first, p, true
	}
	return "", "", "", false
}

// entry is one ls-tree line.
type entry struct {
	Mode string
	Type string // blob, tree, commit (a submodule)
	ID   string
	Size int64 // -1 for trees and submodules
	Name string
}

// lsTree lists the tree at treeish ("<commit>:<path>") in one ls-tree.
func (g gitRepo) lsTree(ctx context.Context, treeish string) ([]entry, error) {
	out, _, err := g.output(ctx, 0, "ls-tree", "-z", "-l", "--end-of-options", treeish)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoObject, err)
	}
	var es []entry
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, name, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		if len(f) != 4 {
			continue
		}
		size, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			size = -1
		}
		es = append(es, entry{Mode: f[0], Type: f[1], ID: f[2], Size: size, Name: name})
	}
	return es, nil
}

// catFile is one git cat-file --batch-command process: any number of
// object reads for the price of one process.
type catFile struct {
	cmd    *gitexec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	cancel context.CancelFunc
}

func (g gitRepo) catFile(ctx context.Context) (*catFile, error) {
	ctx, cancel := context.WithCancel(ctx)
	cmd := g.command(ctx, "cat-file", "--batch-command")
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	return &catFile{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), cancel: cancel}, nil
}

// Close stops the process.
func (c *catFile) Close() {
	c.in.Close()
	c.cancel()
	_ = c.cmd.Wait()
}

// object is what cat-file says about one object.
type object struct {
	ID   string
	Type string
	Size int64
}

func (c *catFile) send(cmd, obj string) (object, error) {
	if strings.ContainsAny(obj, "\n") {
		return object{}, errNoObject
	}
	if _, err := fmt.Fprintf(c.in, "%s %s\n", cmd, obj); err != nil {
		return object{}, fmt.Errorf("git cat-file: %w", err)
	}
	line, err := c.out.ReadString('\n')
	if err != nil {
		return object{}, fmt.Errorf("git cat-file: %w", err)
	}
	f := strings.Fields(line)
	if len(f) == 2 && f[1] == "missing" || len(f) == 2 && f[1] == "ambiguous" {
		return object{}, errNoObject
	}
	if len(f) != 3 {
		return object{}, fmt.Errorf("git cat-file: unexpected answer %q", line)
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return object{}, fmt.Errorf("git cat-file: unexpected answer %q", line)
	}
	return object{ID: f[0], Type: f[1], Size: size}, nil
}

// info returns an object's id, type and size without its contents.
func (c *catFile) info(obj string) (object, error) { return c.send("info", obj) }

// contents reads a whole object. Call info first to check its size.
func (c *catFile) contents(obj string) (object, []byte, error) {
	o, err := c.send("contents", obj)
	if err != nil {
		return o, nil, err
	}
	b := make([]byte, o.Size+1) // and the newline after it
	if _, err := io.ReadFull(c.out, b); err != nil {
		return o, nil, fmt.Errorf("git cat-file: %w", err)
	}
	return o, b[:o.Size], nil
}

// stream copies an object's contents to w.
func (c *catFile) stream(obj string, w io.Writer) (object, error) {
	o, err := c.send("contents", obj)
	if err != nil {
		return o, err
	}
	if _, err := io.CopyN(w, c.out, o.Size); err != nil {
		return o, fmt.Errorf("copy %s: %w", obj, err)
	}
	_, err = c.out.Discard(1)
	return o, err
}

// commit is one log line.
type commit struct {
	ID, Parents, Author, Email, Subject, Body string
	When                                      time.Time
}

func parseCommit(rec string) (commit, bool) {
	f := strings.SplitN(rec, "\x1f", 7)
	if len(f) < 6 {
		return commit{}, false
	}
	c := commit{ID: f[0], Parents: f[1], Author: f[2], Email: f[3], Subject: f[5]}
	if sec, err := strconv.ParseInt(f[4], 10, 64); err == nil {
		c.When = time.Unix(sec, 0).UTC()
	}
	if len(f) == 7 {
		c.Body = strings.TrimSpace(f[6])
	}
	return c, true
}

const commitFormat = "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%s%x1f%b"

// log returns up to n commits reachable from rev (touching path, if
// set) after skipping skip, in one git log.
func (g gitRepo) log(ctx context.Context, rev, path string, skip, n int) ([]commit, error) {
	args := []string{"log", "-z", commitFormat, "-n", strconv.Itoa(n), "--skip=" + strconv.Itoa(skip), "--end-of-options", rev, "--"}
	if path != "" {
		args = append(args, ":(literal)"+path)
	}
	out, _, err := g.output(ctx, 0, args...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoObject, err)
	}
	var cs []commit
	for _, rec := range strings.Split(string(out), "\x00") {
		if c, ok := parseCommit(rec); ok {
			cs = append(cs, c)
		}
	}
	return cs, nil
}

// diff is a commit with its change.
type diff struct {
	Commit    commit
	Stat      string
	Patch     string
	Truncated bool
}

// show returns a commit and its diff against its first parent (the
// combined diff for a merge) in one diff-tree, reading at most limit
// bytes of it.
func (g gitRepo) show(ctx context.Context, id string, limit int64) (diff, error) {
	out, cut, err := g.output(ctx, limit, "diff-tree", "--root", "--cc", "-M", "--no-color", "--stat=160,120", "-p",
		commitFormat+"%x00", "--end-of-options", id)
	if err != nil {
		return diff{}, fmt.Errorf("%w: %w", errNoObject, err)
	}
	head, rest, ok := strings.Cut(string(out), "\x00")
	c, ok2 := parseCommit(strings.TrimSuffix(head, "\n"))
	if !ok || !ok2 {
		if cut {
			return diff{Commit: c, Truncated: true}, nil
		}
		return diff{}, fmt.Errorf("%w: %s", errNoObject, id)
	}
	rest = strings.TrimPrefix(strings.TrimLeft(rest, "\n"), "---\n")
	d := diff{Commit: c, Truncated: cut}
	if i := strings.Index(rest, "\ndiff --"); i >= 0 {
		d.Stat, d.Patch = rest[:i], rest[i+1:]
	} else if strings.HasPrefix(rest, "diff --") {
		d.Patch = rest
	} else {
		d.Stat = rest
	}
	if cut {
		if i := strings.LastIndexByte(d.Patch, '\n'); i >= 0 {
			d.Patch = d.Patch[:i+1]
		}
	}
	return d, nil
}
