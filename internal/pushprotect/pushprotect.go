// Package pushprotect refuses pushes that add secrets (docs/design.md
// §10.2, docs/adr/0031-push-protection.md).
//
// A receive path calls Scanner.Check after the pushed pack has been
// indexed into a quarantine and validated, and before its commit point.
// Check scans exactly the blobs the push adds — those reachable from the
// new tips and from no existing ref, which are the quarantine's objects —
// with the secretscan engine, attributes each finding to the commit and
// path:line that introduced it, and answers with a Verdict: the push is
// blocked (every ref refused, with a message in the shape GitHub users
// know), or clean, or bypassed by the push option
// secret-scanning.bypass=<reason>, in which case every bypassed secret has
// been recorded in the alert store, with who and why, before Check
// returns. The cost is that of the pushed objects, never of the history.
//
// The package knows nothing of HTTP or SSH: it takes the quarantine's
// directory and environment, the ref updates and the push options as
// strings.
package pushprotect

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

// Defaults for Options.
const (
	// DefaultMaxListed is how many locations a blocked push's message
	// lists before "and N more", as GitHub does.
	DefaultMaxListed = 5
	// DefaultMaxBypass bounds the secrets one push may bypass. Each is an
	// alert write inside the push, and a push carrying more secrets than
	// this is better cleaned than waved through.
	DefaultMaxBypass = 1000
	// DefaultMaxDecodeDepth is gitleaks' default, as for ghost scan.
	DefaultMaxDecodeDepth = 5
)

// Reason is the report-status reason of every ref of a blocked push:
// git shows it as "! [remote rejected] <ref> (<Reason>)".
const Reason = "secret detected by push protection"

// Update is one ref update of a push: Old is the zero id for a create,
// New is the zero id for a delete.
type Update struct {
	Ref, Old, New string
}

const zeroID = "0000000000000000000000000000000000000000"

// Alerts is what push protection needs from the alert store
// (*alerts.Store): the tenant's fingerprint key, so a bypassed secret is
// filed under the same alert as every other finding of it, and a place
// to record bypasses.
type Alerts interface {
	FingerprintKey(ctx context.Context, tenant string) ([]byte, error)
	RecordBypass(ctx context.Context, tenant, repoID string, f alerts.Finding, by string, reason alerts.BypassReason) (alerts.Alert, error)
}

// Options tune a Scanner. Zero values take the defaults.
type Options struct {
	// Workers scanning blobs in parallel (default: the number of CPUs).
	Workers int
	// MaxBlobSize skips larger blobs (default secretscan's 50 MiB), as
	// ghost scan does; they are counted in Verdict.Stats.
	MaxBlobSize int64
	// MaxDecodeDepth is how often encoded text is decoded and rescanned
	// (default DefaultMaxDecodeDepth; negative: no decoding).
	MaxDecodeDepth int
	// MaxListed locations in a blocked push's message (default
	// DefaultMaxListed).
	MaxListed int
	// MaxBypass secrets in one push may be bypassed (default
	// DefaultMaxBypass); a push with more is blocked even with a bypass.
	MaxBypass int
}

// Scanner checks pushes. It holds the compiled rules, shared by every
// check, and is safe for concurrent use.
type Scanner struct {
	cfg     *secretscan.Config
	matcher secretscan.Matcher
	alerts  Alerts
	opts    Options
}

// New returns a Scanner with the rules of cfg (nil: gitleaks' default
// rules, which is what the server uses: a repository's own .gitleaks.toml
// is not read, so that a push cannot switch its own protection off).
func New(cfg *secretscan.Config, a Alerts, opts Options) (*Scanner, error) {
	if a == nil {
		return nil, errors.New("pushprotect: an alert store is required")
	}
	if cfg == nil {
		var err error
		if cfg, err = secretscan.DefaultConfig(); err != nil {
			return nil, fmt.Errorf("pushprotect: %w", err)
		}
	}
	m, err := secretscan.NewKeywordMatcher(cfg.Rules)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: %w", err)
	}
	if opts.MaxDecodeDepth == 0 {
		opts.MaxDecodeDepth = DefaultMaxDecodeDepth
	} else if opts.MaxDecodeDepth < 0 {
		opts.MaxDecodeDepth = 0
	}
	if opts.MaxListed <= 0 {
		opts.MaxListed = DefaultMaxListed
	}
	if opts.MaxBypass <= 0 {
		opts.MaxBypass = DefaultMaxBypass
	}
	return &Scanner{cfg: cfg, matcher: m, alerts: a, opts: opts}, nil
}

// Push is what Check needs to know about one push.
type Push struct {
	// Tenant owns the repository (its fingerprint key and alerts);
	// RepoID is the repository's log id.
	Tenant, RepoID string
	// Pusher names who pushed, recorded with a bypass.
	Pusher string
	// Repo is the repository with the quarantine's objects visible:
	// Dir is the repository whose refs are the existing ones, and Env
	// carries GIT_OBJECT_DIRECTORY and GIT_ALTERNATE_OBJECT_DIRECTORIES.
	Repo secretscan.Repo
	// Updates are the push's ref updates.
	Updates []Update
	// Options are the push options as the client sent them.
	Options []string
}

// Verdict is the outcome of a check.
type Verdict struct {
	// Blocked means the push must be refused: every ref with Reason,
	// and Message shown to the pusher.
	Blocked bool
	// Findings are the secrets the push adds, in git log order (newest
	// commit first).
	Findings []secretscan.Finding
	// Bypass is the reason given with secret-scanning.bypass, "" if none.
	// Findings were bypassed (and recorded) if it is set and !Blocked.
	Bypass alerts.BypassReason
	// Message holds lines for the pusher's terminal (git prints each as
	// "remote: <line>"); empty for a clean push.
	Message []string
	// Stats counts what was scanned.
	Stats secretscan.Stats
	// Duration is how long the check took.
	Duration time.Duration
}

// ErrBypassNotRecorded is returned when a bypass could not be recorded in
// the alert store. The push must then be refused: a secret let past push
// protection is never unrecorded. Retrying the push is the remedy (the
// bypass may then be recorded twice, which only adds a history entry).
var ErrBypassNotRecorded = errors.New("pushprotect: the bypass could not be recorded")

// Check scans the blobs p adds and decides. Errors are failures to decide
// (git, storage); an invalid push option is an *OptionError, returned
// before anything is scanned.
func (s *Scanner) Check(ctx context.Context, p Push) (*Verdict, error) {
	start := time.Now()
	opts, err := ParseOptions(p.Options)
	if err != nil {
		return nil, err
	}
	v := &Verdict{Bypass: opts.Bypass}
	defer func() { v.Duration = time.Since(start) }()

	var tips []string
	for _, u := range p.Updates {
		if u.New != zeroID {
			tips = append(tips, u.New)
		}
	}
	if len(tips) == 0 {
		return v, nil
	}
	objs, err := newObjects(ctx, p.Repo, tips)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return v, nil
	}
	key, err := s.alerts.FingerprintKey(ctx, p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: fingerprint key of %s: %w", p.Tenant, err)
	}
	e, err := secretscan.New(s.cfg, secretscan.Options{
		Workers: s.opts.Workers, MaxBlobSize: s.opts.MaxBlobSize, FingerprintKey: key,
		Matcher: s.matcher, MaxDecodeDepth: s.opts.MaxDecodeDepth,
	})
	if err != nil {
		return nil, fmt.Errorf("pushprotect: %w", err)
	}
	bs, err := e.ScanObjects(ctx, p.Repo, objs, nil)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: scan: %w", err)
	}
	v.Stats = bs.Stats
	if bs.FindingBlobs() == 0 {
		return v, nil
	}
	revs := append(append(tips[:len(tips):len(tips)], "--not"), "--all")
	fs, err := bs.Attribute(ctx, p.Repo, revs)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: attribute: %w", err)
	}
	if len(fs) > 0 {
		// Attribution reports a secret only where a diff adds it, by
		// comparing with the candidates of the file's previous version.
		// A pushed commit that edits a file which already held a secret
		// has that previous version in the repository, not in the push,
		// so it was not scanned and the old secret would look new. Scan
		// those previous versions too (only of the files with findings:
		// the cost stays with the push) and attribute again.
		fs, err = s.withPreviousVersions(ctx, e, p.Repo, revs, fs)
		if err != nil {
			return nil, err
		}
	}
	v.Findings = fs
	if len(fs) == 0 {
		return v, nil
	}
	switch {
	case opts.Bypass == "":
		v.Blocked = true
		v.Message = s.blockedMessage(fs)
		return v, nil
	case len(fs) > s.opts.MaxBypass:
		v.Blocked = true
		v.Message = s.tooManyMessage(fs)
		return v, nil
	}
	if err := s.recordBypass(ctx, p, opts.Bypass, fs); err != nil {
		return nil, err
	}
	v.Message = s.bypassedMessage(fs, opts.Bypass)
	return v, nil
}

// recordBypass files every bypassed finding as an alert location with a
// bypass entry. The caller's deadline bounds it; it stops at the first
// failure, since the push is then refused anyway.
func (s *Scanner) recordBypass(ctx context.Context, p Push, reason alerts.BypassReason, fs []secretscan.Finding) error {
	by := p.Pusher
	if by == "" {
		by = "anonymous"
	}
	for i := range fs {
		f := &fs[i]
		af := alerts.Finding{
			RuleID: f.RuleID, Description: f.Description, Commit: f.Commit, Path: f.Path,
			Line: f.StartLine, Column: f.StartColumn, BlobID: f.BlobID, Match: f.Match,
			Fingerprint: f.Fingerprint,
		}
		if _, err := s.alerts.RecordBypass(ctx, p.Tenant, p.RepoID, af, by, reason); err != nil {
			return fmt.Errorf("%w: %s at %s:%d: %w", ErrBypassNotRecorded, f.RuleID, f.Path, f.StartLine, err)
		}
	}
	return nil
}

// newObjects lists the objects reachable from tips and from no existing
// ref: git rev-list --objects <tips> --not --all, run with the
// quarantine's objects visible. Those are the objects the push adds
// (anything else reachable from the tips is already in the repository),
// found in time proportional to them and the refs, not to history. Each
// is returned as rev-list prints it, "<id> <path>", which ScanObjects
// takes as is: path-only rules (a .p12 file) match that path.
func newObjects(ctx context.Context, repo secretscan.Repo, tips []string) ([]string, error) {
	args := []string{"-C", repo.Dir, "rev-list", "--objects", "--stdin", "--not", "--all"}
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(os.Environ(), repo.Env...)
	cmd.Stdin = strings.NewReader(strings.Join(tips, "\n") + "\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("pushprotect: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pushprotect: start git rev-list: %w", err)
	}
	var ids []string
	br := bufio.NewReaderSize(out, 64<<10)
	for {
		line, err := br.ReadString('\n')
		// Commits are listed alone, trees and blobs with a path: only
		// the latter can be blobs (ScanObjects keeps just those).
		if l := strings.TrimSuffix(line, "\n"); strings.IndexByte(l, ' ') > 0 {
			ids = append(ids, l)
		}
		if err != nil {
			break
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, &secretscan.GitError{Args: args[2:], Stderr: stderr.String(), Err: err}
	}
	return ids, nil
}

// withPreviousVersions rescans the blobs of findings together with the
// versions they replaced in the pushed commits, and attributes again.
func (s *Scanner) withPreviousVersions(ctx context.Context, e *secretscan.Engine, repo secretscan.Repo, revs []string, fs []secretscan.Finding) ([]secretscan.Finding, error) {
	found := make(map[string]bool)
	for _, f := range fs {
		found[f.BlobID] = true
	}
	prev, err := previousVersions(ctx, repo, revs, found)
	if err != nil {
		return nil, err
	}
	if len(prev) == 0 {
		return fs, nil
	}
	// The findings' blobs again, with their paths so that path-only rules
	// match as in the first pass; the previous versions need none (only
	// content candidates are compared).
	ids := prev
	for _, f := range fs {
		if found[f.BlobID] {
			found[f.BlobID] = false // once: a blob listed twice is scanned twice
			ids = append(ids, f.BlobID+" "+f.Path)
		}
	}
	bs, err := e.ScanObjects(ctx, repo, ids, nil)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: scan previous versions: %w", err)
	}
	out, err := bs.Attribute(ctx, repo, revs)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: attribute: %w", err)
	}
	return out, nil
}

// previousVersions returns the blobs that the commits selected by revs
// replaced with one of the blobs in found: the source side of their raw
// diff entries, read with the same git log options as
// secretscan.BlobScan.Attribute so the entries are the same.
func previousVersions(ctx context.Context, repo secretscan.Repo, revs []string, found map[string]bool) ([]string, error) {
	args := append([]string{"-C", repo.Dir, "-c", "log.showSignature=false", "log", "--full-history", "-z", "--raw", "--no-abbrev",
		"--no-color", "--diff-filter=tuxdb", "--format="}, revs...)
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = append(os.Environ(), repo.Env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("pushprotect: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("pushprotect: start git log: %w", err)
	}
	var prev []string
	seen := make(map[string]bool)
	br := bufio.NewReaderSize(out, 64<<10)
	paths := 0 // path tokens still to skip after an entry
	for {
		tok, err := br.ReadString(0)
		tok = strings.TrimLeft(strings.TrimSuffix(tok, "\x00"), "\n")
		switch {
		case paths > 0:
			paths--
		case strings.HasPrefix(tok, ":"):
			// ":srcMode dstMode src dst status", then one path, or two
			// for a rename or copy.
			f := strings.Fields(tok[1:])
			if len(f) != 5 {
				break
			}
			paths = 1
			if f[4][0] == 'R' || f[4][0] == 'C' {
				paths = 2
			}
			// Type changes (a submodule or symlink becoming a file) are
			// filtered out, as in Attribute, so the source is a blob or
			// nothing.
			if found[f[3]] && f[2] != zeroID && !seen[f[2]] {
				seen[f[2]] = true
				prev = append(prev, f[2])
			}
		}
		if err != nil {
			break
		}
	}
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, &secretscan.GitError{Args: args[2:], Stderr: stderr.String(), Err: err}
	}
	return prev, nil
}
