package alerts

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ghost-scm/ghost/internal/objstore"
)

// The per-state index (docs/adr/0122-alert-state-index.md): a list of
// one state's alerts reads the keys of that state alone, not every alert
// of the tenant.
//
// Each state change of an alert puts a hint key,
//
//	meta/alertstates/<tenant>/<state>/<repoID>/<fp>,<gen>
//
// before the record's compare-and-swap that makes it, where gen is the
// generation that write gives the record (the record keeps it as
// StateGen). So an alert is never in a state without its hint. Nothing
// deletes a hint on the write path: a delete could race a change back to
// that state. A lister judges each hint against the record instead: it
// shows the alert when the record is in that state at that StateGen; the
// hint is stale, and the lister deletes it, when the record has reached
// that generation with another StateGen (a write that took the
// generation without this change, or a later change). A hint whose
// generation the record has not reached yet may belong to a write in
// flight: it is skipped and kept.
const (
	statesPrefix = "meta/alertstates/"
	// statesMarkerKey says every record has its hint: written by
	// BuildStateIndex after a pass over every alert (or at once when there
	// are none). Until it exists, lists filtered by state read every
	// alert, as they did before the index.
	// v2: BuildStateIndex also writes the commit index (commits.go).
	statesMarkerKey = "meta/alertstates-v2"
)

// stateIndex remembers that the index is complete, which is never undone.
type stateIndex struct{ ready atomic.Bool }

// hintKey is the hint of the alert at key (alertKey's form) in state st
// since generation gen.
func hintKey(key string, st State, gen uint64) (string, error) {
	rel, ok := strings.CutPrefix(key, alertsPrefix)
	t, rest, ok2 := strings.Cut(rel, "/")
	if !ok || !ok2 || t == "" || rest == "" {
		return "", fmt.Errorf("alerts: %q is no alert key", key)
	}
	return statesPrefix + t + "/" + string(st) + "/" + rest + "," + strconv.FormatUint(gen, 10), nil
}

func statePrefix(t string, st State) string { return statesPrefix + t + "/" + string(st) + "/" }

// parseHint splits a hint's key, relative to statePrefix, into the
// repository, fingerprint and generation.
func parseHint(rel string) (repo, fp string, gen uint64, ok bool) {
	repo, rest, ok1 := strings.Cut(rel, "/")
	fp, g, ok2 := strings.Cut(rest, ",")
	gen, err := strconv.ParseUint(g, 10, 64)
	// Only the keys putHint writes: a canonical number, a repository id.
	if !ok1 || !ok2 || err != nil || strconv.FormatUint(gen, 10) != g || checkRepoID(repo) != nil || !validFingerprint(fp) {
		return "", "", 0, false
	}
	return repo, fp, gen, true
}

// putHint writes the hint of the alert at key in state st since gen.
func (s *Store) putHint(ctx context.Context, key string, st State, gen uint64) error {
	h, err := hintKey(key, st, gen)
	if err != nil {
		return err
	}
	if _, err := s.objects.Put(ctx, h, strings.NewReader(""), 0); err != nil {
		return fmt.Errorf("alerts: state index: %w", err)
	}
	return nil
}

// stateIndexReady reports whether lists by state may read the index: its
// marker exists, or there are no alerts at all (a new installation, whose
// every alert comes with its hint), in which case it writes the marker.
func (s *Store) stateIndexReady(ctx context.Context) (bool, error) {
	if s.states.ready.Load() {
		return true, nil
	}
	rc, _, err := s.objects.Get(ctx, statesMarkerKey)
	switch {
	case err == nil:
		rc.Close()
		s.states.ready.Store(true)
		return true, nil
	case !errors.Is(err, objstore.ErrNotFound):
		return false, fmt.Errorf("alerts: read %s: %w", statesMarkerKey, err)
	}
	page, err := s.objects.List(ctx, alertsPrefix, "", 1)
	if err != nil {
		return false, fmt.Errorf("alerts: list %s: %w", alertsPrefix, err)
	}
	if len(page) > 0 {
		return false, nil
	}
	if _, err := s.objects.Put(ctx, statesMarkerKey, strings.NewReader(""), 0); err != nil {
		return false, fmt.Errorf("alerts: write %s: %w", statesMarkerKey, err)
	}
	s.states.ready.Store(true)
	return true, nil
}

// EnsureStateIndex runs BuildStateIndex unless the index is complete
// already, and reports whether it ran ("ghost serve" calls it at start).
func (s *Store) EnsureStateIndex(ctx context.Context) (built bool, n int, err error) {
	ready, err := s.stateIndexReady(ctx)
	if err != nil || ready {
		return false, 0, err
	}
	n, err = s.BuildStateIndex(ctx)
	return true, n, err
}

// BuildStateIndex puts the hint of every alert and its commit keys
// (commits.go), then the marker that lets
// lists by state read the index alone. An installation whose alerts
// predate the index needs it once; running it again is harmless: a hint
// it writes for a state an alert has since left is stale, and listers
// delete it. It reads every alert: it costs what exists.
func (s *Store) BuildStateIndex(ctx context.Context) (int, error) {
	n := 0
	err := objstore.Walk(ctx, s.objects, alertsPrefix, func(o objstore.Info) error {
		rec, _, err := s.read(ctx, o.Key)
		switch {
		case errors.Is(err, objstore.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		n++
		if err := s.putCommitKeys(ctx, o.Key, nil, rec); err != nil {
			return err
		}
		return s.putHint(ctx, o.Key, rec.State, rec.StateGen)
	})
	if err != nil {
		return n, fmt.Errorf("alerts: build the state index: %w", err)
	}
	if _, err := s.objects.Put(ctx, statesMarkerKey, strings.NewReader(""), 0); err != nil {
		return n, fmt.Errorf("alerts: write %s: %w", statesMarkerKey, err)
	}
	s.states.ready.Store(true)
	return n, nil
}
