// Package sshd serves git over SSH, the second transport next to smart
// HTTP (docs/design.md §6.6, §7.7; issue 14).
//
// The server does three things and no more: it proves the client holds a
// key and maps the key to a tenant (meta.Store.AuthenticateKey), it parses
// the git command the client asks to run (ParseCommand), and it connects
// the session's streams to a GitService. It makes no authorization
// decision of its own: whether the principal may read or push the named
// repository is decided inside the GitService by the same code that
// decides it for HTTP, so the two transports cannot drift apart. It is
// built directly on golang.org/x/crypto/ssh; docs/adr/0060-ssh-server.md
// says why, and why anonymous access rides on keyboard-interactive
// authentication rather than on unknown keys.
//
// The host key is shared by every node through the object store
// (HostKey).
package sshd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/ghost-scm/ghost/internal/meta"
)

// GitService runs git's server side of one command over any transport.
// Implementations check authorization themselves (CanRead, CanWrite, as
// HTTP does) and report refusals as errors wrapping meta's errors:
// ErrNotFound for a repository the principal may not see or that does not
// exist, ErrForbidden for one it may read but not write, ErrUnauthenticated
// for an anonymous push, ErrUnavailable for a storage outage. A service
// that does not run a command returns an error wrapping
// errors.ErrUnsupported. Anything else is reported to the client as an
// internal error and logged.
type GitService interface {
	UploadPack(ctx context.Context, req Request) error
	ReceivePack(ctx context.Context, req Request) error
	UploadArchive(ctx context.Context, req Request) error
	// LFSAuthenticate answers Git LFS's git-lfs-authenticate: the JSON of
	// the Batch API's URL and a token for req.Operation on Stdout.
	LFSAuthenticate(ctx context.Context, req Request) error
	// LFSTransfer serves Git LFS's pure SSH transfer protocol for
	// req.Operation on the session's streams
	// (docs/adr/0125-lfs-transfer-over-ssh.md).
	LFSTransfer(ctx context.Context, req Request) error
}

// Request is one git command to run. Stdin is the client's stream and
// ends when the client closes its side; Stdout carries git's protocol;
// Stderr reaches the user's terminal (git prints it as "remote: ...").
type Request struct {
	Principal   *meta.Principal // nil: anonymous (Options.AnonymousRead)
	Owner       string
	Repo        string // without ".git"
	Stdin       io.Reader
	Stdout      io.Writer
	Stderr      io.Writer
	GitProtocol string // the client's GIT_PROTOCOL, when well formed; "" otherwise
	Operation   string // git-lfs-authenticate's and git-lfs-transfer's: "download" or "upload"
}

// KeyAuthenticator maps a public key the client has proven it holds to
// its tenant. *meta.Store implements it.
type KeyAuthenticator interface {
	AuthenticateKey(ctx context.Context, pub ssh.PublicKey) (meta.Principal, error)
}

// Options configures a Server.
type Options struct {
	HostKey ssh.Signer       // required; see HostKey
	Keys    KeyAuthenticator // required
	Git     GitService       // required
	// AnonymousRead lets clients without a registered key in, as the
	// anonymous principal (nil). What anonymous callers may do is the
	// GitService's decision: with ghost's rules, clone public
	// repositories and nothing else. Off by default.
	AnonymousRead bool
	// HandshakeTimeout bounds the SSH handshake and authentication, so
	// that connections that never finish it do not pile up. Zero means
	// DefaultHandshakeTimeout; negative, none.
	HandshakeTimeout time.Duration
	// MaxUnauthenticated bounds the connections that have not finished
	// authenticating, in all (MaxUnauthenticated) and per source address
	// (MaxUnauthenticatedPerSource); a connection beyond either is closed
	// as soon as it is accepted. Zero means DefaultMaxUnauthenticated and
	// DefaultMaxUnauthenticatedPerSource; negative, no cap.
	MaxUnauthenticated          int
	MaxUnauthenticatedPerSource int
	// MaxConnsPerPrincipal bounds the authenticated connections of one
	// tenant, or of one source address for anonymous callers; one beyond
	// is closed once authenticated. Zero means DefaultMaxConnsPerPrincipal;
	// negative, no cap.
	MaxConnsPerPrincipal int
	// MaxSessions bounds the session channels a connection has open at
	// once; more are refused with ResourceShortage. Zero means
	// DefaultMaxSessions; negative, no cap.
	MaxSessions int
	// ExecTimeout closes a session channel that has not asked for a
	// command (exec or shell) this long after it opened, and with it the
	// window of data the client may have sent into it. Zero means
	// DefaultExecTimeout; negative, none.
	ExecTimeout time.Duration
	// Metrics receives the transport's metrics; nil records nothing.
	Metrics *Metrics
	// AuthTimeout bounds one key lookup in the metadata store. Zero means
	// 10 seconds.
	AuthTimeout time.Duration
	// IdleTimeout closes a connection that moves no byte for this long
	// while the server waits on the client: while a command reads or
	// writes its session, or while the connection runs no command. Time
	// the server spends working between reads and writes does not count
	// (the HTTP transport's rule, docs/adr/0015-git-resource-limits.md).
	// Zero or negative: none.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long running commands may go on after
	// Serve's context ends; connections that run none are closed at
	// once. Zero stops everything at once.
	ShutdownTimeout time.Duration
	Logger          *slog.Logger // nil discards
}

// Server is an SSH server for git. It is safe for concurrent use; one
// Server may Serve several listeners, and its limits count the
// connections of all of them.
type Server struct {
	opts       Options
	log        *slog.Logger
	unauth     *counter // connections not yet authenticated, by source
	principals *counter // authenticated connections, by principal
}

// New checks opts and returns a Server.
func New(opts Options) (*Server, error) {
	if opts.HostKey == nil || opts.Keys == nil || opts.Git == nil {
		return nil, errors.New("sshd: HostKey, Keys and Git are required")
	}
	opts.HandshakeTimeout = orDefault(opts.HandshakeTimeout, DefaultHandshakeTimeout)
	if opts.AuthTimeout <= 0 {
		opts.AuthTimeout = 10 * time.Second
	}
	opts.MaxUnauthenticated = orDefault(opts.MaxUnauthenticated, DefaultMaxUnauthenticated)
	opts.MaxUnauthenticatedPerSource = orDefault(opts.MaxUnauthenticatedPerSource, DefaultMaxUnauthenticatedPerSource)
	opts.MaxConnsPerPrincipal = orDefault(opts.MaxConnsPerPrincipal, DefaultMaxConnsPerPrincipal)
	opts.MaxSessions = orDefault(opts.MaxSessions, DefaultMaxSessions)
	opts.ExecTimeout = orDefault(opts.ExecTimeout, DefaultExecTimeout)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		opts: opts, log: log,
		unauth:     newCounter(opts.MaxUnauthenticated, opts.MaxUnauthenticatedPerSource),
		principals: newCounter(0, opts.MaxConnsPerPrincipal),
	}, nil
}

// orDefault is v, or def when v is zero; a negative v (no limit) stays.
func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// HostKey returns the public half of the server's host key.
func (s *Server) HostKey() ssh.PublicKey { return s.opts.HostKey.PublicKey() }

// Serve accepts connections on ln until ctx ends or ln fails.
//
// When ctx ends, Serve closes ln and every connection that runs no
// command, refuses new commands, and lets the running ones finish for up
// to ShutdownTimeout before it closes their connections too; then it
// returns nil. When Accept fails (but for a shortage of file descriptors
// or buffers, which it waits out), it closes every connection at once and
// returns the error. Either way it returns only after every session has.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	// hard ends the commands still running: ShutdownTimeout after ctx
	// ends, or at once when Accept fails.
	hard, kill := context.WithCancel(context.WithoutCancel(ctx))
	defer kill()
	var wg sync.WaitGroup
	err := s.accept(ctx, hard, ln, &wg)
	if err != nil {
		kill()
	} else {
		t := time.AfterFunc(s.opts.ShutdownTimeout, kill)
		defer t.Stop()
	}
	wg.Wait()
	return err
}

// accept accepts connections until ctx ends (nil) or ln fails.
func (s *Server) accept(ctx, hard context.Context, ln net.Listener, wg *sync.WaitGroup) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if transientAccept(err) {
				// Out of file descriptors or buffers, or a connection
				// aborted before it was accepted: wait and go on, as
				// net/http does, rather than take SSH down.
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.WarnContext(ctx, "ssh accept failed; retrying", "err", err, "in", backoff)
				select {
				case <-time.After(backoff):
				case <-ctx.Done():
				}
				continue
			}
			ln.Close()
			return fmt.Errorf("sshd: accept: %w", err)
		}
		backoff = 0
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(ctx, hard, c)
		}()
	}
}

// authResult travels from the authentication callbacks to the sessions
// in ssh.Permissions.ExtraData.
type authResult struct {
	principal *meta.Principal // nil: anonymous
	keyFP     string
	// err is a storage failure while looking the key up. The client is
	// let in, so that it is told "try again later" on stderr instead of a
	// misleading "Permission denied"; it can run nothing.
	err error
}

type authKey struct{}

func (s *Server) config(ctx context.Context) *ssh.ServerConfig {
	cfg := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-ghost",
		PublicKeyCallback: func(conn ssh.ConnMetadata, pub ssh.PublicKey) (*ssh.Permissions, error) {
			// x/crypto/ssh keeps these Permissions and hands them to the
			// connection only once the client has signed with this very
			// key, so an offered but unproven key grants nothing.
			actx, cancel := context.WithTimeout(ctx, s.opts.AuthTimeout)
			defer cancel()
			fp := ssh.FingerprintSHA256(pub)
			p, err := s.opts.Keys.AuthenticateKey(actx, pub)
			res := authResult{keyFP: fp}
			switch {
			case err == nil:
				res.principal = &p
			case errors.Is(err, meta.ErrUnauthenticated):
				// Unknown keys are refused even with AnonymousRead, so the
				// client goes on to offer its other keys: accepting this
				// one as anonymous would hide a registered key offered
				// after it. Anonymous callers come in through
				// keyboard-interactive, which clients try last.
				s.opts.Metrics.authFailed(authUnknownKey)
				return nil, fmt.Errorf("unknown key %s", fp)
			default:
				s.opts.Metrics.authFailed(authLookupError)
				s.log.ErrorContext(ctx, "ssh key lookup failed", "remote", conn.RemoteAddr().String(), "key", fp, "err", err)
				res.err = err
			}
			return &ssh.Permissions{ExtraData: map[any]any{authKey{}: res}}, nil
		},
	}
	if s.opts.AnonymousRead {
		cfg.KeyboardInteractiveCallback = func(ssh.ConnMetadata, ssh.KeyboardInteractiveChallenge) (*ssh.Permissions, error) {
			return &ssh.Permissions{ExtraData: map[any]any{authKey{}: authResult{}}}, nil
		}
	}
	cfg.AddHostKey(s.opts.HostKey)
	return cfg
}

// transientAccept reports whether an Accept error passes: the process or
// the system is out of file descriptors or buffers for now, or a client
// gave up before its connection was accepted.
func transientAccept(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// serveConn serves one connection. Its commands run under hard; when
// ctx ends the connection drains (connState.drain).
func (s *Server) serveConn(ctx, hard context.Context, c net.Conn) {
	defer c.Close()
	remote := c.RemoteAddr().String()
	source := sourceKey(c.RemoteAddr())
	// Until it has authenticated, a connection counts against the caps on
	// unauthenticated connections; one over them is closed at once, so a
	// flood of connections that never authenticate holds a bounded number
	// of goroutines and buffers, for at most HandshakeTimeout each.
	if limit := s.unauth.enter(source, limitUnauthenticated, limitUnauthenticatedPerSource); limit != "" {
		s.opts.Metrics.hit(limit)
		s.log.DebugContext(ctx, "ssh connection refused: too many unauthenticated connections", "remote", remote, "limit", limit)
		return
	}
	s.opts.Metrics.conn("unauthenticated", 1)
	authenticating := true
	leaveUnauth := func() {
		if authenticating {
			authenticating = false
			s.unauth.leave(source)
			s.opts.Metrics.conn("unauthenticated", -1)
		}
	}
	defer leaveUnauth()
	st := newConnState(c, s.opts.IdleTimeout)
	defer st.stop()
	stopDrain := context.AfterFunc(ctx, st.drain)
	defer stopDrain()
	stopKill := context.AfterFunc(hard, func() { c.Close() })
	defer stopKill()
	var deadline time.Time
	if s.opts.HandshakeTimeout > 0 {
		deadline = time.Now().Add(s.opts.HandshakeTimeout)
	}
	if err := c.SetDeadline(deadline); err != nil {
		return
	}
	conn, chans, reqs, err := ssh.NewServerConn(c, s.config(hard))
	if err != nil {
		s.opts.Metrics.authFailed(authHandshake)
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			s.opts.Metrics.hit(limitHandshakeTimeout)
		}
		s.log.DebugContext(ctx, "ssh handshake failed", "remote", remote, "err", err)
		return
	}
	defer conn.Close()
	leaveUnauth()
	if err := c.SetDeadline(time.Time{}); err != nil {
		return
	}
	res, ok := conn.Permissions.ExtraData[authKey{}].(authResult)
	if !ok {
		// Both auth callbacks set it, so this cannot happen; if it ever
		// did, the zero authResult would mean anonymous: fail closed.
		s.log.ErrorContext(ctx, "ssh connection authenticated without an auth result", "remote", remote)
		return
	}
	who := principalKey(res, source)
	if limit := s.principals.enter(who, "", limitConnsPerPrincipal); limit != "" {
		s.opts.Metrics.hit(limit)
		s.log.InfoContext(ctx, "ssh connection refused: too many connections of one principal", "remote", remote, "principal", who, "max", s.opts.MaxConnsPerPrincipal)
		return
	}
	defer s.principals.leave(who)
	s.opts.Metrics.conn("authenticated", 1)
	defer s.opts.Metrics.conn("authenticated", -1)
	go ssh.DiscardRequests(reqs)
	var wg sync.WaitGroup
	defer wg.Wait()
	var open atomic.Int32 // session channels open on this connection
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "ghost serves git sessions only")
			continue
		}
		// OpenSSH's MaxSessions: each open channel may hold a full
		// receive window the client filled, whether or not it runs
		// anything.
		if s.opts.MaxSessions > 0 && int(open.Load()) >= s.opts.MaxSessions {
			s.opts.Metrics.hit(limitSessions)
			_ = nc.Reject(ssh.ResourceShortage, fmt.Sprintf("too many sessions on one connection (at most %d)", s.opts.MaxSessions))
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			continue
		}
		open.Add(1)
		s.opts.Metrics.session(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.opts.Metrics.session(-1)
			defer open.Add(-1)
			s.session(hard, st, res, ch, creqs)
		}()
	}
}

// gitProtocolValue is what GIT_PROTOCOL may hold: the same rule as the
// HTTP transport's Git-Protocol header (internal/githttp).
var gitProtocolValue = regexp.MustCompile(`^[A-Za-z0-9=:.,_-]{1,200}$`)

// session serves one channel: env requests until an exec or shell
// request, which starts the one thing the channel does (an env request
// after it changes nothing: the command has its GIT_PROTOCOL). It returns
// when the channel is closed by either side.
func (s *Server) session(ctx context.Context, st *connState, res authResult, ch ssh.Channel, reqs <-chan *ssh.Request) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // the client closed the channel: stop the command
	// A channel that asks for no command is closed after ExecTimeout:
	// closing it ends reqs and frees whatever the client sent into it.
	stopIdle := func() bool { return false }
	if s.opts.ExecTimeout > 0 {
		t := time.AfterFunc(s.opts.ExecTimeout, func() {
			s.opts.Metrics.hit(limitExecTimeout)
			_ = ch.Close()
		})
		stopIdle = t.Stop
		defer t.Stop()
	}
	var gitProtocol string
	started := false
	for req := range reqs {
		ok := false
		switch req.Type {
		case "env":
			var kv struct{ Name, Value string }
			if ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" && gitProtocolValue.MatchString(kv.Value) {
				gitProtocol, ok = kv.Value, true
			}
		case "exec", "shell":
			if started {
				break
			}
			var cmd struct{ Command string }
			if req.Type == "exec" && ssh.Unmarshal(req.Payload, &cmd) != nil {
				break
			}
			if s.opts.ExecTimeout > 0 && !stopIdle() {
				break // closed for asking too late
			}
			started = true
			// Reply before the command can write or close the channel.
			if req.WantReply {
				_ = req.Reply(true, nil)
			}
			wg.Add(1)
			go func(line, proto string) {
				defer wg.Done()
				if !st.begin() {
					fmt.Fprintln(ch.Stderr(), "ERROR: the server is shutting down; try again")
					_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{1}))
					_ = ch.Close()
					return
				}
				// Counted out only once the client has its exit status: a
				// draining connection closes with its last command.
				defer st.end()
				code := s.run(ctx, st, res, ch, line, proto)
				_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
				_ = ch.Close()
			}(cmd.Command, gitProtocol)
			continue
		}
		// Everything else (pty-req, subsystem, x11-req, ...) is refused:
		// git asks for none of them.
		if req.WantReply {
			_ = req.Reply(ok, nil)
		}
	}
}

// run runs one exec (or shell, line "") and returns its exit status.
func (s *Server) run(ctx context.Context, st *connState, res authResult, ch ssh.Channel, line, proto string) uint32 {
	stderr := st.writer(ch.Stderr())
	if res.err != nil {
		fmt.Fprintf(stderr, "ERROR: %s\n", clientMessage(res.err))
		return 1
	}
	if line == "" {
		fmt.Fprintln(stderr, greeting(res.principal))
		return 1
	}
	cmd, err := ParseCommand(line)
	if err != nil {
		fmt.Fprintf(stderr, "ERROR: %s\n", clientMessage(err))
		return 1
	}
	req := Request{
		Principal: res.principal, Owner: cmd.Owner, Repo: cmd.Repo,
		Stdin: st.reader(ch), Stdout: st.writer(ch), Stderr: stderr, GitProtocol: proto, Operation: cmd.Operation,
	}
	start := time.Now()
	switch cmd.Service {
	case UploadPack:
		err = s.opts.Git.UploadPack(ctx, req)
	case ReceivePack:
		err = s.opts.Git.ReceivePack(ctx, req)
	case UploadArchive:
		err = s.opts.Git.UploadArchive(ctx, req)
	case LFSAuthenticate:
		err = s.opts.Git.LFSAuthenticate(ctx, req)
	case LFSTransfer:
		err = s.opts.Git.LFSTransfer(ctx, req)
	}
	attrs := []any{"service", string(cmd.Service), "repo", cmd.Owner + "/" + cmd.Repo, "tenant", tenantName(res.principal), "key", res.keyFP, "duration", time.Since(start)}
	if err == nil {
		s.log.InfoContext(ctx, "ssh git command", attrs...)
		return 0
	}
	if ctx.Err() != nil {
		// The client went away; nobody reads stderr.
		s.log.InfoContext(ctx, "ssh git command ended by the client", append(attrs, "err", err)...)
		return 1
	}
	msg := clientMessage(err)
	if msg == internalError {
		s.log.ErrorContext(ctx, "ssh git command failed", append(attrs, "err", err)...)
	} else {
		s.log.InfoContext(ctx, "ssh git command refused", append(attrs, "err", err)...)
	}
	fmt.Fprintf(stderr, "ERROR: %s\n", msg)
	return 1
}

const internalError = "internal error"

// ErrRefused reports a git request the service refused in git's own
// protocol (a fetch of an object no ref reaches): the client has been
// told in-band, and the error's message repeats it on stderr.
var ErrRefused = errors.New("refused")

// clientMessage says in plain words what went wrong, for the client's
// terminal. Like the HTTP answers (docs/design.md §7.4), a repository the
// principal may not read is "not found", the same as a missing one, and
// storage and internal errors do not show their chains (object keys, the
// store's own messages): those go to the log.
func clientMessage(err error) string {
	switch {
	case errors.Is(err, ErrBadCommand), errors.Is(err, ErrRefused):
		return err.Error()
	case errors.Is(err, meta.ErrNotFound):
		return "repository not found"
	case errors.Is(err, meta.ErrUnauthenticated):
		return "authentication required: add an SSH key to your ghost account (ghost key add)"
	case errors.Is(err, meta.ErrForbidden):
		return "permission denied: you may read this repository but not write to it"
	case errors.Is(err, meta.ErrUnavailable):
		return "storage is temporarily unavailable; try again later"
	case errors.Is(err, errors.ErrUnsupported):
		return "not supported by this server"
	}
	return internalError
}

func greeting(p *meta.Principal) string {
	if p == nil {
		return "Hi there! You've connected anonymously, but ghost does not provide shell access."
	}
	return fmt.Sprintf("Hi %s! You've successfully authenticated, but ghost does not provide shell access.", p.Tenant)
}

func tenantName(p *meta.Principal) string {
	if p == nil {
		return ""
	}
	return p.Tenant
}
