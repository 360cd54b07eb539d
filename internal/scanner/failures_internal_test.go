package scanner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/coord"
	"github.com/ghost-scm/ghost/internal/coord/etcdcoord"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestTransientClassification: outages, unknown outcomes and lost leases
// are transient however deeply they are wrapped; a failure that says
// something about the input is not.
func TestTransientClassification(t *testing.T) {
	store := &objstore.Error{Op: "Get", Key: "k", Err: fmt.Errorf("timeout: %w", objstore.ErrUnavailable)}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"store unavailable, as an input failure", &inputError{"the repository", fmt.Errorf("materialize: %w", store)}, true},
		{"etcd unavailable", fmt.Errorf("claim: %w", etcdcoord.ErrUnavailable), true},
		{"etcd contention", etcdcoord.ErrContention, true},
		{"lease taken over", fmt.Errorf("checkpoint: %w", coord.ErrStaleFence), true},
		{"write outcome unknown", fmt.Errorf("record: %w", objstore.ErrOutcomeUnknown), true},
		{"log contention", wal.ErrContention, true},
		{"network", &net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{"deadline", context.DeadlineExceeded, true},
		{"corrupt log", &inputError{"the repository", &wal.CorruptError{Object: "o", Reason: "r"}}, false},
		{"git failed on a blob", &inputError{"3 blobs a..c", errors.New("git cat-file: exit status 128")}, false},
		{"not found", fmt.Errorf("read: %w", objstore.ErrNotFound), false},
		{"nil", nil, false},
	} {
		if got := transient(c.err); got != c.want {
			t.Errorf("%s: transient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

// TestBackoffDoublesAndForgets: each failure of a run doubles how long
// this process leaves it alone, up to maxBackoff; a success forgets it;
// another run is never held back by it.
func TestBackoffDoublesAndForgets(t *testing.T) {
	now := time.Unix(1000, 0)
	b := backoff{now: func() time.Time { return now }}
	var waits []time.Duration
	for range 9 {
		waits = append(waits, b.fail(1))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 64 * time.Second, maxBackoff, maxBackoff, maxBackoff}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", waits, want)
		}
	}
	if !b.waiting(1) || b.waiting(2) {
		t.Fatal("run 1 should wait, run 2 should not")
	}
	now = now.Add(maxBackoff)
	if b.waiting(1) {
		t.Fatal("run 1 still waits after its backoff")
	}
	b.fail(1)
	b.ok(1)
	if b.waiting(1) {
		t.Fatal("a success did not clear the backoff")
	}
	if d := b.fail(1); d != minBackoff {
		t.Fatalf("after a success the next backoff is %v, want %v", d, minBackoff)
	}
}

// TestFinishDueThrottles: a claim pass offers a run to finish at most once
// per finishEvery.
func TestFinishDueThrottles(t *testing.T) {
	now := time.Unix(1000, 0)
	b := backoff{now: func() time.Time { return now }}
	if !b.finishDue(7) || b.finishDue(7) {
		t.Fatal("want one finish per interval")
	}
	if !b.finishDue(8) {
		t.Fatal("another run is throttled by run 7")
	}
	now = now.Add(finishEvery)
	if !b.finishDue(7) {
		t.Fatal("run 7 is not offered again after the interval")
	}
}
