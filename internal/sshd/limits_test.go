package sshd

import (
	"bufio"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/crypto/ssh"
)

func (f *fixture) hits(limit string) float64 {
	var m dto.Metric
	if err := f.metrics.hits.WithLabelValues(limit).Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// waitUnauthenticated waits until the server counts n connections as
// unauthenticated: a client's handshake returns a moment before the
// server has counted its connection out.
func (f *fixture) waitUnauthenticated(t *testing.T, n float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var m dto.Metric
		if err := f.metrics.conns.WithLabelValues("unauthenticated").Write(&m); err != nil {
			t.Fatal(err)
		}
		if m.GetGauge().GetValue() == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v unauthenticated connections, want %v", m.GetGauge().GetValue(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSessionFloodIsBounded replays issue 19's reproduction: one
// connection opens many session channels, sends no exec and fills each
// channel's 2 MiB window. Only MaxSessions of them open (the rest are
// refused with ResourceShortage), so the server's heap grows by a few
// windows, not by one per channel asked for.
func TestSessionFloodIsBounded(t *testing.T) {
	f := newFixture(t, Options{ExecTimeout: time.Minute})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	window := make([]byte, 2<<20)
	opened, refused := 0, 0
	for range 40 {
		ch, reqs, err := c.OpenChannel("session", nil)
		var oce *ssh.OpenChannelError
		if errors.As(err, &oce) && oce.Reason == ssh.ResourceShortage {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		go ssh.DiscardRequests(reqs)
		defer ch.Close()
		if _, err := ch.Write(window); err != nil {
			t.Fatal(err)
		}
		opened++
	}
	if opened != DefaultMaxSessions || refused != 40-DefaultMaxSessions {
		t.Fatalf("opened %d sessions, %d refused; want %d and %d", opened, refused, DefaultMaxSessions, 40-DefaultMaxSessions)
	}
	// The client's writes return once the data is on the wire; give the
	// server a moment to take it in before measuring.
	time.Sleep(200 * time.Millisecond)
	grown := int64(heap()) - int64(before)
	t.Logf("server heap grew by %.1f MiB for %d full windows", float64(grown)/(1<<20), opened)
	if limit := int64(48 << 20); grown > limit {
		t.Fatalf("heap grew by %d bytes, more than %d", grown, limit)
	}
	if got := f.hits(limitSessions); got != float64(refused) {
		t.Errorf("ghost_ssh_limit_hits_total{limit=sessions} = %v, want %d", got, refused)
	}
}

// TestMaxSessionsCountsOpenChannels: the cap is on channels open at once,
// as OpenSSH's MaxSessions; a closed one frees its place.
func TestMaxSessionsCountsOpenChannels(t *testing.T) {
	f := newFixture(t, Options{MaxSessions: 2, ExecTimeout: time.Minute})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	a, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := c.NewSession(); err == nil || !strings.Contains(err.Error(), "too many sessions") {
		t.Fatalf("third session: %v, want refused", err)
	}
	a.Close()
	// The server counts the channel out once it has seen the close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := c.NewSession()
		if err == nil {
			r := runCmdOn(t, s, "git-upload-pack '/alice/x.git'")
			if r.exit != 0 {
				t.Fatalf("a command on the freed session: %+v", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no session after closing one: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runCmdOn runs cmd on an open session with empty stdin.
func runCmdOn(t *testing.T, sess *ssh.Session, cmd string) result {
	t.Helper()
	defer sess.Close()
	var out, errb strings.Builder
	sess.Stdout, sess.Stderr = &out, &errb
	err := sess.Run(cmd)
	r := result{stdout: out.String(), stderr: errb.String()}
	var exitErr *ssh.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		r.exit = exitErr.ExitStatus()
	default:
		t.Fatalf("session %q: %v", cmd, err)
	}
	return r
}

// TestExecTimeout: a session channel that asks for no command is closed
// after ExecTimeout; one that asks in time runs.
func TestExecTimeout(t *testing.T) {
	f := newFixture(t, Options{ExecTimeout: 300 * time.Millisecond})
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go ssh.DiscardRequests(reqs)
	done := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, ch); done <- err }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a session that ran nothing was still open after 10 s")
	}
	if ok, _ := ch.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{"git-upload-pack '/alice/x.git'"})); ok {
		t.Fatal("an exec on the closed channel was accepted")
	}
	if got := f.hits(limitExecTimeout); got != 1 {
		t.Errorf("ghost_ssh_limit_hits_total{limit=exec_timeout} = %v, want 1", got)
	}
	if r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, ""); r.exit != 0 {
		t.Fatalf("a prompt command on the same connection: %+v", r)
	}
	if n := len(f.git.requests()); n != 1 {
		t.Fatalf("the git service ran %d times, want once", n)
	}
}

// rawConn opens a TCP connection that never starts the handshake and
// reports whether the server took it: it sends its version line to
// connections it keeps, and closes the others at once.
func rawConn(t *testing.T, addr string) (net.Conn, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err == nil && strings.HasPrefix(line, "SSH-2.0-ghost") {
		return c, true
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the server neither greeted nor closed a new connection")
	}
	return c, false
}

// TestUnauthenticatedPerSource: beyond MaxUnauthenticatedPerSource
// connections from one address that have not authenticated, the next is
// closed at once; authenticated connections do not count, and a closed
// one frees its place.
func TestUnauthenticatedPerSource(t *testing.T) {
	f := newFixture(t, Options{MaxUnauthenticatedPerSource: 3, MaxUnauthenticated: -1})
	// Authenticated connections from the same address do not count.
	f.mustDial(t, ssh.PublicKeys(f.alice))
	f.mustDial(t, ssh.PublicKeys(f.bob))
	f.waitUnauthenticated(t, 0)
	var held []net.Conn
	for range 3 {
		c, ok := rawConn(t, f.addr)
		if !ok {
			t.Fatal("a connection under the cap was closed")
		}
		held = append(held, c)
	}
	if _, ok := rawConn(t, f.addr); ok {
		t.Fatal("a fourth unauthenticated connection from one address was kept")
	}
	if _, err := f.dial(ssh.PublicKeys(f.alice)); err == nil {
		t.Fatal("a client got in while its address held the cap")
	}
	if got := f.hits(limitUnauthenticatedPerSource); got != 2 {
		t.Errorf("ghost_ssh_limit_hits_total{limit=unauthenticated_per_source} = %v, want 2", got)
	}
	held[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := f.dial(ssh.PublicKeys(f.alice))
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection after one was freed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUnauthenticatedTotal: the cap on all unauthenticated connections.
func TestUnauthenticatedTotal(t *testing.T) {
	f := newFixture(t, Options{MaxUnauthenticated: 2, MaxUnauthenticatedPerSource: -1})
	for range 2 {
		if _, ok := rawConn(t, f.addr); !ok {
			t.Fatal("a connection under the cap was closed")
		}
	}
	if _, ok := rawConn(t, f.addr); ok {
		t.Fatal("a third unauthenticated connection was kept")
	}
	if got := f.hits(limitUnauthenticated); got != 1 {
		t.Errorf("ghost_ssh_limit_hits_total{limit=unauthenticated} = %v, want 1", got)
	}
}

// TestHandshakeTimeoutIsCounted: a connection that never authenticates
// is closed after HandshakeTimeout, frees its place, and is counted.
func TestHandshakeTimeoutIsCounted(t *testing.T) {
	f := newFixture(t, Options{HandshakeTimeout: 200 * time.Millisecond, MaxUnauthenticated: 1})
	c, ok := rawConn(t, f.addr)
	if !ok {
		t.Fatal("the first connection was closed")
	}
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the server kept a silent connection: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.hits(limitHandshakeTimeout) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the handshake timeout was not counted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := rawConn(t, f.addr); !ok {
		t.Fatal("the place of a timed-out connection was not freed")
	}
}

// TestConnsPerPrincipal: one tenant holds at most MaxConnsPerPrincipal
// authenticated connections; others are not affected, and a closed one
// frees its place. Anonymous callers are counted by address.
func TestConnsPerPrincipal(t *testing.T) {
	f := newFixture(t, Options{MaxConnsPerPrincipal: 2, AnonymousRead: true})
	var alice []*ssh.Client
	for range 2 {
		alice = append(alice, f.mustDial(t, ssh.PublicKeys(f.alice)))
	}
	for _, c := range alice {
		if r := runCmd(t, c, "git-upload-pack '/alice/x.git'", nil, ""); r.exit != 0 {
			t.Fatalf("a connection under the cap: %+v", r)
		}
	}
	third := f.mustDial(t, ssh.PublicKeys(f.alice)) // authenticates, then is closed
	waitClosed(t, third, 10*time.Second)
	if got := f.hits(limitConnsPerPrincipal); got != 1 {
		t.Errorf("ghost_ssh_limit_hits_total{limit=connections_per_principal} = %v, want 1", got)
	}
	if r := runCmd(t, f.mustDial(t, ssh.PublicKeys(f.bob)), "git-upload-pack '/alice/x.git'", nil, ""); r.exit != 0 {
		t.Fatalf("bob, while alice holds her cap: %+v", r)
	}
	anon := ssh.KeyboardInteractive(func(string, string, []string, []bool) ([]string, error) { return nil, nil })
	var anons []*ssh.Client // held: a dropped client's socket may be closed by its finalizer
	for range 2 {
		anons = append(anons, f.mustDial(t, anon))
	}
	waitClosed(t, f.mustDial(t, anon), 10*time.Second)
	for _, c := range anons {
		c.Close()
	}
	alice[0].Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := f.mustDial(t, ssh.PublicKeys(f.alice))
		if s, err := c.NewSession(); err == nil {
			if r := runCmdOn(t, s, "git-upload-pack '/alice/x.git'"); r.exit != 0 {
				t.Fatalf("alice after freeing a place: %+v", r)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("alice could not connect after closing one of her connections")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func counterValue(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	var m dto.Metric
	if err := (<-ch).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestAuthFailuresAndSessionsCounted: an unknown key, a connection that
// never authenticates and the sessions opened are counted (issue 21 §4).
func TestAuthFailuresAndSessionsCounted(t *testing.T) {
	f := newFixture(t, Options{})
	if _, err := f.dial(ssh.PublicKeys(f.stranger)); err == nil {
		t.Fatal("an unknown key got in")
	}
	if got := counterValue(t, f.metrics.authFails.WithLabelValues(authUnknownKey)); got != 1 {
		t.Errorf("unknown_key = %v, want 1", got)
	}
	// The server counts the failed handshake a moment after the client
	// has given up.
	for deadline := time.Now().Add(10 * time.Second); counterValue(t, f.metrics.authFails.WithLabelValues(authHandshake)) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the refused connection's handshake was not counted")
		}
	}
	c := f.mustDial(t, ssh.PublicKeys(f.alice))
	for range 2 {
		runCmd(t, c, "", nil, "")
	}
	if got := counterValue(t, f.metrics.sessionsDone); got != 2 {
		t.Errorf("sessions = %v, want 2", got)
	}
}
