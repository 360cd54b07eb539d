package gitsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// Defaults of the resource limits (docs/adr/0015-git-resource-limits.md).
const (
	// DefaultMaxPushBytes is the largest push accepted, counted after gzip
	// decoding: 2 GiB, the limit public git hosts apply per push. Packs
	// that large are a repository to import, not a change to push.
	DefaultMaxPushBytes = 2 << 30
	// DefaultMaxFetchRequestBytes bounds a fetch's negotiation request
	// (wants, haves, shallow lines): 64 MiB is over a million "have"
	// lines, far beyond what git sends in one stateless round.
	DefaultMaxFetchRequestBytes = 64 << 20
	// DefaultGitQueueTimeout is how long a request waits for a git slot.
	DefaultGitQueueTimeout = 30 * time.Second
	// DefaultPushTimeout bounds validating and committing a push.
	DefaultPushTimeout = 15 * time.Minute
	// DefaultFetchRequestTimeout bounds receiving a whole fetch request.
	DefaultFetchRequestTimeout = time.Minute
	// DefaultIOTimeout is how long a connection may go without moving a
	// byte in either direction while a git request is being served.
	DefaultIOTimeout = time.Minute
)

// DefaultMaxGitProcesses is the default cap on concurrent git requests
// of a node: four per CPU (git is as often waiting on the network or the
// disk as it is computing), and at least eight.
func DefaultMaxGitProcesses() int { return max(8, 4*runtime.NumCPU()) }

// Limits are a node's defences on the git path against clients that send
// too much, too slowly or too often (docs/adr/0015-git-resource-limits.md),
// declared once for the service, both transports, the server and its
// flags. In Go, zero has one meaning for every field: take the default
// (DefaultLimits); a negative value switches that limit off. (The flags
// say "0 for no limit" as operators expect; config turns a flag's 0 into
// a negative value.)
type Limits struct {
	// MaxPushBytes bounds a push's request, counted after gzip decoding.
	// A push over the limit is refused in report-status, so git shows why.
	MaxPushBytes int64
	// MaxFetchRequestBytes bounds an upload-pack request.
	MaxFetchRequestBytes int64
	// MaxGitProcesses caps the git requests this node serves at once;
	// GitQueue more may wait for a slot (default 4×MaxGitProcesses), each
	// at most GitQueueTimeout (off: as long as it takes).
	MaxGitProcesses int
	GitQueue        int
	GitQueueTimeout time.Duration
	// PushTimeout bounds validating and committing a push once its body
	// has arrived. That phase does not stop when the client goes away, so
	// a push either lands whole or not at all.
	PushTimeout time.Duration
	// FetchRequestTimeout bounds receiving one whole upload-pack request
	// body over HTTP, and IOTimeout how long a git connection, HTTP or
	// SSH, may move no byte (it extends while bytes flow).
	FetchRequestTimeout time.Duration
	IOTimeout           time.Duration
}

// DefaultLimits returns the limits a zero Limits stands for.
func DefaultLimits() Limits { return Limits{}.WithDefaults() }

// WithDefaults returns l with every zero field set to its default;
// negative fields (limits switched off) stay.
func (l Limits) WithDefaults() Limits {
	l.MaxPushBytes = OrDefault(l.MaxPushBytes, DefaultMaxPushBytes)
	l.MaxFetchRequestBytes = OrDefault(l.MaxFetchRequestBytes, DefaultMaxFetchRequestBytes)
	l.MaxGitProcesses = OrDefault(l.MaxGitProcesses, DefaultMaxGitProcesses())
	l.GitQueue = OrDefault(l.GitQueue, 4*max(l.MaxGitProcesses, 0))
	l.GitQueueTimeout = OrDefault(l.GitQueueTimeout, DefaultGitQueueTimeout)
	l.PushTimeout = OrDefault(l.PushTimeout, DefaultPushTimeout)
	l.FetchRequestTimeout = OrDefault(l.FetchRequestTimeout, DefaultFetchRequestTimeout)
	l.IOTimeout = OrDefault(l.IOTimeout, DefaultIOTimeout)
	return l
}

// errBusy is a request that found the git slots and their queue full, or
// waited too long for a slot.
var errBusy = errors.New("too many git requests in progress")

// gate caps the git work of a node: at most cap(slots) requests run git
// at once, at most cap(queue) more wait, each for at most wait.
type gate struct {
	slots   chan struct{}
	queue   chan struct{}
	wait    time.Duration
	metrics *Metrics
}

func newGate(slots, queue int, wait time.Duration, m *Metrics) *gate {
	if slots <= 0 {
		return nil
	}
	return &gate{slots: make(chan struct{}, slots), queue: make(chan struct{}, max(queue, 0)), wait: wait, metrics: m}
}

// acquire takes a slot, waiting in the queue if there is room there. It
// returns errBusy when there is none, or when the wait runs out. A nil
// gate admits everything.
func (g *gate) acquire(ctx context.Context) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	release = func() { <-g.slots }
	select {
	case g.slots <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case g.queue <- struct{}{}:
	default:
		return nil, errBusy
	}
	g.metrics.queued(1)
	defer func() {
		<-g.queue
		g.metrics.queued(-1)
	}()
	var timeout <-chan time.Time // nil: wait as long as it takes
	if g.wait > 0 {
		t := time.NewTimer(g.wait)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case g.slots <- struct{}{}:
		return release, nil
	case <-timeout:
		return nil, errBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// admit takes a git slot for the request, or returns a Busy *Error
// (or Canceled when ctx ends while waiting). From the moment it asks for
// the slot until release, the request counts as served for background
// work (Options.Serving).
func (s *Service) admit(ctx context.Context, repo string) (release func(), err error) {
	served := func() {}
	if s.opts.Serving != nil {
		served = s.opts.Serving.Serving()
	}
	slot, err := s.gate.acquire(ctx)
	switch {
	case err == nil:
		return func() { slot(); served() }, nil
	case errors.Is(err, errBusy):
		served()
		s.opts.Metrics.rejectedBusy()
		s.logger.Warn("git request refused: server busy", "repo", repo)
		return nil, &Error{Kind: Busy, Msg: "the server is busy (too many git requests in progress); retry shortly",
			Err: err, RetryAfter: retryAfter(s.opts.GitQueueTimeout)}
	default: // the client went away while waiting
		served()
		return nil, &Error{Kind: Canceled, Msg: "canceled", Err: err}
	}
}

// retryAfter suggests when to come back: a fraction of the queue's wait,
// at least a second.
func retryAfter(d time.Duration) int { return max(1, int(d/time.Second/4)) }

// ErrTooLarge marks a request over a limit.
var ErrTooLarge = errors.New("request too large")

// fetchRequest is an upload-pack request read whole before git starts: a
// client that trickles its request in holds no git process, and the
// request can be replayed when the first attempt failed because of the
// cache (docs/adr/0016-cache-self-healing.md). Small requests stay in
// memory; larger ones go to a file in the cache's scratch directory.
type fetchRequest struct {
	mem  []byte
	file *os.File
	size int64
}

// fetchMemMax is how much of a fetch request is held in memory.
const fetchMemMax = 256 << 10

// readFetchRequest reads body (decoded) whole, at most limit bytes
// (limit <= 0: no limit).
func readFetchRequest(body io.Reader, limit int64, scratch func() (string, error)) (*fetchRequest, error) {
	src := body
	if limit > 0 {
		src = io.LimitReader(body, limit+1)
	}
	var buf bytes.Buffer
	n, err := io.CopyN(&buf, src, fetchMemMax+1)
	if err != nil && err != io.EOF {
		return nil, err
	}
	fr := &fetchRequest{mem: buf.Bytes(), size: n}
	if n > fetchMemMax {
		dir, err := scratch()
		if err != nil {
			return nil, err
		}
		f, err := os.CreateTemp(dir, "fetch-*.req")
		if err != nil {
			return nil, fmt.Errorf("spool fetch request: %w", err)
		}
		fr.file, fr.mem = f, nil
		if _, err := f.Write(buf.Bytes()); err != nil {
			fr.Close()
			return nil, fmt.Errorf("spool fetch request: %w", err)
		}
		m, err := io.Copy(f, src)
		fr.size += m
		if err != nil {
			fr.Close()
			return nil, err
		}
	}
	if limit > 0 && fr.size > limit {
		fr.Close()
		return nil, fmt.Errorf("%w: a fetch request may be at most %d bytes", ErrTooLarge, limit)
	}
	return fr, nil
}

// Reader returns the request from its first byte.
func (f *fetchRequest) Reader() io.Reader {
	if f.file != nil {
		return io.NewSectionReader(f.file, 0, f.size)
	}
	return bytes.NewReader(f.mem)
}

// Close removes the spool file, if any.
func (f *fetchRequest) Close() {
	if f.file != nil {
		f.file.Close()
		os.Remove(f.file.Name())
	}
}
