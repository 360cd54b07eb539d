package gitsvc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/pushprotect"
	"github.com/ghost-scm/ghost/internal/wal"
)

// PullRefPrefix is the namespace of the refs the server keeps for pull
// requests, refs/pull/<n>/head (docs/adr/0117-pull-request-refs.md). A
// client may fetch them but never push them, and the receive-pack
// advertisement hides them, as GitHub's does, so that a mirror push
// does not try to delete them.
const PullRefPrefix = "refs/pull/"

// reasonPullRef is the report-status reason of a client's update of
// refs/pull/*.
const reasonPullRef = "refs/pull/* is kept by the server"

// pushableRefs is refs without the ones clients may not push.
func pushableRefs(refs []wal.Ref) []wal.Ref {
	return slices.DeleteFunc(slices.Clone(refs), func(r wal.Ref) bool { return strings.HasPrefix(r.Name, PullRefPrefix) })
}

// RefUpdate is one ref change of a ServerPush: Old is the id the ref
// must have (wal.ZeroID: absent), New the id it gets (wal.ZeroID:
// deleted).
type RefUpdate struct {
	Ref, Old, New string
}

// ServerPush is a push the server makes itself: the merge of a pull
// request, or a pull request's refs/pull/<n>/head
// (docs/adr/0117-pull-request-refs.md,
// docs/adr/0119-server-side-merge.md). It runs the push path of a
// client's push from its ref checks on: validation of the pack in a
// quarantine, the object and connectivity checks, push protection when
// the repository has it on, BeforeCommit, the commit to the log with
// each update's Old as its compare-and-swap precondition, the cache
// brought forward, and OnCommit. Only the transport is missing.
type ServerPush struct {
	// Request names the repository and the pusher, and carries the
	// repository's settings, as for a client's push; Body, Out, Stream,
	// GitProtocol and Drain are not used.
	Request
	Updates []RefUpdate
	// Pack is the path of a pack file with every object the updates need
	// that the repository may lack, or "" for updates that need none.
	Pack string
}

// ServerPushResult says what became of a ServerPush that was answered.
type ServerPushResult struct {
	// Result is the log's, when the push was committed.
	Result wal.Result
	// Reasons holds, for a refused push, each ref's reason as
	// report-status would give it; nil when the push was committed.
	Reasons map[string]string
	// Moved is the ref the log found at another id than its update's
	// Old (the compare-and-swap lost to a push that moved it); "" when
	// none did.
	Moved string
	// Blocked reports a push that push protection refused: it adds a
	// secret. Message says which, in push protection's words.
	Blocked bool
	Message []string
}

// Committed reports whether the push was committed.
func (r ServerPushResult) Committed() bool { return r.Reasons == nil }

// Push runs a ServerPush. An answered push, committed or refused, is a
// nil error and a result that says which; an *Error is what a client's
// push would have got outside report-status (Busy, Contention,
// NotFound, Internal, with ErrOutcomeUnknown's "may or may not have been
// applied" as for a client).
func (s *Service) Push(ctx context.Context, p ServerPush) (ServerPushResult, error) {
	if len(p.Updates) == 0 {
		return ServerPushResult{}, &Error{Kind: BadRequest, Msg: "a server push needs at least one ref update"}
	}
	pr := &pushRequest{caps: map[string]bool{}, server: true}
	for _, u := range p.Updates {
		if !isOID(u.Old) || !isOID(u.New) {
			return ServerPushResult{}, &Error{Kind: BadRequest, Msg: fmt.Sprintf("server push of %s: bad object id", u.Ref)}
		}
		pr.cmds = append(pr.cmds, command{Old: u.Old, New: u.New, Ref: u.Ref})
	}
	var spool *os.File
	var size int64
	if p.Pack != "" {
		f, err := os.Open(p.Pack)
		if err != nil {
			return ServerPushResult{}, &Error{Kind: Internal, Msg: "server push: open the pack", Err: err}
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return ServerPushResult{}, &Error{Kind: Internal, Msg: "server push: open the pack", Err: err}
		}
		spool, size = f, st.Size()
	}
	release, err := s.admit(ctx, p.Repo)
	if err != nil {
		return ServerPushResult{}, err
	}
	defer release()
	// As a client's push, it lands whole or not at all once it starts.
	var cancel context.CancelFunc
	if s.opts.PushTimeout > 0 {
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), s.opts.PushTimeout)
	} else {
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	defer cancel()
	start := time.Now()
	var steps pushSteps
	rep, res, err := s.push(ctx, p.Request, pr, spool, size, &steps)
	logAttrs := []any{"repo", p.Repo, "by", p.Principal, "refs", len(pr.cmds), "bytes", size, "duration", time.Since(start), steps.attr(), "server", true}
	if err != nil {
		s.logger.Warn("server push failed", append(logAttrs, "err", err)...)
		return ServerPushResult{}, s.pushError(err)
	}
	if rep.failed() {
		s.opts.Metrics.pushResult("rejected")
		s.logger.Info("server push rejected", append(logAttrs, "unpack", rep.unpack, "reasons", rep.reasons)...)
		out := ServerPushResult{Reasons: map[string]string{}, Message: append(slices.Clone(rep.message), rep.detail...)}
		for i, ref := range rep.refs {
			out.Reasons[ref] = rep.reasons[i]
			switch rep.reasons[i] {
			case "fetch first":
				out.Moved = ref
			case pushprotect.Reason:
				out.Blocked = true
			}
		}
		if rep.unpack != "ok" {
			return out, &Error{Kind: Internal, Msg: "server push: the pack did not index: " + rep.unpack, Err: errors.New(rep.unpack)}
		}
		return out, nil
	}
	s.opts.Metrics.pushResult("ok")
	s.logger.Info("server push committed", append(logAttrs, "seq", res.Seq, "entry", res.ULID.String(), "attempts", res.Attempts)...)
	if s.opts.OnCommit != nil && res.Seq > 0 {
		s.opts.OnCommit(p.Request, res)
	}
	return ServerPushResult{Result: res, Message: rep.message}, nil
}
