package etcdcoord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/ghost-scm/ghost/internal/coord"
)

// Board is a board of work (coord.BoardItem) whose names are held by one
// process at a time (docs/adr/0105-webhook-delivery.md):
//
//	<ns>/boards/<name>/work/<key>   an item: posted by whoever has work, finished by its holder
//	<ns>/boards/<name>/hold/<name>  a hold: attached to the holder's session lease
//
// Every process shares one session (one etcd lease, kept alive by one
// stream) for all its holds, so holding many names costs etcd nothing
// while nothing changes; when the process dies the lease runs out after
// the time to live and every hold of it goes at once. A hold's fence is
// the revision that created it, which every later hold of the name
// exceeds.
type Board struct {
	b    *Backend
	pre  string
	ttl  int
	self string

	mu   sync.Mutex
	sess *concurrency.Session
}

// Board returns the board called name, whose holds last ttl (at least a
// second) past their holder's last contact with etcd.
func (b *Backend) Board(name string, ttl time.Duration) (*Board, error) {
	if name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("%w: board name %q", coord.ErrInvalidArgument, name)
	}
	secs := int(ttl / time.Second)
	if secs < 1 {
		return nil, fmt.Errorf("%w: board hold ttl %v is under a second", coord.ErrInvalidArgument, ttl)
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	return &Board{b: b, pre: b.k.ns + "/boards/" + name + "/", ttl: secs, self: hex.EncodeToString(id[:])}, nil
}

func (bd *Board) workKey(k string) string { return bd.pre + "work/" + k }
func (bd *Board) holdKey(k string) string { return bd.pre + "hold/" + k }

// maxPostOps bounds the puts of one transaction of Post, under etcd's
// default --max-txn-ops (128).
const maxPostOps = 100

// Post puts items on the board (their Rev is ignored): a posted item
// stays until its holder finishes it (Done) at the revision it saw.
func (bd *Board) Post(ctx context.Context, items []coord.BoardItem) error {
	for len(items) > 0 {
		n := min(len(items), maxPostOps)
		ops := make([]clientv3.Op, 0, n)
		for _, it := range items[:n] {
			ops = append(ops, clientv3.OpPut(bd.workKey(it.Key), string(it.Value)))
		}
		if _, err := bd.b.c.Txn(ctx).Then(ops...).Commit(); err != nil {
			return bd.b.etcdErr(err, nil)
		}
		items = items[n:]
	}
	return nil
}

// Work returns the items whose key starts with prefix.
func (bd *Board) Work(ctx context.Context, prefix string) ([]coord.BoardItem, error) {
	resp, err := bd.b.c.Get(ctx, bd.workKey(prefix), clientv3.WithPrefix())
	if err != nil {
		return nil, bd.b.etcdErr(err, nil)
	}
	return bd.items(resp.Kvs), nil
}

// Done finishes it: the item goes unless it was posted again since it
// was read (at it.Rev), and reports whether it went.
func (bd *Board) Done(ctx context.Context, it coord.BoardItem) (bool, error) {
	k := bd.workKey(it.Key)
	resp, err := bd.b.c.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", it.Rev)).Then(clientv3.OpDelete(k)).Commit()
	if err != nil {
		return false, bd.b.etcdErr(err, nil)
	}
	return resp.Succeeded, nil
}

// session returns the process's session, opening a new one when the last
// one ended.
func (bd *Board) session() (*concurrency.Session, error) {
	bd.mu.Lock()
	defer bd.mu.Unlock()
	if bd.sess != nil {
		select {
		case <-bd.sess.Done():
			bd.sess = nil
		default:
			return bd.sess, nil
		}
	}
	// The session outlives the call that opened it: its keep-alives run
	// until Close, or until etcd is out of reach for longer than ttl.
	s, err := concurrency.NewSession(bd.b.c, concurrency.WithTTL(bd.ttl), concurrency.WithContext(context.Background()))
	if err != nil {
		return nil, bd.b.etcdErr(err, nil)
	}
	bd.sess = s
	return s, nil
}

// TryHold takes name for this process if no process holds it, and
// reports whether it did. It never waits for a holder.
func (bd *Board) TryHold(ctx context.Context, name string) (coord.Hold, bool, error) {
	h, _, ok, err := bd.tryHold(ctx, name, nil)
	return h, ok, err
}

// TryHoldWork is TryHold that also returns, read in the same
// transaction, the items whose key starts with prefix: what the new
// holder has to do, in one request.
func (bd *Board) TryHoldWork(ctx context.Context, name, prefix string) (coord.Hold, []coord.BoardItem, bool, error) {
	return bd.tryHold(ctx, name, &prefix)
}

func (bd *Board) tryHold(ctx context.Context, name string, prefix *string) (coord.Hold, []coord.BoardItem, bool, error) {
	s, err := bd.session()
	if err != nil {
		return nil, nil, false, err
	}
	k := bd.holdKey(name)
	then := []clientv3.Op{clientv3.OpPut(k, bd.self, clientv3.WithLease(s.Lease()))}
	if prefix != nil {
		then = append(then, clientv3.OpGet(bd.workKey(*prefix), clientv3.WithPrefix()))
	}
	resp, err := bd.b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).Then(then...).Commit()
	if err != nil {
		return nil, nil, false, bd.b.etcdErr(err, nil)
	}
	if !resp.Succeeded {
		return nil, nil, false, nil
	}
	var items []coord.BoardItem
	if prefix != nil {
		items = bd.items(resp.Responses[1].GetResponseRange().Kvs)
	}
	h := &hold{bd: bd, key: k, fence: resp.Header.Revision, sess: s, released: make(chan struct{}), lost: make(chan struct{})}
	go func() {
		select {
		case <-s.Done():
		case <-h.released:
		}
		close(h.lost)
	}()
	return h, items, true, nil
}

func (bd *Board) items(kvs []*mvccpb.KeyValue) []coord.BoardItem {
	out := make([]coord.BoardItem, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, coord.BoardItem{Key: strings.TrimPrefix(string(kv.Key), bd.pre+"work/"), Value: kv.Value, Rev: kv.ModRevision})
	}
	return out
}

// ReleaseWork releases h (one of this board's holds) and returns, read
// in the same transaction, the items whose key starts with prefix: work
// posted while the name was held, which a process that found it held
// left to the holder.
func (bd *Board) ReleaseWork(ctx context.Context, h coord.Hold, prefix string) ([]coord.BoardItem, error) {
	hh, ok := h.(*hold)
	if !ok || hh.bd != bd {
		return nil, fmt.Errorf("%w: a hold of another board", coord.ErrInvalidArgument)
	}
	hh.once.Do(func() { close(hh.released) })
	get := clientv3.OpGet(bd.workKey(prefix), clientv3.WithPrefix())
	resp, err := bd.b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(hh.key), "=", hh.fence)).
		Then(clientv3.OpDelete(hh.key), get).Else(get).Commit()
	if err != nil {
		return nil, bd.b.etcdErr(err, nil)
	}
	r := resp.Responses[len(resp.Responses)-1].GetResponseRange()
	return bd.items(r.Kvs), nil
}

type hold struct {
	bd       *Board
	key      string
	fence    int64
	sess     *concurrency.Session
	once     sync.Once
	released chan struct{}
	lost     chan struct{}
}

func (h *hold) Fence() int64          { return h.fence }
func (h *hold) Lost() <-chan struct{} { return h.lost }

// Release deletes the hold if it is still this one.
func (h *hold) Release(ctx context.Context) error {
	h.once.Do(func() { close(h.released) })
	_, err := h.bd.b.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.fence)).Then(clientv3.OpDelete(h.key)).Commit()
	if err != nil {
		return h.bd.b.etcdErr(err, nil)
	}
	return nil
}

// Close ends the process's session: every hold it has goes at once, so
// others need not wait for them to run out.
func (bd *Board) Close() error {
	bd.mu.Lock()
	s := bd.sess
	bd.sess = nil
	bd.mu.Unlock()
	if s == nil {
		return nil
	}
	return s.Close()
}

// Watch reports the board's changes to fn until ctx ends: a snapshot
// first, and again whenever the watch had to be re-established (etcd out
// of reach), then each item posted or finished and each hold taken or
// released. fn runs on the watching goroutine, one event at a time.
func (bd *Board) Watch(ctx context.Context, fn func(coord.BoardEvent)) error {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := bd.snapshot(ctx, fn)
		if err == nil {
			wait = 100 * time.Millisecond
			wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
			for resp := range bd.b.c.Watch(wctx, bd.pre, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
				if resp.Err() != nil {
					break
				}
				for _, ev := range resp.Events {
					bd.report(ev, fn)
				}
			}
			cancel()
		}
		if ctx.Err() != nil {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, 30*time.Second)
	}
	return ctx.Err()
}

func (bd *Board) snapshot(ctx context.Context, fn func(coord.BoardEvent)) (int64, error) {
	resp, err := bd.b.c.Get(ctx, bd.pre, clientv3.WithPrefix())
	if err != nil {
		return 0, bd.b.etcdErr(err, nil)
	}
	ev := coord.BoardEvent{Kind: coord.BoardSnapshot}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		if w, ok := strings.CutPrefix(k, bd.pre+"work/"); ok {
			ev.Items = append(ev.Items, coord.BoardItem{Key: w, Value: kv.Value, Rev: kv.ModRevision})
		} else if h, ok := strings.CutPrefix(k, bd.pre+"hold/"); ok {
			ev.Held = append(ev.Held, h)
		}
	}
	fn(ev)
	return resp.Header.Revision, nil
}

func (bd *Board) report(ev *clientv3.Event, fn func(coord.BoardEvent)) {
	k := string(ev.Kv.Key)
	del := ev.Type == clientv3.EventTypeDelete
	if w, ok := strings.CutPrefix(k, bd.pre+"work/"); ok {
		if del {
			fn(coord.BoardEvent{Kind: coord.BoardDone, Key: w})
		} else {
			fn(coord.BoardEvent{Kind: coord.BoardPosted, Key: w, Value: ev.Kv.Value})
		}
		return
	}
	if h, ok := strings.CutPrefix(k, bd.pre+"hold/"); ok {
		if del {
			fn(coord.BoardEvent{Kind: coord.BoardReleased, Key: h})
		} else {
			fn(coord.BoardEvent{Kind: coord.BoardHeld, Key: h})
		}
	}
}
