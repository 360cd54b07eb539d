package secretscan

import (
	"bufio"
	"context"
	"fmt"
	"io"
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

// Attribute turns candidates into findings: for every blob with
// candidates it finds the commits, among those selected by revArgs (nil
// means --all), whose diff adds the blob at a path, and keeps the
// candidates that diff introduced and that no path- or commit-dependent
// check suppresses. One git log pass reads the history; only entries of
// blobs with candidates are kept, so memory is bounded by the findings.
//
// For push protection revArgs are the pushed tips followed by --not and
// the existing refs.
func (s *BlobScan) Attribute(ctx context.Context, repo Repo, revArgs []string) ([]Finding, error) {
	if len(s.blobs) == 0 {
		return nil, nil
	}
	if revArgs == nil {
		revArgs = []string{"--all"}
	}
	args := append([]string{"-c", "log.showSignature=false", "log", "--full-history", "-z", "--raw", "--no-abbrev", "--no-color",
		"--diff-filter=tuxdb", "--format=%x01%H%x02%an%x02%ae%x02%aI%x02%B%x03"}, revArgs...)
	cmd := repo.command(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	release, err := repo.start(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("secretscan: start git log: %w", err)
	}
	defer release()
	findings, perr := s.parseLog(bufio.NewReaderSize(out, 256<<10))
	if perr != nil {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr != nil {
		return nil, perr
	}
	if werr != nil {
		return nil, &GitError{Args: args, Stderr: stderr.String(), Err: werr}
	}
	return findings, nil
}

type commitInfo struct {
	hash, author, email, date, message string
}

func (s *BlobScan) parseLog(br *bufio.Reader) ([]Finding, error) {
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
			out = s.entry(out, cur, meta, srcP, tok)
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
			if st := meta[4]; st[0] == 'R' || st[0] == 'C' {
				want = 2
			}
		}
		if err == io.EOF {
			return out, nil
		}
	}
}

// entry handles one raw diff entry: meta is [srcMode dstMode src dst status].
func (s *BlobScan) entry(out []Finding, c commitInfo, meta []string, srcPath, path string) []Finding {
	if meta[1] == "160000" { // a submodule's commit, not a blob
		return out
	}
	dst := meta[3]
	cands, ok := s.blobs[dst]
	if !ok {
		return out
	}
	old := make(map[candKey]int)
	if src := meta[2]; src != zeroOID && meta[0] != "160000" {
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
