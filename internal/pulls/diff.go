package pulls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/meta"
)

// Bounds of the commits and files of a pull request, GitHub's where it
// has them (docs/adr/0090-bounded-serving.md).
const (
	// MaxCommits is the most commits a pull request lists.
	MaxCommits = 250
	// MaxFiles is the most files it lists.
	MaxFiles = 3000
	// MaxPatchBytes bounds the patches of one page of files, the web
	// UI's commit page's bound: a file whose patch does not fit gets
	// none.
	MaxPatchBytes = 1 << 20
	// maxDiffRead bounds what is read of git's diff output for a page.
	maxDiffRead = MaxPatchBytes + 64<<10
)

// Person is a commit's author or committer.
type Person struct {
	Name  string
	Email string
	Date  time.Time
}

// Commit is one commit of a pull request.
type Commit struct {
	SHA       string
	Tree      string
	Parents   []string
	Author    Person
	Committer Person
	Message   string
}

// File is one file a pull request changes, against the merge base.
type File struct {
	SHA      string // the blob at the head ("" when removed)
	Filename string
	// Status is added, removed, modified, renamed, copied or changed
	// (a mode or type change).
	Status    string
	Additions int
	Deletions int
	Binary    bool
	// Patch is the unified diff's hunks, when they fit the page's budget
	// (PatchOmitted otherwise).
	Patch            string
	PatchOmitted     bool
	PreviousFilename string
}

// tips returns the copy of base and the two commits pr is read between:
// while open the base branch and refs/pull/<n>/head, after the tips it
// closed or merged at.
func (s *Service) tips(ctx context.Context, base meta.Repo, pr PullRequest) (Copy, string, string, error) {
	bc, err := s.opts.Copies.Materialize(ctx, base.ID)
	if err != nil {
		return Copy{}, "", "", err
	}
	b, h := pr.BaseSHA, pr.HeadSHA
	if pr.State == Open {
		b, h = bc.Refs[branchRef(pr.Base)], bc.Refs[PullRef(pr.Number)]
	}
	if b == "" || h == "" {
		return Copy{}, "", "", fmt.Errorf("%w: the branches of pull request #%d", ErrNotFound, pr.Number)
	}
	return bc, b, h, nil
}

// Commits returns page (from 1) of pr's commits, perPage at most (up to
// MaxPageSize): those its head has and its base lacks, oldest first, at
// most MaxCommits in all.
func (s *Service) Commits(ctx context.Context, base meta.Repo, pr PullRequest, page, perPage int) ([]Commit, error) {
	page, perPage = pageBounds(page, perPage)
	var out []Commit
	err := s.onTips(ctx, base, pr, func(ctx context.Context, w *work, b, h string) error {
		ids, _, err := w.revList(ctx, h, b, MaxCommits)
		if err != nil {
			return err
		}
		from := (page - 1) * perPage
		if from >= len(ids) {
			out = []Commit{}
			return nil
		}
		objs, err := w.readCommits(ctx, ids[from:min(len(ids), from+perPage)])
		if err != nil {
			return err
		}
		out = make([]Commit, 0, len(objs))
		for _, c := range objs {
			out = append(out, Commit{SHA: c.id, Tree: c.tree, Parents: c.parents, Author: parsePerson(c.author), Committer: parsePerson(c.committer), Message: c.message})
		}
		return nil
	})
	return out, err
}

// onTips runs fn with pr's two tips (tips) in a scratch area beside this
// node's copy of base, within the git work's time bound.
func (s *Service) onTips(ctx context.Context, base meta.Repo, pr PullRequest, fn func(ctx context.Context, w *work, b, h string) error) error {
	bc, b, h, err := s.tips(ctx, base, pr)
	if err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, s.opts.GitTimeout)
	defer cancel()
	w, err := newWork(s.opts.Git, s.tmp(), bc.Dir)
	if err != nil {
		return err
	}
	defer w.close()
	return fn(gctx, w, b, h)
}

// CommitIDs returns the ids of pr's commits (those its head has and its
// base lacks), oldest first, at most MaxCommits: what its page shows the
// secret-scanning alerts of.
func (s *Service) CommitIDs(ctx context.Context, base meta.Repo, pr PullRequest) ([]string, error) {
	var ids []string
	err := s.onTips(ctx, base, pr, func(ctx context.Context, w *work, b, h string) (err error) {
		ids, _, err = w.revList(ctx, h, b, MaxCommits)
		return err
	})
	return ids, err
}

// parsePerson reads "Name <email> <unix> <tz>".
func parsePerson(line string) Person {
	var p Person
	lt, gt := strings.LastIndexByte(line, '<'), strings.LastIndexByte(line, '>')
	if lt < 0 || gt < lt {
		return Person{Name: line}
	}
	p.Name, p.Email = strings.TrimSpace(line[:lt]), line[lt+1:gt]
	if f := strings.Fields(line[gt+1:]); len(f) >= 1 {
		if ts, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			p.Date = time.Unix(ts, 0).UTC()
		}
	}
	return p
}

func pageBounds(page, perPage int) (int, int) {
	if page < 1 {
		page = 1
	}
	if perPage < 1 {
		perPage = DefaultPageSize
	}
	return page, min(perPage, MaxPageSize)
}

// rawEntry is one file of git diff --raw -z.
type rawEntry struct {
	status   byte
	oldPath  string
	path     string
	newBlob  string
	numstatA int
	numstatD int
	binary   bool
}

// Files returns page (from 1) of the files pr changes against the merge
// base of its tips, perPage at most (up to MaxPageSize), at most
// MaxFiles in all, with their patches while the page's budget lasts.
// A page runs two git processes whatever the pull request's size: the
// list (git diff --raw --numstat), then the patches of the page's
// files alone.
func (s *Service) Files(ctx context.Context, base meta.Repo, pr PullRequest, page, perPage int) ([]File, error) {
	page, perPage = pageBounds(page, perPage)
	bc, b, h, err := s.tips(ctx, base, pr)
	if err != nil {
		return nil, err
	}
	gctx, cancel := context.WithTimeout(ctx, s.opts.GitTimeout)
	defer cancel()
	w, err := newWork(s.opts.Git, s.tmp(), bc.Dir)
	if err != nil {
		return nil, err
	}
	defer w.close()
	mb, err := w.mergeBase(gctx, b, h)
	if err != nil {
		return nil, err
	}
	if mb == "" {
		return nil, fmt.Errorf("%w: the branches share no history", ErrNotMergeable)
	}
	out, err := w.run(gctx, nil, "diff", "--raw", "--numstat", "-z", "-M", "--no-abbrev", "--no-ext-diff", "--no-textconv", mb, h)
	if err != nil {
		return nil, err
	}
	entries, err := parseRawNumstat(out)
	if err != nil {
		return nil, err
	}
	entries = entries[:min(len(entries), MaxFiles)]
	from := (page - 1) * perPage
	if from >= len(entries) {
		return []File{}, nil
	}
	entries = entries[from:min(len(entries), from+perPage)]
	files := make([]File, len(entries))
	args := []string{"diff", "--raw", "-p", "-z", "-M", "--no-abbrev", "--no-color", "--no-ext-diff", "--no-textconv", mb, h, "--"}
	for i, e := range entries {
		files[i] = File{SHA: e.newBlob, Filename: e.path, Status: statusName(e.status), Additions: e.numstatA, Deletions: e.numstatD, Binary: e.binary}
		if e.status == 'D' {
			files[i].SHA = ""
		}
		if e.oldPath != "" {
			files[i].PreviousFilename = e.oldPath
			args = append(args, ":(literal)"+e.oldPath)
		}
		args = append(args, ":(literal)"+e.path)
	}
	patches, err := w.patches(gctx, args)
	if err != nil {
		return nil, err
	}
	budget := MaxPatchBytes
	for i := range files {
		p, ok := patches[[2]string{files[i].PreviousFilename, files[i].Filename}]
		switch {
		case files[i].Binary:
		case !ok || len(p) > budget:
			files[i].PatchOmitted = true
		default:
			files[i].Patch, budget = p, budget-len(p)
		}
	}
	return files, nil
}

func statusName(c byte) string {
	switch c {
	case 'A':
		return "added"
	case 'D':
		return "removed"
	case 'M':
		return "modified"
	case 'R':
		return "renamed"
	case 'C':
		return "copied"
	}
	return "changed"
}

// parseRawNumstat reads git diff --raw --numstat -z: the raw entries,
// then as many numstat entries in the same order.
func parseRawNumstat(b []byte) ([]rawEntry, error) {
	f := strings.Split(string(b), "\x00")
	var out []rawEntry
	i := 0
	for i < len(f) && strings.HasPrefix(f[i], ":") {
		meta := strings.Fields(f[i][1:])
		if len(meta) != 5 || len(meta[4]) == 0 {
			return nil, fmt.Errorf("diff --raw: entry %q", f[i])
		}
		e := rawEntry{status: meta[4][0], newBlob: meta[3]}
		if e.status == 'R' || e.status == 'C' {
			if i+2 >= len(f) {
				return nil, errors.New("diff --raw: a rename without its paths")
			}
			e.oldPath, e.path = f[i+1], f[i+2]
			i += 3
		} else {
			if i+1 >= len(f) {
				return nil, errors.New("diff --raw: an entry without its path")
			}
			e.path = f[i+1]
			i += 2
		}
		out = append(out, e)
	}
	for k := range out {
		if i >= len(f) {
			return nil, errors.New("diff --numstat: fewer entries than --raw")
		}
		a, d, rest, ok := cut3(f[i])
		if !ok {
			return nil, fmt.Errorf("diff --numstat: entry %q", f[i])
		}
		i++
		if rest == "" { // a rename: the two paths follow
			i += 2
		}
		if a == "-" {
			out[k].binary = true
			continue
		}
		out[k].numstatA, _ = strconv.Atoi(a)
		out[k].numstatD, _ = strconv.Atoi(d)
	}
	return out, nil
}

func cut3(s string) (string, string, string, bool) {
	a, rest, ok1 := strings.Cut(s, "\t")
	d, rest, ok2 := strings.Cut(rest, "\t")
	return a, d, rest, ok1 && ok2
}

// patches runs git diff --raw -p -z with args and returns each file's
// hunks by its (old path, path), reading at most maxDiffRead bytes:
// patches past that are missing. The raw section names the files in the
// order of their patches.
func (w *work) patches(ctx context.Context, args []string) (map[[2]string]string, error) {
	cmd := w.git.Command(ctx, w.dir, w.env, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, cmd.Wrap(err)
	}
	b, rerr := io.ReadAll(io.LimitReader(stdout, maxDiffRead))
	cut := len(b) == maxDiffRead
	if cut {
		cmd.Process.Kill()
	}
	werr := cmd.Wait()
	switch {
	case rerr != nil:
		return nil, rerr
	case werr != nil && !cut:
		return nil, cmd.Wrap(werr)
	}
	// The raw entries, up to the NUL before the first "diff --git".
	var names [][2]string
	rest := b
	for len(rest) > 0 && rest[0] == ':' {
		f := bytes.SplitN(rest, []byte{0}, 4)
		meta := strings.Fields(string(f[0][1:]))
		if len(meta) != 5 || len(f) < 2 {
			break
		}
		if meta[4][0] == 'R' || meta[4][0] == 'C' {
			if len(f) < 4 {
				break
			}
			names = append(names, [2]string{string(f[1]), string(f[2])})
			rest = f[3]
		} else {
			names = append(names, [2]string{"", string(f[1])})
			rest = bytes.Join(f[2:], []byte{0})
		}
	}
	rest = bytes.TrimLeft(rest, "\x00\n")
	out := map[[2]string]string{}
	blocks := splitDiff(string(rest))
	if cut && len(blocks) > 0 {
		blocks = blocks[:len(blocks)-1] // the last one was cut short
	}
	for i, blk := range blocks {
		if i >= len(names) {
			break
		}
		if at := strings.Index(blk, "\n@@ "); at >= 0 {
			out[names[i]] = blk[at+1:]
		} else {
			out[names[i]] = "" // no hunks: a rename, a mode change
		}
	}
	return out, nil
}

// splitDiff cuts a patch stream into its files' blocks, at each line that
// starts "diff --git " (a patch's own lines start with ' ', '+', '-',
// '@' or '\\', never 'd').
func splitDiff(s string) []string {
	var out []string
	for s != "" {
		next := strings.Index(s, "\ndiff --git ")
		if next < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:next+1])
		s = s[next+1:]
	}
	return out
}
