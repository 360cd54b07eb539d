package hooks

import (
	"container/list"
	"sync"
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
