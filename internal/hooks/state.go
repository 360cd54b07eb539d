package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/record"
)

// streamState is a hook's progress on one stream,
// hooks/state/<stream>/<hookKey>:
//
//   - Seq and Part are the watermark over the repository's log: every
//     event of every seq up to Seq, and the first Part events of seq
//     Seq+1, are delivered (or given up);
//   - Cur is the event being retried, which blocks those after it: per
//     hook and stream, events go out in order;
//   - Fence is the fence of the dispatcher's hold that wrote it last: a
//     dispatcher whose hold is older changes nothing;
//   - Epoch is the hook's epoch it counts for: a hook turned off and on
//     again starts afresh.
//
// Events that are not in the log are queued objects, deleted once
// delivered; the state only says which one is in retry.
type streamState struct {
	V      int      `json:"v"`
	Hook   string   `json:"hook"`
	Stream string   `json:"stream"`
	Tenant string   `json:"tenant"`
	Name   string   `json:"name,omitempty"`
	Epoch  uint32   `json:"epoch"`
	Fence  int64    `json:"fence"`
	Seq    uint64   `json:"seq"`
	Part   int      `json:"part,omitempty"`
	Cur    *attempt `json:"cur,omitempty"`
	// Delivered and Failed count events, for the API.
	Delivered int64 `json:"delivered,omitempty"`
	Failed    int64 `json:"failed,omitempty"`
}

// attempt is an event in retry. Body is what the first attempt sent, so
// that every retry sends the same bytes under the same delivery id.
type attempt struct {
	Log   bool   `json:"log,omitempty"` // a log event at (Seq, Part); else the queued object Queue
	Seq   uint64 `json:"seq,omitempty"`
	Part  int    `json:"part,omitempty"`
	Queue string `json:"queue,omitempty"`
	// Parts is how many events the seq has, so that the watermark moves
	// past the seq with its last event.
	Parts    int             `json:"parts,omitempty"`
	GUID     string          `json:"guid"`
	Event    string          `json:"event"`
	Body     json.RawMessage `json:"body"`
	First    time.Time       `json:"first"`
	Attempts int             `json:"attempts"`
	Next     time.Time       `json:"next"`
	Error    string          `json:"error,omitempty"`
}

const stateVersion = 1

var stateCodec = func() record.Codec[streamState] {
	c := record.JSON[streamState]()
	c.Max = 64 << 20
	return c
}()

func stateKey(stream, hook string) string { return statePrefix + stream + "/" + hook }

// readState returns the hook's state on the stream; nil when it has none.
func (s *Store) readState(ctx context.Context, stream, hook string) (*streamState, error) {
	st, _, err := s.readStateTag(ctx, stream, hook)
	return st, err
}

// readStateTag is readState with the state's ETag.
func (s *Store) readStateTag(ctx context.Context, stream, hook string) (*streamState, string, error) {
	st, etag, err := record.Get(ctx, s.opts.Store, stateCodec, stateKey(stream, hook))
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return nil, "", nil
	case err != nil:
		return nil, "", storeErr("read the progress of hook "+hook, err)
	}
	return st, etag, nil
}

// errStale reports a dispatcher whose hold is older than the one that
// wrote the state: another holds the hook now.
var errStale = errors.New("hooks: another dispatcher took over this hook")

// writeState replaces the hook's state on the stream by next, by
// compare-and-swap against what the dispatcher holding fence last knew.
// It refuses (errStale) when a dispatcher with a newer fence wrote the
// state: two dispatchers may overlap for as long as a lost hold takes to
// notice, and only the newer one may move the watermark.
//
// etag, when set, is the state's ETag as this dispatcher last read or
// wrote it: the write is then one conditional PUT on it, and only a lost
// race or an unknown outcome takes the careful way below. It returns the
// new ETag when it knows it.
//
// Outcome unknown: record.Update reads the state back; a state that
// holds next (the same watermark, attempt and counters) is ours landed.
// When it cannot tell, the error says so and the dispatcher stops serving
// the stream; the next one reads what is there and goes on from it. An
// event may then go out again, with the same delivery id (at least once).
// A conditional PUT of ours that lands late fails its precondition, since
// the careful way wrote over the ETag it named.
func (s *Store) writeState(ctx context.Context, next *streamState, etag string) (string, error) {
	if etag != "" {
		b, err := stateCodec.Encode(next)
		if err != nil {
			return "", err
		}
		info, err := s.opts.Store.PutIfMatch(ctx, stateKey(next.Stream, next.Hook), bytes.NewReader(b), int64(len(b)), etag)
		if err == nil {
			return info.ETag, nil
		}
	}
	_, err := record.Update(ctx, s.opts.Store, stateCodec, stateKey(next.Stream, next.Hook), record.Options{Attempts: 3}, func(cur *streamState) (*streamState, error) {
		if cur != nil && cur.Fence > next.Fence {
			return nil, errStale
		}
		if cur != nil && sameState(cur, next) {
			return nil, nil
		}
		n := *next
		return &n, nil
	})
	if errors.Is(err, errStale) {
		return "", errStale
	}
	if err != nil {
		return "", fmt.Errorf("hooks: write the progress of hook %s on %s: %w", next.Hook, next.Stream, err)
	}
	return "", nil
}

func sameState(a, b *streamState) bool {
	ab, _ := json.Marshal(a)
	bb, _ := json.Marshal(b)
	return string(ab) == string(bb)
}
