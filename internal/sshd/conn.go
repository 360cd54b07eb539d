package sshd

import (
	"io"
	"net"
	"sync"
	"time"
)

// connState is what a connection knows about itself for the idle deadline
// and for draining at shutdown: how many commands it runs and whether a
// command is waiting on the client.
//
// The idle deadline follows the HTTP transport's (docs/adr/0015): the
// clock runs only while the server waits on the client, that is while a
// session read or write is in progress, or while the connection runs no
// command at all. A byte moved in either direction restarts it. Time the
// server spends thinking (materializing, indexing a pushed pack,
// committing) with no read or write in progress never counts. The SSH
// layer's own traffic (keepalives, window adjustments) does not count
// either, so a client cannot hold a connection open with it.
type connState struct {
	c    net.Conn
	idle time.Duration // <= 0: no idle deadline

	mu       sync.Mutex
	commands int       // commands running
	pending  int       // session reads and writes in progress
	since    time.Time // the last byte moved, or the start of the current wait
	draining bool      // the server is shutting down
	closed   bool
	timer    *time.Timer
}

func newConnState(c net.Conn, idle time.Duration) *connState {
	st := &connState{c: c, idle: idle, since: time.Now()}
	if idle > 0 {
		st.mu.Lock() // check may run before the assignment is done
		st.timer = time.AfterFunc(idle, st.check)
		st.mu.Unlock()
	}
	return st
}

// check closes the connection when it has been idle for the deadline,
// and otherwise looks again when it next could be.
func (st *connState) check() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return
	}
	next := st.idle
	if st.commands == 0 || st.pending > 0 {
		left := st.idle - time.Since(st.since)
		if left <= 0 {
			st.closeLocked()
			return
		}
		next = left
	}
	st.timer.Reset(next)
}

// stop ends the idle timer; the connection is being closed.
func (st *connState) stop() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	if st.timer != nil {
		st.timer.Stop()
	}
}

func (st *connState) closeLocked() {
	st.closed = true
	_ = st.c.Close()
}

// begin counts a command in; it reports false when the server is
// draining and starts no new commands.
func (st *connState) begin() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.draining {
		return false
	}
	st.commands++
	return true
}

// end counts a command out. A draining connection closes with its last
// command.
func (st *connState) end() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.commands--
	st.since = time.Now()
	if st.draining && st.commands == 0 && !st.closed {
		st.closeLocked()
	}
}

// drain starts the shutdown of the connection: closed now if it runs no
// command, else when its last command ends.
func (st *connState) drain() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.draining = true
	if st.commands == 0 && !st.closed {
		st.closeLocked()
	}
}

func (st *connState) ioStart() {
	st.mu.Lock()
	if st.pending == 0 {
		st.since = time.Now()
	}
	st.pending++
	st.mu.Unlock()
}

func (st *connState) ioEnd(n int) {
	st.mu.Lock()
	st.pending--
	if n > 0 {
		st.since = time.Now()
	}
	st.mu.Unlock()
}

// reader counts r's reads as waits on the client.
func (st *connState) reader(r io.Reader) io.Reader {
	if st.idle <= 0 {
		return r
	}
	return &idleReader{r: r, st: st}
}

// writer counts w's writes as waits on the client.
func (st *connState) writer(w io.Writer) io.Writer {
	if st.idle <= 0 {
		return w
	}
	return &idleWriter{w: w, st: st}
}

type idleReader struct {
	r  io.Reader
	st *connState
}

func (r *idleReader) Read(p []byte) (int, error) {
	r.st.ioStart()
	n, err := r.r.Read(p)
	r.st.ioEnd(n)
	return n, err
}

type idleWriter struct {
	w  io.Writer
	st *connState
}

func (w *idleWriter) Write(p []byte) (int, error) {
	w.st.ioStart()
	n, err := w.w.Write(p)
	w.st.ioEnd(n)
	return n, err
}
