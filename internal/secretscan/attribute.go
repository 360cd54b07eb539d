package secretscan

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

const zeroOID = "0000000000000000000000000000000000000000"

// candKey identifies "the same secret on the same line" across two
// versions of a file: a candidate of the new blob whose key the old blob
// also has was not added by the commit, so it is not reported again (this
// is what scanning git log -p's added lines achieves in gitleaks).
//
// A last line without a newline is another line than the same text with
// one: git diff shows adding the newline as the line removed and added
// again, and gitleaks reports its secrets again there.
type candKey struct {
	rule     int
	secret   string
	lineHash uint64
	noEOL    bool
}

// Attribute turns blob candidates into findings: for every blob with
// candidates it finds the commits, among those selected by revArgs (nil
// means --all), whose diff adds the blob at a path, and keeps the
// candidates that diff introduced and that no path- or commit-dependent
// check suppresses. It is AttributeAll's Findings: blobs that no diff
// adds are left out, as gitleaks leaves them out.
//
// For push protection revArgs are the pushed tips followed by --not and
// the existing refs.
func (s *BlobScan) Attribute(ctx context.Context, repo Repo, revArgs []string) ([]Finding, error) {
	a, err := s.AttributeAll(ctx, repo, revArgs)
	if err != nil {
		return nil, err
	}
	return a.Findings, nil
}

// Attribution is what AttributeAll found.
type Attribution struct {
	// Findings are the candidates placed at the commit and path whose
	// diff added them.
	Findings []Finding
	// Replaced are the previous versions of the files with candidates:
	// the source side of every diff entry that adds a blob with
	// candidates. A candidate the previous version also holds, on the
	// same line, was not added by that diff and is not reported; a caller
	// that scanned only part of the objects (push protection scans what
	// a push adds) scans those of Replaced it has not scanned and
	// attributes again, or a secret the repository already held would
	// look new.
	Replaced []string
	// Unplaced are the blobs with candidates that no diff of the
	// selected commits adds at all, sorted: a blob reached only through
	// a tag of a tree or blob, or through no ref. Locate finds where they
	// are, and LocatedFindings reports them there.
	Unplaced []string
}

// AttributeAll places the candidates of the scanned blobs in history, in
// up to two passes over git log --raw of the commits revArgs select (nil
// means --all); only entries of blobs with candidates are kept, so memory
// is bounded by the findings.
//
//  1. The diffs gitleaks reads: each non-merge commit against its parent,
//     without type changes (--diff-filter=tuxdb).
//  2. Only when some blob with candidates appeared in no entry of pass 1:
//     every commit again, merges against their first parent
//     (--diff-merges=first-parent) and type changes included (a file
//     that replaces a symlink or submodule), for those blobs only. So a
//     file an "evil merge" adds, or a conflict resolution introduces, is
//     placed at the merge; a blob that pass 1 placed is never reported
//     again at the merge that brings its branch in.
//
// Every blob reachable from a selected commit is added by some commit's
// first-parent diff (the root commit's adds everything), so what is still
// unplaced afterwards is reached some other way, or not at all: Unplaced.
func (s *BlobScan) AttributeAll(ctx context.Context, repo Repo, revArgs []string) (*Attribution, error) {
	a := &Attribution{}
	if len(s.blobs) == 0 {
		return a, nil
	}
	if revArgs == nil {
		revArgs = []string{"--all"}
	}
	st := &attribution{ctx: ctx, repo: repo, seen: make(map[string]bool), replaced: make(map[string]bool)}
	if s.log != nil && slices.Equal(revArgs, s.logRevs) {
		var err error
		if st.hunks, err = s.prefetchHunks(ctx, repo); err != nil {
			return nil, err
		}
	}
	fs, err := s.logPass(ctx, repo, revArgs, []string{"--diff-filter=tuxdb"}, st)
	if err != nil {
		return nil, err
	}
	a.Findings = fs
	st.only = make(map[string]bool)
	for id := range s.blobs {
		if !st.seen[id] {
			st.only[id] = true
		}
	}
	if len(st.only) > 0 {
		fs, err := s.logPass(ctx, repo, revArgs, []string{"--diff-merges=first-parent", "--diff-filter=d"}, st)
		if err != nil {
			return nil, err
		}
		a.Findings = append(a.Findings, fs...)
	}
	for id := range st.only {
		if !st.seen[id] {
			a.Unplaced = append(a.Unplaced, id)
		}
	}
	slices.Sort(a.Unplaced)
	for id := range st.replaced {
		a.Replaced = append(a.Replaced, id)
	}
	slices.Sort(a.Replaced)
	return a, nil
}

// attribution is the state of one AttributeAll across its passes.
type attribution struct {
	ctx      context.Context
	repo     Repo
	seen     map[string]bool // blobs with candidates some entry added
	replaced map[string]bool // source blobs of those entries
	only     map[string]bool // pass 2: the blobs it looks for
	// hunks holds the added lines of the diffs hunkRules needs, read
	// ahead in one git diff-tree (prefetchHunks); a pair missing here
	// is diffed on its own.
	hunks map[[2]string][]hunk
}

// logPass runs one git log --raw over revArgs with the diff options opts
// and attributes the entries it shows.
func (s *BlobScan) logPass(ctx context.Context, repo Repo, revArgs, opts []string, st *attribution) ([]Finding, error) {
	if s.log != nil && slices.Equal(revArgs, s.logRevs) {
		// ScanRevs' log of the same commits: every entry of both
		// passes is in it, and parseLog keeps those of this pass.
		if _, err := s.log.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("secretscan: %w", err)
		}
		return s.parseLog(bufio.NewReaderSize(s.log, 256<<10), st)
	}
	args := append([]string{"-c", "log.showSignature=false", "log", "--full-history", "-z", "--raw", "--no-abbrev", "--no-color"}, opts...)
	args = append(append(args, logFormat), revArgs...)
	cmd := repo.packBackground(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("secretscan: start git log: %w", err)
	}
	findings, perr := s.parseLog(bufio.NewReaderSize(out, 256<<10), st)
	if perr != nil {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr != nil {
		return nil, perr
	}
	if werr != nil {
		return nil, gitError(cmd, args, werr)
	}
	return findings, nil
}

type commitInfo struct {
	hash, author, email, date, message string
	merge                              bool // more than one parent
}

func (s *BlobScan) parseLog(br *bufio.Reader, st *attribution) ([]Finding, error) {
	var (
		out  []Finding
		cur  commitInfo
		meta []string // pending raw entry fields awaiting their paths
		want int      // paths still to read for meta
		srcP string
	)
	for {
		tok, err := br.ReadString(0)
		if err == io.EOF && tok == "" {
			return out, nil
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("secretscan: read git log: %w", err)
		}
		tok = strings.TrimSuffix(tok, "\x00")
		if want > 0 {
			want--
			if want == 1 { // rename or copy: this is the source path
				srcP = tok
				continue
			}
			// Pass 1 reads the diffs gitleaks reads: no merge, no type
			// change (ScanRevs' log holds both, for pass 2).
			if st.only == nil && (cur.merge || strings.ContainsAny(meta[4][:1], "TUXB")) {
				continue
			}
			if out, err = s.entry(out, cur, meta, srcP, tok, st); err != nil {
				return nil, err
			}
			continue
		}
		tok = strings.TrimLeft(tok, "\n")
		switch {
		case strings.HasPrefix(tok, "\x01"):
			h := strings.TrimSuffix(strings.TrimPrefix(tok, "\x01"), "\x03")
			h, _, _ = strings.Cut(h, "\x03")
			p := strings.SplitN(h, "\x02", 6)
			for len(p) < 6 {
				p = append(p, "")
			}
			date := p[4]
			if t, err := time.Parse(time.RFC3339, date); err == nil {
				date = t.UTC().Format(time.RFC3339) // as gitleaks reports it
			}
			cur = commitInfo{p[0], p[2], p[3], date, strings.TrimSpace(p[5]), strings.Contains(p[1], " ")}
		case strings.HasPrefix(tok, ":"):
			meta = strings.Fields(tok[1:])
			if len(meta) != 5 {
				return nil, fmt.Errorf("secretscan: git log: unexpected raw entry %q", tok)
			}
			want, srcP = 1, ""
			if status := meta[4]; status[0] == 'R' || status[0] == 'C' {
				want = 2
			}
		}
		if err == io.EOF {
			return out, nil
		}
	}
}

// entry handles one raw diff entry: meta is [srcMode dstMode src dst status].
func (s *BlobScan) entry(out []Finding, c commitInfo, meta []string, srcPath, path string, st *attribution) ([]Finding, error) {
	if meta[1] == "160000" { // a submodule's commit, not a blob
		return out, nil
	}
	dst := meta[3]
	cands, ok := s.blobs[dst]
	if !ok || st.only != nil && !st.only[dst] {
		return out, nil
	}
	st.seen[dst] = true
	old := make(map[candKey]int)
	src := meta[2]
	if src != zeroOID && meta[0] != "160000" {
		st.replaced[src] = true
		for _, oc := range s.blobs[src] {
			if !oc.pathOnly {
				old[candKey{oc.rule, oc.secret, oc.lineHash, oc.noEOL}]++
			}
		}
	} else {
		src = ""
	}
	e := s.e
	var added []*candidate
	for i := range cands {
		cd := &cands[i]
		r := e.cfg.Rules[cd.rule]
		if cd.pathOnly {
			if !r.Path.MatchString(path) {
				continue
			}
		} else {
			k := candKey{cd.rule, cd.secret, cd.lineHash, cd.noEOL}
			if old[k] > 0 {
				old[k]--
				continue
			}
		}
		added = append(added, cd)
	}
	if src != "" {
		var err error
		if added, err = s.hunkRules(st, src, dst, added); err != nil {
			return nil, err
		}
	}
	return append(out, e.findingsAt(added, c, dst, path)...), nil
}

// hunkRules places the matches of rules that span lines as gitleaks
// does (issue 27, 1.3). A whole-blob match may start in lines the
// commit did not touch, where gitleaks, which reads only the added lines
// of each diff hunk, never looks; there it can also swallow a later
// match on a changed line (a curl command over several lines before a
// one-line one). So when src or dst has a candidate over several lines,
// that rule is run again over the added lines of git diff -U0 src dst,
// hunk by hunk, as gitleaks runs it, and its findings are those; a
// whole-blob candidate of the rule is kept besides only when its secret
// is not among them — what gitleaks misses, such as a private key of
// which only middle lines changed.
func (s *BlobScan) hunkRules(st *attribution, src, dst string, added []*candidate) ([]*candidate, error) {
	var rules []int
	for _, id := range []string{src, dst} {
		for _, c := range s.blobs[id] {
			if !c.pathOnly && c.endLine > c.startLine && !slices.Contains(rules, c.rule) {
				rules = append(rules, c.rule)
			}
		}
	}
	if len(rules) == 0 {
		return added, nil
	}
	hunks, ok := st.hunks[[2]string{src, dst}]
	if !ok {
		var err error
		if hunks, err = diffHunks(st.ctx, st.repo, src, dst); err != nil {
			return nil, err
		}
	}
	e := s.e
	var out []*candidate
	found := make(map[int]map[string]bool) // rule -> secrets found in hunks
	for _, r := range rules {
		found[r] = make(map[string]bool)
		m := ruleMatcher{rule: r, re: e.cfg.Rules[r].Regex, keywords: e.cfg.Rules[r].Keywords}
		for _, h := range hunks {
			for _, c := range e.scan(m.Match, h.text) {
				c.startLine += h.line - 1
				c.endLine += h.line - 1
				found[r][c.secret] = true
				out = append(out, &c)
			}
		}
	}
	for _, c := range added {
		if f, ok := found[c.rule]; !ok || !f[c.secret] {
			out = append(out, c)
		}
	}
	return out, nil
}

// hunk is the added lines of one diff hunk and the line number of the
// first of them in the new file.
type hunk struct {
	line int
	text []byte
}

// maxDiffBytes bounds the git diff output hunkRules reads for one pair of
// blobs (both are at most Options.MaxBlobSize, but the diff of two such
// is bounded here on its own).
const maxDiffBytes = 256 << 20

// diffHunks runs git diff -U0 between two blobs and returns the added
// lines of each hunk, as gitleaks reads git log -p -U0. A binary pair
// has no hunks.
func diffHunks(ctx context.Context, repo Repo, src, dst string) ([]hunk, error) {
	args := []string{"diff", "-U0", "--no-color", "--no-ext-diff", "--no-textconv", src, dst}
	cmd := repo.command(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("secretscan: start git diff: %w", err)
	}
	hunks, perr := parseHunks(bufio.NewReaderSize(io.LimitReader(out, maxDiffBytes), 64<<10))
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr != nil {
		return nil, perr
	}
	if werr != nil {
		return nil, gitError(cmd, args, werr)
	}
	return hunks, nil
}

// parseHunks reads a unified diff with no context lines: each "@@ -a,b
// +c,d @@" header starts a hunk whose "+" lines are the new file's lines
// c, c+1, ...; a "\ No newline at end of file" after the last added line
// removes its newline.
func parseHunks(br *bufio.Reader) ([]hunk, error) {
	var (
		hunks []hunk
		cur   *hunk
		last  byte // the op of the previous line in this hunk
	)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			switch {
			case bytes.HasPrefix(line, []byte("@@ ")):
				n, ok := hunkStart(line)
				if !ok {
					return nil, fmt.Errorf("secretscan: git diff: bad hunk header %q", line)
				}
				hunks = append(hunks, hunk{line: n})
				cur, last = &hunks[len(hunks)-1], 0
			case cur == nil:
			case line[0] == '+':
				cur.text = append(cur.text, line[1:]...)
				last = '+'
			case line[0] == '\\':
				if last == '+' && bytes.HasSuffix(cur.text, []byte("\n")) {
					cur.text = cur.text[:len(cur.text)-1]
				}
			default:
				last = line[0]
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("secretscan: read git diff: %w", err)
		}
	}
	out := hunks[:0]
	for _, h := range hunks {
		if len(h.text) > 0 {
			out = append(out, h)
		}
	}
	return out, nil
}

// hunkStart parses the new file's first line, c, from "@@ -a[,b] +c[,d] @@".
func hunkStart(header []byte) (int, bool) {
	f := strings.Fields(string(header))
	if len(f) < 4 || f[3] != "@@" || !strings.HasPrefix(f[2], "+") {
		return 0, false
	}
	num, _, _ := strings.Cut(f[2][1:], ",")
	n, err := strconv.Atoi(num)
	return n, err == nil && n >= 0
}

// ruleMatcher runs one rule as gitleaks runs it on a fragment: over all
// of it, when one of the rule's keywords is in it (or it has none).
type ruleMatcher struct {
	rule     int
	re       *regexp.Regexp
	keywords []string
}

func (m ruleMatcher) Match(content []byte, emit func(rule, start, end int)) {
	if len(m.keywords) > 0 {
		lower := bytes.ToLower(content)
		hit := false
		for _, k := range m.keywords {
			if bytes.Contains(lower, []byte(k)) {
				hit = true
				break
			}
		}
		if !hit {
			return
		}
	}
	for _, loc := range m.re.FindAllIndex(content, -1) {
		emit(m.rule, loc[0], loc[1])
	}
}

// findingsAt turns the candidates of one blob at one location (a commit
// and path, or a path, or a message) into findings, in gitleaks' order:
// first what depends on the location (rule paths, allowlist paths and
// commits), then the rule that a generic finding yields to a specific
// one on the same line, then .gitleaksignore. A specific rule whose path
// does not match therefore cannot hide a generic finding (issue 27: in
// app.py, hashicorp-tf-password's match must not swallow generic-api-key).
func (e *Engine) findingsAt(cands []*candidate, c commitInfo, blob, path string) []Finding {
	var (
		fs   []Finding
		kept []*candidate
	)
	for _, cd := range cands {
		if f, ok := e.located(cd, c, blob, path); ok {
			fs = append(fs, f)
			kept = append(kept, cd)
		}
	}
	out := fs[:0]
	for i := range fs {
		if e.shadowed(i, kept) || e.opts.Ignore.Ignored(&fs[i]) {
			continue
		}
		out = append(out, fs[i])
	}
	return out
}

// shadowed is gitleaks' filter: a finding of a "generic" rule is dropped
// when a finding of a non-generic rule on the same line has a secret
// that contains its secret.
func (e *Engine) shadowed(i int, cs []*candidate) bool {
	c := cs[i]
	if !e.generic[c.rule] {
		return false
	}
	for j, o := range cs {
		if j != i && o.startLine == c.startLine && o.rule != c.rule && !e.generic[o.rule] &&
			strings.Contains(o.secret, c.secret) {
			return true
		}
	}
	return false
}

// located applies the checks that depend on where a candidate is — rule
// path, allowlist paths and commits — and builds the Finding.
// .gitleaksignore is findingsAt's, after the generic filter.
func (e *Engine) located(cd *candidate, c commitInfo, blob, path string) (Finding, bool) {
	r := e.cfg.Rules[cd.rule]
	if e.cfg.Path != "" && path == e.cfg.Path {
		return Finding{}, false
	}
	for _, lists := range [][]*Allowlist{e.cfg.Allowlists, r.Allowlists} {
		for _, a := range lists {
			if locationAllowed(a, c.hash, path) {
				return Finding{}, false
			}
		}
	}
	if !cd.pathOnly && r.Path != nil && !r.Path.MatchString(path) {
		return Finding{}, false
	}
	for _, a := range cd.deferred {
		if (len(a.Commits) == 0 || a.commitAllowed(c.hash)) && (a.Paths == nil || a.pathAllowed(path)) {
			return Finding{}, false
		}
	}
	f := Finding{
		RuleID: r.ID, Description: r.Description, BlobID: blob, Commit: c.hash, Path: path,
		StartLine: cd.startLine, EndLine: cd.endLine, StartColumn: cd.startCol, EndColumn: cd.endCol,
		Entropy: cd.entropy, Tags: append(append([]string(nil), r.Tags...), cd.tags...),
		Author: c.author, Email: c.email, Date: c.date, Message: c.message,
	}
	if cd.pathOnly {
		f.Match = "file detected: " + path
		f.Fingerprint = e.fingerprint(blob)
	} else {
		f.Match = redact(cd.match, cd.secret)
		f.Fingerprint = e.fingerprint(cd.secret)
	}
	return f, true
}

// locationAllowed is gitleaks' checkCommitOrPathAllowed for one allowlist.
func locationAllowed(a *Allowlist, commit, path string) bool {
	if a.MatchAnd {
		if a.hasContentChecks() || !a.hasLocationChecks() {
			return false // decided with the content, or deferred
		}
		return (len(a.Commits) == 0 || a.commitAllowed(commit)) && (a.Paths == nil || a.pathAllowed(path))
	}
	return a.commitAllowed(commit) || a.pathAllowed(path)
}

// multiLine reports whether blob id has a candidate over several lines:
// then hunkRules needs the diffs that replace or add it.
func (s *BlobScan) multiLine(id string) bool {
	for _, c := range s.blobs[id] {
		if !c.pathOnly && c.endLine > c.startLine {
			return true
		}
	}
	return false
}

// maxPrefetchPaths bounds the pathspecs given to git diff-tree; beyond
// it the diffs of whole commits are read.
const maxPrefetchPaths = 512

// prefetchHunks reads ahead, in one git diff-tree --stdin over the
// commits of ScanRevs' log, the hunks hunkRules will need: those of the
// entries of non-merge commits that add a blob with candidates where it
// or the blob it replaces has a candidate over several lines. One git
// diff per pair cost about 10 ms of CPU each, most of a scan of
// gitleaks' own history (docs/adr/0120-scanner-speed.md). Pairs git
// diff-tree does not show as the log did are diffed on their own later.
func (s *BlobScan) prefetchHunks(ctx context.Context, repo Repo) (map[[2]string][]hunk, error) {
	if _, err := s.log.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	want := make(map[[2]string]bool)
	paths := make(map[string]bool)
	var commits []string
	br := bufio.NewReaderSize(s.log, 256<<10)
	var (
		commit string
		merge  bool
		meta   []string
		want1  int
		added  bool // commit already listed
	)
	for {
		tok, err := br.ReadString(0)
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("secretscan: read git log: %w", err)
		}
		tok = strings.TrimSuffix(tok, "\x00")
		switch {
		case want1 > 0:
			want1--
			if want1 == 0 && !merge && meta[0] != "160000" && meta[1] != "160000" && meta[2] != zeroOID {
				src, dst := meta[2], meta[3]
				if _, ok := s.blobs[dst]; ok && (s.multiLine(src) || s.multiLine(dst)) {
					want[[2]string{src, dst}] = true
					paths[tok] = true
					if !added {
						commits = append(commits, commit)
						added = true
					}
				}
			}
		default:
			t := strings.TrimLeft(tok, "\n")
			switch {
			case strings.HasPrefix(t, "\x01"):
				h, rest, _ := strings.Cut(strings.TrimPrefix(t, "\x01"), "\x02")
				parents, _, _ := strings.Cut(rest, "\x02")
				commit, merge, added = h, strings.Contains(parents, " "), false
			case strings.HasPrefix(t, ":"):
				meta = strings.Fields(t[1:])
				if len(meta) != 5 {
					return nil, fmt.Errorf("secretscan: git log: unexpected raw entry %q", t)
				}
				want1 = 1
				if c := meta[4][0]; c == 'R' || c == 'C' {
					want1 = 2
				}
			}
		}
		if err == io.EOF {
			break
		}
	}
	out := make(map[[2]string][]hunk)
	if len(commits) == 0 {
		return out, nil
	}
	args := []string{"diff-tree", "--stdin", "-r", "-p", "-U0", "-M", "--full-index", "--no-color", "--no-ext-diff", "--no-textconv"}
	if len(paths) <= maxPrefetchPaths {
		args = append(args, "--")
		for p := range paths {
			args = append(args, ":(literal)"+p)
		}
	}
	cmd := repo.packBackground(ctx, args...)
	cmd.Stdin = strings.NewReader(strings.Join(commits, "\n") + "\n")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("secretscan: start git diff-tree: %w", err)
	}
	perr := parseDiffTree(bufio.NewReaderSize(stdout, 256<<10), want, out)
	if perr != nil {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	if perr != nil {
		return nil, perr
	}
	if werr != nil {
		return nil, gitError(cmd, args, werr)
	}
	return out, nil
}

// parseDiffTree splits git diff-tree -p --full-index output into its
// files and keeps the hunks of the pairs in want ("index src..dst").
func parseDiffTree(br *bufio.Reader, want map[[2]string]bool, out map[[2]string][]hunk) error {
	var (
		sec  bytes.Buffer
		pair [2]string
		keep bool
	)
	flush := func() error {
		if keep {
			hs, err := parseHunks(bufio.NewReader(bytes.NewReader(sec.Bytes())))
			if err != nil {
				return err
			}
			out[pair] = hs
		}
		sec.Reset()
		keep = false
		return nil
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			switch {
			case bytes.HasPrefix(line, []byte("diff --git ")):
				if err := flush(); err != nil {
					return err
				}
			case !keep && sec.Len() < 4<<10 && bytes.HasPrefix(line, []byte("index ")):
				f := strings.Fields(string(line[len("index "):]))
				if len(f) > 0 {
					if a, b, ok := strings.Cut(f[0], ".."); ok {
						pair = [2]string{a, b}
						keep = want[pair]
					}
				}
			}
			if keep || sec.Len() < 4<<10 {
				sec.Write(line)
			}
		}
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return fmt.Errorf("secretscan: read git diff-tree: %w", err)
		}
	}
}
