package wal

import (
	"errors"
	"fmt"
)

// ErrContention means the index compare-and-swap was lost on every attempt.
// Nothing was committed; the client should retry the push.
var ErrContention = errors.New("repository is busy: too many concurrent pushes, retry")

// ErrOutcomeUnknown means an index write was sent but its outcome could
// not be learned: the store stopped answering, or the context ended, while
// the write may still apply. The push may or may not be committed; its
// entry is kept (deleting it could corrupt the log), and re-reading the
// refs tells. It is distinct from objstore.ErrOutcomeUnknown, which is
// about one object's write: a commit whose entry PUT was ambiguous
// certainly did not commit. See docs/adr/0006-write-outcomes.md.
var ErrOutcomeUnknown = errors.New("outcome unknown: the push may have been committed")

// ErrRepoDeleted means the repository carries a tombstone. It reads as
// absent, and no push can land on it.
var ErrRepoDeleted = errors.New("repository deleted")

// ErrRepoExists means a create or fork found an index (or a tombstone)
// already at the destination.
var ErrRepoExists = errors.New("repository already exists")

// ErrCorrupt is matched (with errors.Is) by every *CorruptError.
var ErrCorrupt = errors.New("corrupt log")

// ErrInvalid is matched by every *InvalidError: a request the log refuses
// before it touches storage.
var ErrInvalid = errors.New("invalid log request")

// CorruptError reports stored bytes that do not decode. The log never
// repairs them silently: the object and the reason are named so an operator
// can act.
type CorruptError struct {
	Object string // key or description of what was read
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("corrupt log: %s: %s", e.Object, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corrupt(object, format string, args ...any) error {
	return &CorruptError{Object: object, Reason: fmt.Sprintf(format, args...)}
}

// InvalidError reports a malformed request: a bad repository id, ref name,
// object id or transition list.
type InvalidError struct{ Reason string }

func (e *InvalidError) Error() string { return "invalid: " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &InvalidError{Reason: fmt.Sprintf(format, args...)}
}

// NonFastForwardError reports a transition whose old id no longer matches
// the live ref: someone else pushed first. It is final, never retried.
type NonFastForwardError struct {
	Ref      string
	Expected string // the old id the push presented (zero id: "ref absent")
	Actual   string // the live id (zero id: ref absent)
}

func (e *NonFastForwardError) Error() string {
	return fmt.Sprintf("non-fast-forward: %s is at %s, push expected %s", e.Ref, e.Actual, e.Expected)
}

// RefConflictError reports a push that would leave both a ref and a ref
// below it ("a" and "a/b"), which git cannot store.
type RefConflictError struct {
	Ref      string
	Conflict string
}

func (e *RefConflictError) Error() string {
	return fmt.Sprintf("ref %s conflicts with existing ref %s", e.Ref, e.Conflict)
}
