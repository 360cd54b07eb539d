// Package pushprotect refuses pushes that add secrets (docs/design.md
// §10.2, docs/adr/0031-push-protection.md).
//
// Of the three scanning packages (docs/adr/0116-scanner-package-name.md),
// it checks one push inline, before its commit point; package scanner
// scans what was committed, later, in runs; both match with package
// secretscan's engine.
//
// A receive path calls Checker.Check after the pushed pack has been
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
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/lfs/pointer"
	"github.com/ghost-scm/ghost/internal/secretscan"
	"github.com/ghost-scm/ghost/internal/wal"
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

// ReasonUnscanned is the reason of a push refused because Git LFS objects
// it adds could not be scanned within its budget (lfs.go).
const ReasonUnscanned = "Git LFS objects too large to scan before the push"

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

// Options tune a Checker. Zero values take the defaults.
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
	// WholeLFSObject is the largest Git LFS object read whole (default
	// DefaultWholeLFSObject); larger ones are scanned as a stream.
	// MaxLFSBytes bounds the LFS bytes one push reads (default
	// DefaultMaxLFSBytes; negative: no bound); objects past it are not
	// read, and refuse the push unless Push.LFSScanAfterPush (lfs.go).
	WholeLFSObject int64
	MaxLFSBytes    int64
}

// Checker checks pushes. It holds the compiled rules, shared by every
// check, and is safe for concurrent use.
type Checker struct {
	cfg     *secretscan.Config
	matcher secretscan.Matcher
	alerts  Alerts
	opts    Options
}

// New returns a Checker with the rules of cfg (nil: gitleaks' default
// rules, which is what the server uses: a repository's own .gitleaks.toml
// is not read, so that a push cannot switch its own protection off).
func New(cfg *secretscan.Config, a Alerts, opts Options) (*Checker, error) {
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
	return &Checker{cfg: cfg, matcher: m, alerts: a, opts: opts}, nil
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
	// LFSPointers maps the blobs of the push that are Git LFS pointers
	// to what they name, and LFS opens those objects, whose text is
	// scanned as the pointer's file (lfs.go). Nil LFS scans none.
	LFSPointers map[string]pointer.Pointer
	LFS         LFSObjects
	// LFSScanAfterPush is the repository's setting: LFS objects past the
	// push's budget do not refuse it; they are left to the push's scan
	// run, which reads objects of any size, and alerts.
	LFSScanAfterPush bool
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
	// Reason is the report-status reason of a blocked push's refs:
	// Reason, or ReasonUnscanned when only unscanned LFS objects block.
	Reason string
	// Unscanned are the push's LFS objects past its budget, not read
	// before the commit point: they blocked the push, or, with
	// Push.LFSScanAfterPush, are left to its scan run.
	Unscanned []LFSObject
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

// Check scans what p adds and decides. Errors are failures to decide
// (git, storage), and the push must then be refused: every step fails
// closed. An invalid push option is an *OptionError, returned before
// anything is scanned.
//
// What p adds is every object reachable from its new tips and from no
// existing ref (git rev-list --objects <tips> --not --all, in the
// quarantine): the blobs, scanned at the paths rev-list gives them, and
// the commit and tag objects, scanned whole (headers and message). That
// covers merges, octopus merges, tags of blobs and trees, notes, refs
// outside refs/heads and type changes alike, and a secret already in the
// repository but reachable from no ref (a deleted branch) counts as new
// when a push makes it reachable again. Each finding is placed at the
// commit whose diff added it (secretscan.BlobScan.AttributeAll, merges
// against their first parent); one that no diff adds (a blob reached
// through a tag of a tree or blob) blocks all the same, at its path under
// the pushed ref that reaches it (secretscan.Locate); message findings
// are at their commit or tag.
func (s *Checker) Check(ctx context.Context, p Push) (*Verdict, error) {
	start := time.Now()
	opts, err := ParseOptions(p.Options)
	if err != nil {
		return nil, err
	}
	v := &Verdict{Bypass: opts.Bypass}
	defer func() { v.Duration = time.Since(start) }()

	var tips []string
	var refs []secretscan.RefTip
	for _, u := range p.Updates {
		if u.New != zeroID {
			tips = append(tips, u.New)
			refs = append(refs, secretscan.RefTip{Ref: u.Ref, Tip: u.New})
		}
	}
	if len(tips) == 0 {
		return v, nil
	}
	objs, paths, err := newObjects(ctx, p.Repo, tips)
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
		Matcher: s.matcher, MaxDecodeDepth: s.opts.MaxDecodeDepth, Messages: true,
	})
	if err != nil {
		return nil, fmt.Errorf("pushprotect: %w", err)
	}
	bs, err := e.ScanObjects(ctx, p.Repo, objs, nil)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: scan: %w", err)
	}
	lfs, err := s.scanLFS(ctx, e, bs, p, paths)
	if err != nil {
		return nil, err
	}
	v.Stats = bs.Stats
	v.Stats.Add(lfs.stats) // the objects not read
	v.Unscanned = lfs.unscanned
	// Objects past the budget refuse the push, secrets or not, unless the
	// repository leaves them to the scan run; then the pusher is told.
	refuseUnscanned := len(v.Unscanned) > 0 && !p.LFSScanAfterPush
	var later []string
	if len(v.Unscanned) > 0 && p.LFSScanAfterPush {
		later = s.scanLaterMessage(v.Unscanned)
	}
	if bs.FindingBlobs() == 0 && bs.FindingMessages() == 0 {
		if refuseUnscanned {
			v.Blocked, v.Reason = true, ReasonUnscanned
			v.Message = s.unscannedMessage(v.Unscanned)
		}
		v.Message = append(v.Message, later...)
		return v, nil
	}
	fs, err := s.place(ctx, e, p.Repo, bs, tips, refs, paths, p.LFS)
	if err != nil {
		return nil, err
	}
	fs = append(fs, bs.MessageFindings()...)
	v.Findings = fs
	if len(fs) == 0 {
		if refuseUnscanned {
			v.Blocked, v.Reason = true, ReasonUnscanned
			v.Message = s.unscannedMessage(v.Unscanned)
		}
		v.Message = append(v.Message, later...)
		return v, nil
	}
	switch {
	case opts.Bypass == "":
		v.Blocked, v.Reason = true, Reason
		v.Message = s.blockedMessage(fs)
	case len(fs) > s.opts.MaxBypass:
		v.Blocked, v.Reason = true, Reason
		v.Message = s.tooManyMessage(fs)
	case refuseUnscanned:
		// Nothing is recorded: the push is refused whole, the bypass
		// with it.
		v.Blocked, v.Reason = true, ReasonUnscanned
	}
	if v.Blocked {
		if refuseUnscanned {
			v.Message = append(v.Message, s.unscannedMessage(v.Unscanned)...)
		}
		return v, nil
	}
	if err := s.recordBypass(ctx, p, opts.Bypass, fs, key, lfs.content); err != nil {
		return nil, err
	}
	v.Message = append(s.bypassedMessage(fs, opts.Bypass), later...)
	return v, nil
}

// place turns the candidates of the pushed blobs into findings. paths
// holds the path rev-list gave each pushed object.
//
// Attribution reports a secret only where a diff adds it, by comparing
// with the candidates of the file's previous version. A pushed commit
// that edits a file which already held a secret has that previous
// version in the repository, not in the push, so it was not scanned and
// the old secret would look new. Those previous versions are scanned too
// (only those of files with candidates: the cost stays with the push),
// and the blobs attributed again. What no diff of the pushed commits
// adds is located under the pushed refs.
func (s *Checker) place(ctx context.Context, e *secretscan.Engine, repo secretscan.Repo, bs *secretscan.BlobScan, tips []string, refs []secretscan.RefTip, paths map[string]string, lfs LFSObjects) ([]secretscan.Finding, error) {
	if bs.FindingBlobs() == 0 {
		return nil, nil
	}
	revs := append(append(tips[:len(tips):len(tips)], "--not"), "--all")
	a, err := bs.AttributeAll(ctx, repo, revs)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: attribute: %w", err)
	}
	var prev []string
	for _, id := range a.Replaced {
		if _, pushed := paths[id]; !pushed {
			prev = append(prev, id)
		}
	}
	if len(prev) > 0 {
		// The previous versions need no paths (only content candidates
		// are compared); a previous version that is a Git LFS pointer is
		// compared by its object, read as the push's are.
		ps, err := e.ScanObjects(ctx, repo, prev, nil)
		if err != nil {
			return nil, fmt.Errorf("pushprotect: scan previous versions: %w", err)
		}
		if err := s.scanPreviousLFS(ctx, ps, lfs); err != nil {
			return nil, err
		}
		bs.Merge(ps)
		if a, err = bs.AttributeAll(ctx, repo, revs); err != nil {
			return nil, fmt.Errorf("pushprotect: attribute: %w", err)
		}
	}
	// Unplaced: the pushed blobs only (a previous version is no diff's
	// addition among the pushed commits, and was not pushed).
	var unplaced []string
	for _, id := range a.Unplaced {
		if _, pushed := paths[id]; pushed {
			unplaced = append(unplaced, id)
		}
	}
	fs := a.Findings
	if len(unplaced) == 0 {
		return fs, nil
	}
	reach, err := secretscan.Locate(ctx, repo, refs, []string{"--all"}, unplaced)
	if err != nil {
		return nil, fmt.Errorf("pushprotect: locate: %w", err)
	}
	for _, id := range unplaced {
		if _, ok := reach[id]; !ok {
			// Listed by rev-list over the pushed tips, so some pushed
			// ref reaches it; it blocks wherever it is.
			reach[id] = secretscan.Reach{Path: paths[id]}
		}
	}
	return append(fs, bs.LocatedFindings(unplaced, reach)...), nil
}

// recordBypass files every bypassed finding as an alert location with a
// bypass entry. The caller's deadline bounds it; it stops at the first
// failure, since the push is then refused anyway.
func (s *Checker) recordBypass(ctx context.Context, p Push, reason alerts.BypassReason, fs []secretscan.Finding, key []byte, lfsContent map[string][]byte) error {
	by := p.Pusher
	if by == "" {
		by = "anonymous"
	}
	secrets := s.secretsOf(ctx, p.Repo, key, fs, lfsContent)
	for i := range fs {
		f := &fs[i]
		af := alerts.Finding{
			RuleID: f.RuleID, Description: f.Description, Commit: f.Commit, Path: f.Path,
			Line: f.StartLine, Column: f.StartColumn, BlobID: f.BlobID, Match: f.Match,
			Fingerprint: f.Fingerprint, Source: string(f.Source), Ref: f.Ref,
			Secret: secrets[i], // "" when it could not be read back: nothing to reveal
		}
		if _, err := s.alerts.RecordBypass(ctx, p.Tenant, p.RepoID, af, by, reason); err != nil {
			return fmt.Errorf("%w: %s at %s: %w", ErrBypassNotRecorded, f.RuleID, where(f), err)
		}
	}
	return nil
}

// newObjects lists the objects reachable from tips and from no existing
// ref: git rev-list --objects <tips> --not --all, run with the
// quarantine's objects visible. Those are the objects the push adds
// (anything else reachable from the tips is already in the repository),
// found in time proportional to them and the refs, not to history. Each
// is returned as rev-list prints it, "<id>" for a commit and "<id>
// <path>" for the others, which ScanObjects takes as is: path-only rules
// (a .p12 file) match that path. paths maps every id to its path.
func newObjects(ctx context.Context, repo secretscan.Repo, tips []string) ([]string, map[string]string, error) {
	args := []string{"rev-list", "--objects", "--stdin", "--not", "--all"}
	cmd := command(ctx, repo, args...)
	cmd.Stdin = strings.NewReader(strings.Join(tips, "\n") + "\n")
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fmt.Errorf("pushprotect: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("pushprotect: start git rev-list: %w", err)
	}
	var ids []string
	paths := make(map[string]string)
	br := bufio.NewReaderSize(out, 64<<10)
	var perr error
	for {
		line, err := br.ReadString('\n')
		if l := strings.TrimSuffix(line, "\n"); l != "" {
			id, path, _ := strings.Cut(l, " ")
			if !wal.IsObjectID(id) {
				perr = fmt.Errorf("pushprotect: git rev-list printed %q", clip(l, 100))
				break
			}
			if _, dup := paths[id]; !dup {
				paths[id] = path
				ids = append(ids, l)
			}
		}
		if err != nil {
			break
		}
	}
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr != nil {
		return nil, nil, perr
	}
	if werr != nil {
		return nil, nil, &secretscan.GitError{Args: args, Stderr: cmd.StderrText(), Err: werr}
	}
	return ids, paths, nil
}

// command prepares git in repo through gitexec, as every server-side git
// process is (docs/adr/0031-push-protection.md).
func command(ctx context.Context, repo secretscan.Repo, args ...string) *gitexec.Cmd {
	g := repo.Git
	if g == nil {
		g = &gitexec.Runner{}
	}
	return g.Command(ctx, "", repo.Env, append([]string{"-C", repo.Dir}, args...)...)
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
