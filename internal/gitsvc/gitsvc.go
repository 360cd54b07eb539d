// Package gitsvc runs git's server side of a fetch or a push for any
// transport (docs/design.md §6, docs/adr/0018-git-service-boundary.md).
//
// It owns the git protocol work that does not depend on how bytes reach
// the server: upload-pack through the git binary, with the git slots
// (docs/adr/0015-git-resource-limits.md) and the hold-back retry after a
// damaged cache (docs/adr/0016-cache-self-healing.md); and ghost's own
// receive-pack (docs/adr/0010-git-receive-pack.md): command parsing,
// spooling under the push size limit, git index-pack --strict in a
// quarantine, the object and connectivity checks, the commit through the
// log, and report-status. A transport reads the client's request as an
// io.Reader, hands it over with a Request, and maps the *Error the
// service returns to its own terms (githttp to HTTP status codes).
//
// The service knows the cache and the log only through the small
// interfaces it declares, Materializer and Committer; cacheadapter
// implements them over repocache and wal. It has no notion of HTTP.
package gitsvc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitexec"
	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/wal"
)

// LocalCopy is a repository materialized on local disk: a bare git
// repository (no work tree).
type LocalCopy struct {
	// Dir is the bare git repository, as of the log's current index.
	Dir string
	// Refs are the refs the log has (sorted by name), and Head the branch
	// HEAD points at ("" when there is none).
	Refs []wal.Ref
	Head string
	// Healed reports that this materialization found the local copy
	// damaged (after Suspect) and rebuilt it: a request that failed on
	// the old copy is worth retrying.
	Healed bool
}

// Materializer brings a repository's local copy up to the log.
type Materializer interface {
	// Materialize returns the repository as the log has it now, its HEAD
	// naming defaultBranch (the repository's setting, Request.DefaultBranch)
	// when that branch exists, or the server's own choice when it is ""
	// or missing (docs/adr/0110-default-branch.md). An error wrapping
	// wal.ErrRepoDeleted means the repository is gone.
	Materialize(ctx context.Context, repo, defaultBranch string) (*LocalCopy, error)
	// Suspect marks the local copy for verification at the next
	// Materialize, after git failed on it; it reports whether that
	// verification will happen.
	Suspect(repo string) bool
}

// Committer is the commit point of a push.
type Committer interface {
	// Commit appends the push to the repository's log (wal.Log.Commit).
	Commit(ctx context.Context, repo string, p wal.Push) (wal.Result, error)
	// Adopt brings this node's copy forward with the validated pack the
	// push committed (pack-<packHash>.pack in packDir; packHash "" for a
	// push without objects). A failure only costs the next request time.
	Adopt(ctx context.Context, repo string, res wal.Result, packDir, packHash string) error
}

// Stager is a Committer that can store a push's pack before the push is
// validated, so that the upload overlaps git index-pack
// (docs/adr/0019-staged-entries.md). cacheadapter's implements it over
// wal.Log.Stage; a Committer without it uploads after validation.
type Stager interface {
	// Stage stores the entry of p without committing it (wal.Log.Stage).
	Stage(ctx context.Context, repo string, p wal.Push) (*wal.Staged, error)
	// CommitStaged commits a staged entry (wal.Log.CommitStaged).
	CommitStaged(ctx context.Context, st *wal.Staged, idx io.Reader, idxSize int64) (wal.Result, error)
	// Discard deletes a staged entry that will not be committed.
	Discard(st *wal.Staged)
}

// Options configure a Service.
type Options struct {
	Repos   Materializer    // required
	Commits Committer       // required
	Git     *gitexec.Runner // required
	// TempDir returns a scratch directory on the same file system as the
	// repositories (spools and quarantines). Required.
	TempDir func() (string, error)
	Logger  *slog.Logger // nil discards
	Metrics *Metrics     // nil records nothing
	// Limits are the node's resource limits on the git path; zero fields
	// take their defaults (Limits). The service applies all but the two
	// connection timeouts, which the transports apply.
	Limits
	// LFS, when set, refuses a push whose Git LFS pointers name objects
	// the repository does not hold (LFSObjects).
	LFS LFSObjects
	// MaxLFSPointers bounds the distinct LFS objects one push may name:
	// each costs a read of the object store, and a pack of tiny pointer
	// blobs is cheap to make, so a larger import goes in several pushes.
	// Zero means DefaultMaxLFSPointers, negative no bound.
	MaxLFSPointers int
	// PushProtect checks the pushes of repositories with push protection
	// on (Request.PushProtection) after validation and before the commit
	// point (docs/adr/0031-push-protection.md); nil never checks.
	PushProtect PushProtector
	// OnCommit, when set, is called after every committed push, before
	// the response is written, with the push's request and result. It
	// must not block: secret scanning starts its push run from here in
	// the background (docs/adr/0032-scan-runs.md), and a push never
	// waits for the coordinator; so does compaction
	// (docs/adr/0050-compaction.md).
	OnCommit func(req Request, res wal.Result)
	// BeforeCommit, when set, is called once a push is validated, just
	// before its commit point; an error refuses the push with nothing
	// changed. The server records there what must survive the pushing
	// node's death right after the commit (the repository's pending-scan
	// mark, docs/adr/0033-scan-coverage.md).
	BeforeCommit func(ctx context.Context, req Request) error
	// StageMinBytes is the smallest pack that is uploaded to the store
	// while it is indexed, when Commits is a Stager (default
	// DefaultStageMinBytes; negative: never). Smaller packs are uploaded
	// after validation, as are packs that index-pack had to complete.
	StageMinBytes int64
	// Serving, when set, is told about every git request from the moment
	// it asks for a git slot until it is done, so that background work
	// (compaction, secret scanning) pauses while requests are served
	// (gitexec.Background, docs/adr/0051-geometric-checkpoints.md).
	Serving ServingTracker
}

// ServingTracker counts the git requests a node is serving
// (gitexec.Background implements it).
type ServingTracker interface {
	// Serving records a request in progress; done ends it.
	Serving() (done func())
}

// DefaultStageMinBytes is the default Options.StageMinBytes: below it
// the upload is short next to the push's fixed costs, and an incremental
// push's pack is often thin, so that what was staged is thrown away.
const DefaultStageMinBytes = 1 << 20

// PushProtector decides whether a validated push may be committed: a
// *pushprotect.Checker.
type PushProtector interface {
	Check(ctx context.Context, p pushprotect.Push) (*pushprotect.Verdict, error)
}

// Service runs upload-pack and receive-pack. It is safe for concurrent
// use; every transport of a node should share one, so that they share
// its git slots.
type Service struct {
	opts   Options
	logger *slog.Logger
	gate   *gate // nil: no cap on concurrent git requests
}

// New returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Repos == nil || opts.Commits == nil || opts.Git == nil || opts.TempDir == nil {
		return nil, errors.New("gitsvc: Repos, Commits, Git and TempDir are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.Limits = opts.Limits.WithDefaults()
	opts.StageMinBytes = OrDefault(opts.StageMinBytes, DefaultStageMinBytes)
	return &Service{
		opts: opts, logger: opts.Logger,
		gate: newGate(opts.MaxGitProcesses, opts.GitQueue, opts.GitQueueTimeout, opts.Metrics),
	}, nil
}

// OrDefault maps a zero setting to its default; negative settings (which
// switch a limit off) and positive ones stay.
func OrDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Services, as git names them.
const (
	UploadPackService  = "git-upload-pack"
	ReceivePackService = "git-receive-pack"
)

// Request is one git command to serve.
type Request struct {
	// Repo is the repository's log id; the caller has authorized the
	// command on it.
	Repo string
	// Principal names the caller for the log's pushed-by field ("" when
	// anonymous).
	Principal string
	// Tenant owns the repository; push protection files bypasses under
	// it, with its fingerprint key.
	Tenant string
	// Name is the repository's name as displayed, for what is told of a
	// committed push (webhooks); "" when the transport does not say.
	Name string
	// PushProtection is the repository's setting: check a push for
	// secrets before committing it (Options.PushProtect).
	PushProtection bool
	// AllowReplaceRefs is the repository's setting: without it a push
	// that creates or moves a refs/replace/* ref is refused
	// (docs/adr/0031-push-protection.md); deleting one is always allowed.
	AllowReplaceRefs bool
	// AllowMissingLFS is the repository's setting: a push may name Git
	// LFS objects the repository does not hold (a mirror's).
	AllowMissingLFS bool
	// LFSScanAfterPush is the repository's setting: Git LFS objects too
	// large for push protection's budget do not refuse the push; its scan
	// run reads them (pushprotect.Push.LFSScanAfterPush).
	LFSScanAfterPush bool
	// DefaultBranch is the repository's setting: the branch HEAD names,
	// which clones check out and a push may not delete, without
	// refs/heads/ ("" lets the cache choose; docs/adr/0110-default-branch.md).
	DefaultBranch string
	// BranchRules are the repository's protected branches: a push that
	// a rule forbids is refused (docs/adr/0123-protected-branches.md).
	BranchRules []access.BranchRule
	// Actor is the pusher's tenant name, bare, for the rules' pushers
	// ("" when anonymous or the server).
	Actor string
	// Body is the client's request: with Stream unset, one whole
	// stateless-rpc request, ending at EOF (HTTP); with Stream set, the
	// client's side of a full-duplex session (SSH).
	Body io.Reader
	// Out receives git's response. The service writes to it only once it
	// is committed to answering in git's protocol: an *Error returned
	// with nothing written can still be answered in the transport's terms.
	// When Out has a Flush() error method, it is flushed after each write
	// of an upload-pack response.
	Out io.Writer
	// GitProtocol is the client's GIT_PROTOCOL, already checked to be well
	// formed ("" for none).
	GitProtocol string
	// Stream selects the full-duplex flavour: ghost advertises the refs
	// first, then reads the commands from Body (git runs without
	// --stateless-rpc).
	Stream bool
	// Drain, when set, is read and discarded after a push over the size
	// limit, so that the client gets to read the refusal (HTTP: the raw
	// request body). Nil drains Body.
	Drain io.Reader
}

// Kind classifies an Error for the transport.
type Kind int

const (
	// Internal is the server's fault.
	Internal Kind = iota
	// BadRequest is a request that is not a git request at all.
	BadRequest
	// BodyError is a failure to read the client's request (Err says which:
	// the transport knows whether it timed out or the client went away).
	BodyError
	// TooLarge is a request over a limit, refused without report-status.
	TooLarge
	// Busy is a request that found no git slot; RetryAfter says when to
	// come back.
	Busy
	// Contention is a push that lost too many commit races; nothing was
	// changed and it may be retried (RetryAfter).
	Contention
	// NotFound is a repository that was deleted.
	NotFound
	// Canceled is a request the client gave up: no answer is due.
	Canceled
	// Broken is a response that failed after it started (or could not be
	// delivered): the service logged it, and nothing more can be said.
	Broken
	// Refused is a request refused in git's own protocol, as git refuses
	// a want no ref reaches: the client was told in-band (an error
	// packet), and Msg says it again for a transport's side channel.
	Refused
)

// Error is a request the service did not answer in git's protocol: the
// transport reports it in its own terms. Msg is meant for the user.
type Error struct {
	Kind       Kind
	Msg        string
	Err        error
	RetryAfter int // seconds, for Busy and Contention
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Msg + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// GrantRequest is the request of a caller granted g on a repository: the
// repository's settings and who the caller is. The transports add the
// body, the output and the protocol.
func GrantRequest(g access.Grant) Request {
	return Request{
		Repo: g.RepoID, Principal: g.Principal, Actor: g.Actor, Tenant: g.Tenant, Name: g.Name,
		PushProtection: g.PushProtection, AllowReplaceRefs: g.AllowReplaceRefs, DefaultBranch: g.DefaultBranch,
		BranchRules: g.BranchRules, AllowMissingLFS: g.AllowMissingLFS, LFSScanAfterPush: g.LFSScanAfterPush,
	}
}
