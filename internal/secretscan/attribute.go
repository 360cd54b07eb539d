package secretscan

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

const zeroOID = "0000000000000000000000000000000000000000"

// candKey identifies "the same secret on the same line" across two
// versions of a file: a candidate of the new blob whose key the old blob
// also has was not added by the commit, so it is not reported again (this
// is what scanning git log -p's added lines achieves in gitleaks).
type candKey struct {
	rule     int
	secret   string
	lineHash uint64
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
	st := &attribution{seen: make(map[string]bool), replaced: make(map[string]bool)}
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
	seen     map[string]bool // blobs with candidates some entry added
	replaced map[string]bool // source blobs of those entries
	only     map[string]bool // pass 2: the blobs it looks for
}

// logPass runs one git log --raw over revArgs with the diff options opts
// and attributes the entries it shows.
func (s *BlobScan) logPass(ctx context.Context, repo Repo, revArgs, opts []string, st *attribution) ([]Finding, error) {
	args := append([]string{"-c", "log.showSignature=false", "log", "--full-history", "-z", "--raw", "--no-abbrev", "--no-color"}, opts...)
	args = append(append(args, "--format=%x01%H%x02%an%x02%ae%x02%aI%x02%B%x03"), revArgs...)
	cmd := repo.background(ctx, args...)
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
			out = s.entry(out, cur, meta, srcP, tok, st)
			continue
		}
		tok = strings.TrimLeft(tok, "\n")
		switch {
		case strings.HasPrefix(tok, "\x01"):
			h := strings.TrimSuffix(strings.TrimPrefix(tok, "\x01"), "\x03")
			h, _, _ = strings.Cut(h, "\x03")
			p := strings.SplitN(h, "\x02", 5)
			for len(p) < 5 {
				p = append(p, "")
			}
			date := p[3]
			if t, err := time.Parse(time.RFC3339, date); err == nil {
				date = t.UTC().Format(time.RFC3339) // as gitleaks reports it
			}
			cur = commitInfo{p[0], p[1], p[2], date, strings.TrimSpace(p[4])}
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
func (s *BlobScan) entry(out []Finding, c commitInfo, meta []string, srcPath, path string, st *attribution) []Finding {
	if meta[1] == "160000" { // a submodule's commit, not a blob
		return out
	}
	dst := meta[3]
	cands, ok := s.blobs[dst]
	if !ok || st.only != nil && !st.only[dst] {
		return out
	}
	st.seen[dst] = true
	old := make(map[candKey]int)
	if src := meta[2]; src != zeroOID && meta[0] != "160000" {
		st.replaced[src] = true
		for _, oc := range s.blobs[src] {
			if !oc.pathOnly {
				old[candKey{oc.rule, oc.secret, oc.lineHash}]++
			}
		}
	}
	e := s.e
	for i := range cands {
		cd := &cands[i]
		r := e.cfg.Rules[cd.rule]
		if cd.pathOnly {
			if !r.Path.MatchString(path) {
				continue
			}
		} else {
			k := candKey{cd.rule, cd.secret, cd.lineHash}
			if old[k] > 0 {
				old[k]--
				continue
			}
		}
		if f, ok := e.locate(cd, c, dst, path); ok {
			out = append(out, f)
		}
	}
	return out
}

// locate applies the checks that depend on where a candidate is — rule
// path, allowlist paths and commits, .gitleaksignore — and builds the
// Finding.
func (e *Engine) locate(cd *candidate, c commitInfo, blob, path string) (Finding, bool) {
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
	if e.opts.Ignore.Ignored(&f) {
		return Finding{}, false
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
