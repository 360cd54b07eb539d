package coord

import "context"

// A board is a second shape of distributed work, beside runs and shards:
// named items that appear and disappear without end (a webhook with
// events to deliver, docs/adr/0105-webhook-delivery.md), each taken by
// one process at a time under a hold that dies with the process. The
// etcd backend implements it (etcdcoord.Board); consumers declare the
// interface they use.

// BoardItem is one piece of work on a board: Key names it, Value is what
// its poster said about it, Rev the revision it was last posted at (so
// that finishing it can tell a newer post from the one it served).
type BoardItem struct {
	Key   string
	Value []byte
	Rev   int64
}

// Hold is a process's exclusive claim on a name of a board. It lasts
// while the process keeps its coordination session: a process that dies
// or loses the coordination store for longer than the hold's time to
// live loses it, and another may take it.
type Hold interface {
	// Fence is a number that every later hold of the same name exceeds:
	// records written under the hold carry it, so that a holder that lost
	// the hold without knowing it can change nothing.
	Fence() int64
	// Lost is closed when the hold ends: released, or the session lost.
	Lost() <-chan struct{}
	// Release gives the hold up, so another process may take it at once.
	Release(ctx context.Context) error
}

// BoardEventKind says what a BoardEvent reports.
type BoardEventKind int

// What a board's watch reports.
const (
	// BoardSnapshot: Items and Held are the whole board, as of now; what
	// the consumer knew before is replaced (a watch began or resumed).
	BoardSnapshot BoardEventKind = iota
	// BoardPosted: an item was posted (Key, Value).
	BoardPosted
	// BoardDone: an item was finished (Key).
	BoardDone
	// BoardHeld: a name was taken (Key).
	BoardHeld
	// BoardReleased: a hold ended (Key), released or lost.
	BoardReleased
)

// BoardEvent is one change of a board, or its whole state.
type BoardEvent struct {
	Kind  BoardEventKind
	Key   string
	Value []byte
	// Items and Held are set on a BoardSnapshot.
	Items []BoardItem
	Held  []string
}
