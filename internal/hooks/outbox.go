package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The log is the outbox of push events, and compaction folds its layers
// into checkpoints. What hooks need of a folded layer is its header (who
// pushed, when, the ref transitions) and the objects its push payload
// lists. So compaction asks DeliveredThrough, keeps every object of the
// layers above it (as it does for scanning), and before folding such a
// layer has PreserveEvents keep its header, which the dispatcher reads
// once the index no longer lists the layer
// (docs/adr/0105-webhook-delivery.md).

// DeliveredThrough returns the seq of repo's log through which every
// active hook that follows the log has delivered (or given up) every
// event: compaction keeps what is above it. It looks at the hooks' states
// on the repository (one LIST), the hooks of the repository and of its
// owner, and the repository's pending mark, and is conservative: a hook
// with no state yet counts from the last push before it was turned on.
//
// It also deletes what no hook will read again: the headers kept at or
// below the result, and the states of hooks that no longer exist.
func (s *Store) DeliveredThrough(ctx context.Context, repo string) (uint64, error) {
	x, err := s.opts.Log.Head(ctx, repo)
	if err != nil {
		return 0, err
	}
	low := x.Seq
	states := map[string]*streamState{}
	tenant := ""
	err = objstore.Walk(ctx, s.opts.Store, statePrefix+repo+"/", func(o objstore.Info) error {
		st, err := s.readState(ctx, repo, o.Key[strings.LastIndexByte(o.Key, '/')+1:])
		if err != nil || st == nil {
			return err
		}
		states[st.Hook] = st
		if tenant == "" && st.Tenant != "" {
			tenant = st.Tenant
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("hooks: the states of %s: %w", repo, err)
	}
	if m, ok, err := s.readMark(ctx, repo); err != nil {
		return 0, err
	} else if ok && m.Tenant != "" {
		tenant = m.Tenant
	}
	rs, err := s.readSet(ctx, setsPrefix+"r/"+repo)
	if err != nil {
		return 0, err
	}
	if tenant == "" {
		tenant = rs.Tenant
	}
	sets := []*setRecord{rs}
	if tenant != "" {
		ts, err := s.readSet(ctx, Scope{Tenant: tenant}.setKey())
		if err != nil {
			return 0, err
		}
		sets = append(sets, ts)
	}
	live := map[string]bool{}
	for _, set := range sets {
		if set.Tenant == "" {
			continue
		}
		for i := range set.Hooks {
			h := &set.Hooks[i]
			k := hookKey(set.scope(), h.ID)
			live[k] = true
			if !h.Active || !followsLog(h.Events) {
				continue
			}
			w := uint64(0)
			if st := states[k]; st != nil && st.Epoch == h.Epoch {
				w = st.Seq
			} else {
				w = startOf(x, h.ActiveSince)
			}
			low = min(low, w)
		}
	}
	for k := range states {
		if !live[k] {
			_ = s.opts.Store.Delete(ctx, stateKey(repo, k)) // an orphan: its hook is gone
		}
	}
	s.dropHeaders(ctx, repo, low)
	return low, nil
}

// startOf is where a hook turned on at since starts on a log, as far as
// the index alone tells: after the last listed layer older than since;
// when every listed layer is newer, at the last checkpoint (conservative:
// the dispatcher looks at the kept headers to start after it).
func startOf(x *wal.Index, since time.Time) uint64 {
	for i := len(x.Layers) - 1; i >= 0; i-- {
		if time.UnixMilli(int64(x.Layers[i].ULID.Time())).Before(since) {
			return x.CompactedThroughSeq + uint64(i) + 1
		}
	}
	if c := x.LastCheckpoint(); c != nil && !time.UnixMilli(c.Newest).Before(since) {
		return 0 // folded pushes may be newer than since: keep what was kept
	}
	return x.CompactedThroughSeq
}

// dropHeaders deletes the headers kept for repo at or below seq. Best
// effort: one left is read by nothing and goes with the next call.
func (s *Store) dropHeaders(ctx context.Context, repo string, seq uint64) {
	_ = objstore.Walk(ctx, s.opts.Store, layersPrefix+repo+"/", func(o objstore.Info) error {
		n, err := strconv.ParseUint(o.Key[strings.LastIndexByte(o.Key, '/')+1:], 10, 64)
		if err != nil {
			return nil
		}
		if n > seq {
			return errStop
		}
		return s.opts.Store.Delete(ctx, o.Key)
	})
}

// readMark returns a stream's pending mark.
func (s *Store) readMark(ctx context.Context, stream string) (pendingMark, bool, error) {
	b, _, err := objstore.ReadAll(ctx, s.opts.Store, pendingKey(stream), 64<<10)
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return pendingMark{}, false, nil
	case err != nil:
		return pendingMark{}, false, fmt.Errorf("hooks: read the mark of %s: %w", stream, err)
	}
	var m pendingMark
	if err := json.Unmarshal(b, &m); err != nil {
		return pendingMark{}, true, nil // unreadable: the reconciler replaces it
	}
	return m, true, nil
}
