package gitsvc

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// serveGit materializes the repository and runs git against it through
// run, which writes the response to out. When git fails, it may be the
// cache's fault (a pack damaged on disk): the repository is marked for
// verification, and when nothing has reached the client yet and
// verification did rebuild it, run goes once more. A failure after the
// response started can only be logged; the next request then finds the
// repository verified and healed (docs/adr/0016-cache-self-healing.md).
func (s *Service) serveGit(parent context.Context, req Request, what string, flush bool,
	run func(context.Context, *LocalCopy, io.Writer) error) error {
	// A write that fails (the client is gone or too slow) cancels git at
	// once instead of leaving it to notice a broken pipe.
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	co, err := s.opts.Repos.Materialize(ctx, req.Repo, req.DefaultBranch)
	if err != nil {
		return materializeError(err)
	}
	for attempt := 0; ; attempt++ {
		out := &lazyWriter{w: req.Out, onError: cancel, hold: holdBack, flush: flush}
		err := run(ctx, co, out)
		if err == nil {
			if err := out.finish(); err != nil {
				s.logger.Info("git response not delivered", "repo", req.Repo, "what", what, "err", err)
				return &Error{Kind: Broken, Msg: "response not delivered", Err: err}
			}
			return nil
		}
		started, werr := out.abort()
		if werr != nil {
			// The client stopped reading or went away.
			s.logger.Info("git response not delivered", "repo", req.Repo, "what", what, "err", werr)
			return &Error{Kind: Broken, Msg: "response not delivered", Err: werr}
		}
		if ctx.Err() != nil || !s.opts.Repos.Suspect(req.Repo) || started || attempt > 0 {
			return s.streamError(parent, req, started, what, err)
		}
		healed, herr := s.opts.Repos.Materialize(ctx, req.Repo, req.DefaultBranch)
		if herr != nil || !healed.Healed {
			return s.streamError(parent, req, started, what, err)
		}
		s.logger.Warn("git failed on a damaged cache; rebuilt it and retrying", "repo", req.Repo, "what", what, "err", err)
		s.opts.Metrics.healRetry()
		co = healed
	}
}

// streamError reports a git process failure: as an Internal error when
// nothing was sent yet, otherwise only in the log (the client sees a
// broken stream, which git reports as such).
func (s *Service) streamError(parent context.Context, req Request, started bool, what string, err error) error {
	if parent.Err() != nil {
		s.logger.Info("git request canceled by the client", "repo", req.Repo, "what", what)
		return &Error{Kind: Canceled, Msg: "canceled", Err: parent.Err()}
	}
	if !started {
		return &Error{Kind: Internal, Msg: "internal error: " + what + " failed", Err: err}
	}
	s.logger.Error("git stream failed", "repo", req.Repo, "what", what, "err", err)
	return &Error{Kind: Broken, Msg: what + " failed", Err: err}
}

// lockedWriter serializes writes from git's output and from the want
// filter's error packet.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// flushWriter flushes w after each write when w can be flushed.
type flushWriter struct{ w io.Writer }

func (f *flushWriter) Write(b []byte) (int, error) {
	n, err := f.w.Write(b)
	if err == nil {
		err = flush(f.w)
	}
	return n, err
}

func flush(w io.Writer) error {
	if f, ok := w.(interface{ Flush() error }); ok {
		return f.Flush()
	}
	return nil
}

// holdBack is how much of git's output, and for how long, is held
// before the response starts: while nothing has been sent a failure can
// still be answered in the transport's terms, and retried after healing the
// cache. Small responses thus go out whole; large ones start at most
// holdBackTime late, soon enough for progress and keep-alives.
const (
	holdBack     = 64 << 10
	holdBackTime = 3 * time.Second
)

// lazyWriter defers the response while git's output is small and young
// (holdBack), so that a git process that fails early can still be
// answered in the transport's terms, or retried. Writes come from the goroutine
// copying git's stdout and from a timer, hence the mutex.
type lazyWriter struct {
	w       io.Writer
	flush   bool
	hold    int
	onError func()

	mu      sync.Mutex
	held    []byte
	timer   *time.Timer
	started bool
	aborted bool
	err     error
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return 0, l.err
	}
	if l.aborted {
		return 0, errAborted
	}
	if !l.started {
		l.held = append(l.held, b...)
		if len(l.held) <= l.hold {
			if l.timer == nil {
				l.timer = time.AfterFunc(holdBackTime, l.timeout)
			}
			return len(b), nil
		}
		if err := l.startLocked(); err != nil {
			return 0, err
		}
		return len(b), nil
	}
	if err := l.writeLocked(b); err != nil {
		return 0, err
	}
	return len(b), nil
}

var errAborted = errors.New("response abandoned")

func (l *lazyWriter) timeout() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.started && !l.aborted && l.err == nil {
		l.startLocked()
	}
}

// startLocked sends what was held.
func (l *lazyWriter) startLocked() error {
	l.started = true
	if l.timer != nil {
		l.timer.Stop()
	}
	b := l.held
	l.held = nil
	if len(b) == 0 {
		return nil
	}
	return l.writeLocked(b)
}

func (l *lazyWriter) writeLocked(b []byte) error {
	_, err := l.w.Write(b)
	if err == nil && l.flush {
		err = flush(l.w)
	}
	if err != nil {
		l.err = err
		if l.onError != nil {
			l.onError()
		}
	}
	return err
}

// finish sends what is still held once git succeeded.
func (l *lazyWriter) finish() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if !l.started {
		return l.startLocked()
	}
	return nil
}

// abort drops what is held after git failed and reports whether any of
// the response had been sent, and the error that writing it met, if any.
func (l *lazyWriter) abort() (started bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.timer != nil {
		l.timer.Stop()
	}
	l.aborted, l.held = true, nil
	return l.started, l.err
}

// bufferWriter is a minimal byte buffer for small protocol messages.
type bufferWriter struct{ b []byte }

func (b *bufferWriter) Write(p []byte) (int, error) {
	b.b = append(b.b, p...)
	return len(p), nil
}

func (b *bufferWriter) Bytes() []byte { return b.b }
