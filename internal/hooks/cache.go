package hooks

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// lru is a bounded map, oldest use evicted first. It is a cache of what
// the store holds (entry headers, built payloads): losing it costs a
// read, never an event.
type lru[V any] struct {
	mu  sync.Mutex
	max int
	ll  *list.List
	m   map[string]*list.Element
}

type lruEntry[V any] struct {
	k string
	v V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, ll: list.New(), m: make(map[string]*list.Element)}
}

func (c *lru[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		c.ll.MoveToFront(e)
		return e.Value.(*lruEntry[V]).v, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[k]; ok {
		e.Value.(*lruEntry[V]).v = v
		c.ll.MoveToFront(e)
		return
	}
	c.m[k] = c.ll.PushFront(&lruEntry[V]{k, v})
	for c.ll.Len() > c.max {
		e := c.ll.Back()
		c.ll.Remove(e)
		delete(c.m, e.Value.(*lruEntry[V]).k)
	}
}

// memo builds a value once per key among concurrent callers (a thousand
// hooks of one repository want the same push payload at once) and keeps
// it in an lru.
type memo struct {
	done *lru[[]byte]
	mu   sync.Mutex
	busy map[string]*flight
}

type flight struct {
	wg  sync.WaitGroup
	v   []byte
	err error
}

func newMemo(max int) *memo { return &memo{done: newLRU[[]byte](max), busy: make(map[string]*flight)} }

func (m *memo) do(k string, build func() ([]byte, error)) ([]byte, error) {
	if v, ok := m.done.get(k); ok {
		return v, nil
	}
	m.mu.Lock()
	if f, ok := m.busy[k]; ok {
		m.mu.Unlock()
		f.wg.Wait()
		return f.v, f.err
	}
	f := &flight{}
	f.wg.Add(1)
	m.busy[k] = f
	m.mu.Unlock()
	f.v, f.err = build()
	if f.err == nil {
		m.done.put(k, f.v)
	}
	m.mu.Lock()
	delete(m.busy, k)
	m.mu.Unlock()
	f.wg.Done()
	return f.v, f.err
}

// fresh keeps values read from the store for a short time, and has
// concurrent callers share one read: a bounded staleness for a bounded
// number of reads (the hook sets the dispatchers of one repository's
// hooks all read at once).
type fresh[V any] struct {
	ttl  time.Duration
	mu   sync.Mutex
	done *lru[freshEntry[V]]
	busy map[string]*freshFlight[V]
}

type freshEntry[V any] struct {
	v  V
	at time.Time
}

type freshFlight[V any] struct {
	wg  sync.WaitGroup
	v   V
	err error
}

func newFresh[V any](ttl time.Duration, max int) *fresh[V] {
	return &fresh[V]{ttl: ttl, done: newLRU[freshEntry[V]](max), busy: make(map[string]*freshFlight[V])}
}

func (f *fresh[V]) get(ctx context.Context, k string, read func(context.Context) (V, error)) (V, error) {
	if e, ok := f.done.get(k); ok && time.Since(e.at) < f.ttl {
		return e.v, nil
	}
	f.mu.Lock()
	if fl, ok := f.busy[k]; ok {
		f.mu.Unlock()
		fl.wg.Wait()
		return fl.v, fl.err
	}
	fl := &freshFlight[V]{}
	fl.wg.Add(1)
	f.busy[k] = fl
	f.mu.Unlock()
	at := time.Now()
	fl.v, fl.err = read(ctx)
	if fl.err == nil {
		f.done.put(k, freshEntry[V]{fl.v, at})
	}
	f.mu.Lock()
	delete(f.busy, k)
	f.mu.Unlock()
	fl.wg.Done()
	return fl.v, fl.err
}

// forget drops k, so the next get reads it.
func (f *fresh[V]) forget(k string) { f.done.put(k, freshEntry[V]{}) }
