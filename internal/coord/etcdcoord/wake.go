package etcdcoord

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ghost-scm/ghost/internal/coord"
)

// WatchClaimable returns a channel that receives a value soon after a
// shard of any run of the namespace becomes claimable by being written
// without a lease: registered, split off, or unparked. Lease renewals and
// acquisitions, which rewrite the same index entries, do not signal. The
// channel also receives a value whenever the watch had to be
// re-established (etcd was unreachable), since events may have been
// missed meanwhile, and once when the watch is first established.
// Signals are coalesced: a consumer that was busy
// finds at most one waiting. A shard whose lease ran out is claimable
// too but writes nothing, so consumers still poll, rarely.
//
// Workers wait on it instead of polling (docs/adr/0033-scan-coverage.md,
// issue 22): one watch stream per process costs etcd no requests while
// nothing happens. The channel is closed when ctx ends.
func (b *Backend) WatchClaimable(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	signal := func() {
		select {
		case out <- struct{}{}:
		default:
		}
	}
	prefix := b.k.ns + "/open/"
	go func() {
		defer close(out)
		wait := 100 * time.Millisecond
		for ctx.Err() == nil {
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			wch := b.c.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithFilterDelete(), clientv3.WithCreatedNotify())
			healthy := false
			for resp := range wch {
				if resp.Err() != nil {
					break
				}
				healthy = true
				if resp.Created {
					// What happened before the watch existed is unseen:
					// have the consumer look once.
					signal()
				}
				for _, ev := range resp.Events {
					if e, err := decodeOpen(string(ev.Kv.Key), ev.Kv.Value); err == nil && e.state == coord.ShardActive && e.deadline == 0 {
						signal()
						break
					}
				}
			}
			cancel()
			if ctx.Err() != nil {
				return
			}
			signal() // events may have been missed while the watch was down
			if healthy {
				wait = 100 * time.Millisecond
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, 30*time.Second)
		}
	}()
	return out
}

// Lead runs fn while this process leads name among the processes of the
// namespace that call Lead with the same name: an etcd election
// (clientv3/concurrency) on a session whose lease lasts ttl, so a leader
// that dies is replaced within ttl. fn's context ends when leadership is
// lost (the session expired, etcd unreachable for longer than ttl) or ctx
// ends; Lead then campaigns again, until ctx ends. It returns ctx's error.
//
// Leadership saves work, it does not make anything safe: what fn does
// must be correct when two processes briefly both believe they lead.
func (b *Backend) Lead(ctx context.Context, name string, ttl time.Duration, fn func(ctx context.Context)) error {
	secs := int(ttl / time.Second)
	if secs < 1 {
		return fmt.Errorf("%w: leadership ttl %v is under a second", coord.ErrInvalidArgument, ttl)
	}
	wait := time.Second
	for ctx.Err() == nil {
		err := b.leadOnce(ctx, name, secs, fn)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
			wait = min(2*wait, time.Minute)
			continue
		}
		wait = time.Second
	}
	return ctx.Err()
}

func (b *Backend) leadOnce(ctx context.Context, name string, secs int, fn func(ctx context.Context)) error {
	s, err := concurrency.NewSession(b.c, concurrency.WithTTL(secs), concurrency.WithContext(ctx))
	if err != nil {
		return b.etcdErr(err, nil)
	}
	defer s.Close()
	e := concurrency.NewElection(s, b.k.ns+"/leaders/"+name)
	if err := e.Campaign(ctx, fmt.Sprintf("%x", s.Lease())); err != nil {
		if errors.Is(err, context.Canceled) {
			return err
		}
		return b.etcdErr(err, nil)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Done(): // the session's lease is gone: so is leadership
			cancel()
		case <-lctx.Done():
		}
	}()
	fn(lctx)
	// Resign so a successor need not wait for the lease to run out; with
	// ctx ended, use a short context of its own.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer rcancel()
	_ = e.Resign(rctx)
	return nil
}
