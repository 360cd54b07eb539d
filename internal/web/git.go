package web

import (
	"bufio"
	"bytes"
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
// processes whatever the size of the repository or the page: a page of
// refs from one for-each-ref, a revision from one cat-file --batch-check,
// a directory from one ls-tree, objects from one cat-file --batch-command,
// a log page from one log, a commit from one diff-tree. Never one process
// per file or per commit.
//
// Every read is bounded in bytes and in time (docs/adr/0090-bounded-serving.md):
// git's output is streamed, never read whole; each field of a record
// (a subject, an author, a ref name) is kept up to a cap and the rest of
// it skipped; a listing stops at its page and git is stopped there; and
// each process runs under the page's git deadline and the request's
// context, so a client that goes away stops it.

// Caps on what a page keeps of one record.
const (
	// maxSubject bounds a commit subject shown; longer ones are cut and
	// end in "…". Pushed commit messages can be as large as a push.
	maxSubject = 1 << 10
	// maxBody bounds the message body shown on a commit's page, the only
	// page that shows bodies.
	maxBody = 64 << 10
	// maxField bounds every other field: names, emails, ref names, dates.
	maxField = 1 << 10
	// maxTreeName bounds a file name in a listing (git allows longer, no
	// file system does).
	maxTreeName = 4 << 10
	// refsPage is the number of branches or tags a page shows.
	refsPage = 50
	// maxRefCandidates bounds the prefixes of a path tried as ref names.
	maxRefCandidates = 32
)

// errNoObject reports a revision, path or object that does not exist, or
// that the page may not show (an object no ref reaches, docs/adr/0091-reachable-objects.md).
var errNoObject = errors.New("no such object")

// gitRepo runs git in one materialized bare repository, through
// gitexec (a sanitized environment; cancellation stops the process).
type gitRepo struct {
	run *gitexec.Runner
	dir string
	// timeout bounds each git process (0: only the request's context).
	timeout time.Duration
}

// command prepares git under the repository's git deadline; call the
// returned cancel after Wait. Its context is the process's own, to tell
// the deadline from the caller's end.
func (g gitRepo) command(ctx context.Context, args ...string) (*gitexec.Cmd, context.Context, context.CancelFunc) {
	var cancel context.CancelFunc
	if g.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, g.timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	return g.run.Command(ctx, g.dir, []string{"GIT_NO_REPLACE_OBJECTS=1"}, args...), ctx, cancel
}

// stream runs git and hands its stdout to read. When read returns before
// the end of the output, git is stopped and stream reports the output
// cut; otherwise git's own failure is the error. The caller's end (a
// client that went away) is the context's error, and the git deadline
// errGitTimeout.
func (g gitRepo) stream(ctx context.Context, read func(*bufio.Reader) error, args ...string) (cut bool, err error) {
	cmd, pctx, cancel := g.command(ctx, args...)
	defer cancel()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return false, fmt.Errorf("git %s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("git %s: %w", args[0], err)
	}
	br := bufio.NewReaderSize(out, 64<<10)
	rerr := read(br)
	if rerr == nil {
		if _, perr := br.Peek(1); perr != io.EOF {
			cut = true
		}
	}
	if cut || rerr != nil {
		cancel() // git has more to say, and it is not wanted
	}
	werr := cmd.Wait()
	switch {
	case ctx.Err() != nil:
		return false, fmt.Errorf("git %s: %w", args[0], ctx.Err())
	case rerr != nil:
		return false, rerr
	case cut:
		return true, nil
	case pctx.Err() != nil:
		return false, fmt.Errorf("git %s: %w", args[0], errGitTimeout)
	case werr != nil:
		return false, cmd.Wrap(werr)
	}
	return false, nil
}

// errGitTimeout reports a git read that ran out of the page's time.
var errGitTimeout = errors.New("git took too long")

// field is one field of a record, and whether it was cut.
type field struct {
	s   string
	cut bool
}

// text is the field as shown: cut ones end in "…".
func (f field) text() string {
	if f.cut {
		return strings.ToValidUTF8(f.s, "") + "…"
	}
	return f.s
}

// fieldReader reads records from git's output, each ended by end and
// split into at most n fields by sep (the last field takes any further
// separator). It keeps at most caps[i] bytes of field i (the last cap for
// the fields after) and skips the rest without keeping it, so a record
// of any size costs its caps.
type fieldReader struct {
	r    *bufio.Reader
	end  byte
	sep  byte // 0: one field
	n    int
	caps []int
}

func (fr *fieldReader) capOf(i int) int {
	if i < len(fr.caps) {
		return fr.caps[i]
	}
	return fr.caps[len(fr.caps)-1]
}

// next returns the next record's fields, or io.EOF after the last.
func (fr *fieldReader) next() ([]field, error) {
	var fields []field
	var cur []byte
	cut, started := false, false
	for {
		chunk, err := fr.r.ReadSlice(fr.end)
		data := chunk
		if err == nil {
			data = chunk[:len(chunk)-1]
		}
		if len(chunk) > 0 {
			started = true
		}
		for {
			i := -1
			if fr.sep != 0 && len(fields) < fr.n-1 {
				i = bytes.IndexByte(data, fr.sep)
			}
			part := data
			if i >= 0 {
				part = data[:i]
			}
			if room := fr.capOf(len(fields)) - len(cur); len(part) > room {
				cur, cut = append(cur, part[:max(room, 0)]...), true
			} else {
				cur = append(cur, part...)
			}
			if i < 0 {
				break
			}
			fields = append(fields, field{string(cur), cut})
			cur, cut = cur[:0], false
			data = data[i+1:]
		}
		switch {
		case err == nil:
			return append(fields, field{string(cur), cut}), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && started:
			// The last record, without its terminator.
			return append(fields, field{string(cur), cut}), nil
		}
		return nil, err
	}
}

// ref is a branch or tag.
type ref struct {
	Name    string // short name: "main", "v1.0"
	Full    string // refs/heads/main
	Tag     bool
	Commit  string // peeled commit id
	When    time.Time
	Subject string // the head's, on the repository page
}

const refFormat = "--format=%(refname)%1f%(objectname)%1f%(*objectname)%1f%(creatordate:unix)"

// refPage lists up to n refs under prefix ("refs/heads" or "refs/tags")
// in one for-each-ref: newest first when byDate, else in name order
// after the ref named after (a short name; "" for the first page). It
// keeps the page only and stops git once the page is full: more reports
// whether there were more. A page after the first reads (and drops) the
// names before it, since git 2.39's for-each-ref cannot start after a
// name.
func (g gitRepo) refPage(ctx context.Context, prefix, after string, n int, byDate bool) (refs []ref, more bool, err error) {
	args := []string{"for-each-ref", refFormat}
	if byDate {
		args = append(args, "--sort=-creatordate")
	}
	if after == "" {
		args = append(args, "--count="+strconv.Itoa(n+1))
	}
	args = append(args, prefix)
	afterFull := prefix + "/" + after
	_, err = g.stream(ctx, func(br *bufio.Reader) error {
		fr := &fieldReader{r: br, end: '\n', sep: 0x1f, n: 4, caps: []int{maxField}}
		for {
			f, err := fr.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if len(f) != 4 || f[0].cut {
				continue
			}
			if after != "" && f[0].s <= afterFull {
				continue
			}
			if len(refs) == n {
				more = true
				return nil
			}
			r := ref{Full: f[0].s, Commit: f[1].s}
			if f[2].s != "" {
				r.Commit = f[2].s
			}
			if s, ok := strings.CutPrefix(r.Full, "refs/heads/"); ok {
				r.Name = s
			} else {
				r.Name, r.Tag = strings.TrimPrefix(r.Full, "refs/tags/"), true
			}
			if sec, err := strconv.ParseInt(f[3].s, 10, 64); err == nil {
				r.When = time.Unix(sec, 0).UTC()
			}
			refs = append(refs, r)
		}
	}, args...)
	return refs, more, err
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

// refNameOK reports whether name can be a branch or tag name by git's
// rules (git check-ref-format), so that it can be handed to cat-file as
// "refs/heads/<name>" and mean nothing but that ref.
func refNameOK(name string) bool {
	if name == "" || name == "@" || len(name) > 1024 || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") {
		return false
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return false
		}
	}
	for _, seg := range strings.Split(name, "/") {
		if strings.HasPrefix(seg, ".") || strings.HasSuffix(seg, ".lock") {
			return false
		}
	}
	return true
}

// locate splits "ref/and/path" into a revision and a path: the longest
// branch or tag name that is a prefix of rest (names may hold slashes,
// branches win over tags of the same name), else a commit id, full or
// abbreviated, as the first segment, which must be reachable from a ref
// (docs/adr/0091-reachable-objects.md). One cat-file --batch-check asks
// for every candidate name at once, so the cost follows the path, not
// the number of refs. It returns the name as given and the commit;
// errNoObject when nothing matches.
func (g gitRepo) locate(ctx context.Context, rest string) (name, commit, path string, err error) {
	segs := strings.Split(rest, "/")
	var cands []string
	for k := min(len(segs), maxRefCandidates); k >= 1; k-- {
		if c := strings.Join(segs[:k], "/"); refNameOK(c) {
			cands = append(cands, c)
		}
	}
	var lines []string
	for _, c := range cands {
		lines = append(lines, "refs/heads/"+c+"^{commit}", "refs/tags/"+c+"^{commit}")
	}
	hex := ""
	if isHex(segs[0]) {
		hex = segs[0]
		lines = append(lines, hex+"^{commit}")
	}
	if len(lines) == 0 {
		return "", "", "", errNoObject
	}
	ids, err := g.batchCheck(ctx, lines)
	if err != nil {
		return "", "", "", err
	}
	for i, c := range cands {
		for _, id := range ids[2*i : 2*i+2] {
			if id != "" {
				return c, id, strings.TrimPrefix(strings.TrimPrefix(rest, c), "/"), nil
			}
		}
	}
	if hex != "" {
		if id := ids[len(ids)-1]; id != "" {
			if err := g.mustReach(ctx, id); err != nil {
				return "", "", "", err
			}
			_, p, _ := strings.Cut(rest, "/")
			return hex, id, p, nil
		}
	}
	return "", "", "", errNoObject
}

// commitID resolves a commit id, full or abbreviated, that a ref
// reaches; errNoObject for any other.
func (g gitRepo) commitID(ctx context.Context, hex string) (string, error) {
	if !isHex(hex) {
		return "", errNoObject
	}
	ids, err := g.batchCheck(ctx, []string{hex + "^{commit}"})
	if err != nil {
		return "", err
	}
	if ids[0] == "" {
		return "", errNoObject
	}
	return ids[0], g.mustReach(ctx, ids[0])
}

// batchCheck resolves each revision to a commit id ("" when it names
// none) in one cat-file --batch-check.
func (g gitRepo) batchCheck(ctx context.Context, revs []string) ([]string, error) {
	var in strings.Builder
	for _, r := range revs {
		if strings.ContainsAny(r, "\n\x00") {
			return nil, errNoObject
		}
		in.WriteString(r)
		in.WriteByte('\n')
	}
	cmd, pctx, cancel := g.command(ctx, "cat-file", "--batch-check=%(objectname) %(objecttype)")
	defer cancel()
	cmd.Stdin = strings.NewReader(in.String())
	var out strings.Builder
	// An answer is "<id> <type>" or "<question> missing".
	cmd.Stdout = &limitedWriter{w: &out, n: int64(in.Len() + 100*len(revs))}
	if err := cmd.Run(); err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, fmt.Errorf("git cat-file: %w", ctx.Err())
		case pctx.Err() != nil:
			return nil, fmt.Errorf("git cat-file: %w", errGitTimeout)
		}
		return nil, cmd.Wrap(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(revs) {
		return nil, fmt.Errorf("git cat-file: %d answers to %d questions", len(lines), len(revs))
	}
	ids := make([]string, len(revs))
	for i, l := range lines {
		if id, typ, ok := strings.Cut(l, " "); ok && typ == "commit" && isHex(id) {
			ids[i] = id
		}
	}
	return ids, nil
}

// mustReach reports errNoObject unless a ref reaches commit id: the UI
// shows nothing that force-pushed or deleted history left behind
// (docs/adr/0091-reachable-objects.md).
func (g gitRepo) mustReach(ctx context.Context, id string) error {
	var out []byte
	_, err := g.stream(ctx, func(br *bufio.Reader) error {
		b, err := io.ReadAll(io.LimitReader(br, 128))
		out = b
		return err
	}, "rev-list", "-n", "1", id, "--not", "--all")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(out)) != 0 {
		return fmt.Errorf("%w: %s is reachable from no ref", errNoObject, id)
	}
	return nil
}

// limitedWriter keeps at most n bytes and fails after, so that a process
// expected to answer little cannot make ghost keep much.
type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.n {
		return 0, errors.New("more output than expected")
	}
	l.n -= int64(len(p))
	return l.w.Write(p)
}

// entry is one ls-tree line.
type entry struct {
	Mode string
	Type string // blob, tree, commit (a submodule)
	ID   string
	Size int64 // -1 for trees and submodules
	Name string
}

// lsTree lists up to limit entries of the tree at treeish
// ("<commit>:<path>") in one ls-tree; more reports that the tree has
// more, and git is stopped there.
func (g gitRepo) lsTree(ctx context.Context, treeish string, limit int) (es []entry, more bool, err error) {
	more, err = g.stream(ctx, func(br *bufio.Reader) error {
		fr := &fieldReader{r: br, end: 0, sep: '\t', n: 2, caps: []int{256, maxTreeName}}
		for len(es) < limit {
			f, err := fr.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if len(f) != 2 || f[0].cut || f[1].cut {
				continue
			}
			m := strings.Fields(f[0].s)
			if len(m) != 4 {
				continue
			}
			size, err := strconv.ParseInt(m[3], 10, 64)
			if err != nil {
				size = -1
			}
			es = append(es, entry{Mode: m[0], Type: m[1], ID: m[2], Size: size, Name: f[1].s})
		}
		return nil
	}, "ls-tree", "-z", "-l", "--end-of-options", treeish)
	if err != nil && !errors.Is(err, errGitTimeout) && ctx.Err() == nil {
		return nil, false, fmt.Errorf("%w: %w", errNoObject, err)
	}
	return es, more, err
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
	cmd, _, cancel := g.command(ctx, "cat-file", "--batch-command")
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
	line, err := c.out.ReadSlice('\n')
	if err != nil {
		return object{}, fmt.Errorf("git cat-file: %w", err)
	}
	f := strings.Fields(string(line))
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

// contents reads a whole object of at most limit bytes (errTooLarge
// otherwise, and the process is then spent). Call info first to check
// its size.
func (c *catFile) contents(obj string, limit int64) (object, []byte, error) {
	o, err := c.send("contents", obj)
	if err != nil {
		return o, nil, err
	}
	if o.Size > limit {
		return o, nil, errTooLarge
	}
	b := make([]byte, o.Size+1) // and the newline after it
	if _, err := io.ReadFull(c.out, b); err != nil {
		return o, nil, fmt.Errorf("git cat-file: %w", err)
	}
	return o, b[:o.Size], nil
}

// prefix returns an object's first n bytes (all of a smaller one) and
// skips the rest.
func (c *catFile) prefix(obj string, n int64) ([]byte, error) {
	o, err := c.send("contents", obj)
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(n, o.Size))
	if _, err := io.ReadFull(c.out, b); err != nil {
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	if _, err := c.out.Discard(int(o.Size-int64(len(b))) + 1); err != nil { // and the newline
		return nil, fmt.Errorf("git cat-file: %w", err)
	}
	return b, nil
}

// errTooLarge reports an object over what the page reads.
var errTooLarge = errors.New("object too large")

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

// commit is one commit as a page shows it. Subject and Body are cut to
// maxSubject and maxBody.
type commit struct {
	ID, Parents, Author, Email, Subject, Body string
	When                                      time.Time
	BodyCut                                   bool
}

// commitFields are the fields of a log record, the subject last so that
// a separator byte in it cannot shift the others. withBody adds the body
// after it, on the one page that shows bodies.
func commitFormat(withBody bool) string {
	if withBody {
		return "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%s%x1f%b"
	}
	return "--format=%H%x1f%P%x1f%an%x1f%ae%x1f%at%x1f%s"
}

var commitCaps = []int{80, 41 * 64, maxField, maxField, 32, maxSubject, maxBody}

func parseCommit(f []field) (commit, bool) {
	if len(f) < 6 || f[0].cut || !isHex(f[0].s) {
		return commit{}, false
	}
	c := commit{ID: f[0].s, Parents: f[1].s, Author: f[2].text(), Email: f[3].text(), Subject: f[5].text()}
	if f[1].cut {
		// An octopus of more than 64 parents: show the first ones.
		ps := strings.Fields(f[1].s)
		c.Parents = strings.Join(ps[:max(len(ps)-1, 0)], " ")
	}
	if sec, err := strconv.ParseInt(f[4].s, 10, 64); err == nil {
		c.When = time.Unix(sec, 0).UTC()
	}
	if len(f) == 7 {
		c.Body, c.BodyCut = strings.TrimSpace(f[6].s), f[6].cut
	}
	return c, true
}

// log returns up to n commits reachable from rev (touching path, if
// set) after skipping skip, in one git log. Bodies are not read.
func (g gitRepo) log(ctx context.Context, rev, path string, skip, n int) ([]commit, error) {
	args := []string{"log", "-z", commitFormat(false), "-n", strconv.Itoa(n), "--skip=" + strconv.Itoa(skip), "--end-of-options", rev, "--"}
	if path != "" {
		args = append(args, ":(literal)"+path)
	}
	var cs []commit
	_, err := g.stream(ctx, func(br *bufio.Reader) error {
		fr := &fieldReader{r: br, end: 0, sep: 0x1f, n: 6, caps: commitCaps}
		for len(cs) < n {
			f, err := fr.next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if c, ok := parseCommit(f); ok {
				cs = append(cs, c)
			}
		}
		return nil
	}, args...)
	if err != nil && !errors.Is(err, errGitTimeout) && ctx.Err() == nil {
		return nil, fmt.Errorf("%w: %w", errNoObject, err)
	}
	return cs, err
}

// diff is a commit with its change.
type diff struct {
	Commit    commit
	Stat      string
	Patch     string
	Truncated bool
}

// show returns commit id and its diff against its first parent (the
// combined diff for a merge) in one diff-tree: the message bounded by
// maxSubject and maxBody, the stat and patch by limit bytes, after which
// git is stopped.
func (g gitRepo) show(ctx context.Context, id string, limit int64) (diff, error) {
	var d diff
	found := false
	cut, err := g.stream(ctx, func(br *bufio.Reader) error {
		fr := &fieldReader{r: br, end: 0, sep: 0x1f, n: 7, caps: commitCaps}
		f, err := fr.next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Commit, found = parseCommit(f); !found {
			return nil
		}
		b, err := io.ReadAll(io.LimitReader(br, limit))
		if err != nil {
			return err
		}
		rest := strings.TrimPrefix(strings.TrimLeft(string(b), "\n"), "---\n")
		if i := strings.Index(rest, "\ndiff --"); i >= 0 {
			d.Stat, d.Patch = rest[:i], rest[i+1:]
		} else if strings.HasPrefix(rest, "diff --") {
			d.Patch = rest
		} else {
			d.Stat = rest
		}
		return nil
	}, "diff-tree", "--always", "--root", "--cc", "-M", "--no-color", "--stat=160,120", "-p",
		commitFormat(true)+"%x00", "--end-of-options", id)
	if err != nil {
		if errors.Is(err, errGitTimeout) || ctx.Err() != nil {
			return diff{}, err
		}
		return diff{}, fmt.Errorf("%w: %w", errNoObject, err)
	}
	if !found {
		return diff{}, fmt.Errorf("%w: %s", errNoObject, id)
	}
	if cut {
		d.Truncated = true
		if i := strings.LastIndexByte(d.Patch, '\n'); i >= 0 {
			d.Patch = d.Patch[:i+1]
		}
	}
	return d, nil
}
