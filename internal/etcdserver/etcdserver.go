// Package etcdserver runs etcd inside the ghost process and opens clients to
// either that embedded server or an external cluster.
//
// Embedded etcd is ghost's zero-setup default: a single-member cluster whose
// data lives under ghost's data directory and whose client and peer ports
// are bound on loopback only, so nothing outside the host can reach it. The
// package is separate from the rest of ghost because go.etcd.io/etcd/server
// pulls in a large dependency tree (raft, bbolt, grpc-gateway, prometheus)
// that packages which only talk to etcd must not link.
package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
)

// Limits the embedded server is configured with. etcd's defaults (128
// operations and 1.5 MiB per request) are too small for the largest
// all-or-nothing write ghost's coordinator makes: registering
// coord.DefaultMaxInitialShards root shards in one transaction, which needs
// two operations per shard. See docs/adr/0024-embedded-etcd.md.
const (
	// MaxTxnOps bounds the operations of one transaction branch.
	MaxTxnOps = 32 << 10
	// MaxRequestBytes bounds one request, and therefore one transaction.
	MaxRequestBytes = 32 << 20
	// MaxCallSendMsgSize is the client-side bound on a request; it leaves
	// room for gRPC framing above MaxRequestBytes.
	MaxCallSendMsgSize = MaxRequestBytes + 1<<20
)

// DefaultStartTimeout bounds how long Start waits for the server to be ready.
const DefaultStartTimeout = 60 * time.Second

// Options configures an embedded server.
type Options struct {
	// Dir holds etcd's WAL and snapshots. It is created if missing.
	Dir string
	// ClientAddr is the loopback host:port clients connect to. Empty picks a
	// free port; a restart that must keep its address passes the one a
	// previous Server reported.
	ClientAddr string
	// StartTimeout bounds the wait for readiness (default DefaultStartTimeout).
	StartTimeout time.Duration
	// UnsafeNoFsync disables fsync. Only tests may set it: a power loss
	// then loses acknowledged writes.
	UnsafeNoFsync bool
	// Logger receives etcd's logs. Nil logs errors only, to stderr.
	Logger *zap.Logger
}

// Server is a running embedded etcd.
type Server struct {
	etcd       *embed.Etcd
	clientAddr string
	lock       *os.File // held while the server runs
	closeOnce  sync.Once
}

// Start starts a single-member etcd under opts.Dir and waits until it serves
// requests. The caller must Close it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("etcdserver: empty data directory")
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	// etcd's own bbolt lock blocks forever when another process holds the
	// directory, ignoring StartTimeout; take a non-blocking lock first so
	// a second ghost process on the same data directory fails at once
	// with an error that says why.
	lock, err := lockDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	var srv *Server
	for attempt := 1; ; attempt++ {
		srv, err = start(ctx, opts)
		// A port this package picked (loopbackURL binds :0 and releases
		// it) can be taken by another process before etcd binds it: pick
		// again. etcd binds its listeners before it touches the data
		// directory, so a failed bind leaves nothing to undo.
		if err == nil || attempt == maxStartAttempts || !addrInUse(err) {
			break
		}
	}
	if err != nil {
		lock.Close()
		return nil, err
	}
	srv.lock = lock
	return srv, nil
}

// maxStartAttempts bounds Start's tries when a port it picked was taken.
const maxStartAttempts = 5

// addrInUse reports a listener that could not bind its address.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// ErrDirInUse reports an etcd data directory that another process (most
// likely another ghost) is already running an embedded etcd in.
var ErrDirInUse = errors.New("etcd data directory is in use by another process")

// lockDir creates dir and takes an exclusive, non-blocking flock on
// dir/ghost.lock; closing the file releases it.
func lockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "ghost.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("etcdserver: %s: %w", dir, ErrDirInUse)
		}
		return nil, fmt.Errorf("etcdserver: lock %s: %w", dir, err)
	}
	return f, nil
}

func start(ctx context.Context, opts Options) (*Server, error) {
	cfg := embed.NewConfig()
	cfg.Name = "ghost"
	cfg.Dir = opts.Dir
	cfg.MaxTxnOps = MaxTxnOps
	cfg.MaxRequestBytes = MaxRequestBytes
	cfg.UnsafeNoFsync = opts.UnsafeNoFsync
	cfg.EnableGRPCGateway = false
	// Revisions older than an hour are only useful to watchers, and ghost
	// does not watch; compacting keeps the database from growing without bound.
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"
	logger := opts.Logger
	if logger == nil {
		logger = defaultLogger()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)

	clientURL, err := loopbackURL(opts.ClientAddr)
	if err != nil {
		return nil, err
	}
	// The peer port is never dialled in a one-member cluster, but etcd
	// binds it anyway; it is chosen afresh on every start, which etcd
	// accepts because a restarted member does not re-validate its peer URLs.
	peerURL, err := loopbackURL("")
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls = []url.URL{*clientURL}
	cfg.AdvertiseClientUrls = []url.URL{*clientURL}
	cfg.ListenPeerUrls = []url.URL{*peerURL}
	cfg.AdvertisePeerUrls = []url.URL{*peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start: %w", err)
	}
	timer := time.NewTimer(opts.StartTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcdserver: start: %w", err)
	case <-timer.C:
		e.Close()
		return nil, fmt.Errorf("etcdserver: not ready after %v", opts.StartTimeout)
	case <-ctx.Done():
		e.Close()
		return nil, fmt.Errorf("etcdserver: start: %w", ctx.Err())
	}
	return &Server{etcd: e, clientAddr: e.Clients[0].Addr().String()}, nil
}

// defaultLogger logs etcd's errors to stderr as JSON, without the error
// etcd logs for each of its listeners on every normal shutdown.
func defaultLogger() *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	core := zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.ErrorLevel)
	return zap.New(quietShutdown{core})
}

// shutdownNoise is what etcd logs, at error level, when Close stops its
// listeners; it is not an error.
const shutdownNoise = "setting up serving from embedded etcd failed."

// quietShutdown drops shutdownNoise. Genuine failures to serve still
// surface: StartEtcd fails, or Start sees the error on the server's
// error channel.
type quietShutdown struct{ zapcore.Core }

func (q quietShutdown) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == shutdownNoise || !q.Enabled(e.Level) {
		return ce
	}
	return ce.AddCore(e, q)
}

func (q quietShutdown) With(fields []zapcore.Field) zapcore.Core {
	return quietShutdown{q.Core.With(fields)}
}

// loopbackURL returns http://addr, or a URL on a free loopback port when
// addr is empty. The port is found by binding :0 and releasing it; another
// process could take it before etcd binds it, which then fails Start
// rather than silently sharing a port.
func loopbackURL(addr string) (*url.URL, error) {
	if addr == "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("etcdserver: pick a port: %w", err)
		}
		addr = l.Addr().String()
		if err := l.Close(); err != nil {
			return nil, fmt.Errorf("etcdserver: pick a port: %w", err)
		}
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("etcdserver: address %q is not a loopback IP", addr)
	}
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// ClientAddr returns the host:port the server accepts clients on.
func (s *Server) ClientAddr() string { return s.clientAddr }

// Endpoint returns the client URL of the server.
func (s *Server) Endpoint() string { return "http://" + s.clientAddr }

// Client opens a client to the server. The caller must close it before
// closing the server, or its in-flight calls fail.
func (s *Server) Client(opts ...ClientOption) (*clientv3.Client, error) {
	return NewClient([]string{s.Endpoint()}, opts...)
}

// ClientOption tunes a client NewClient opens.
type ClientOption func(*clientv3.Config)

// WithRequestObserver reports every request the client sends to etcd:
// each unary call (Range, Txn, Put, LeaseKeepAlive's grant, ...) and each
// stream it opens (Watch, LeaseKeepAlive), by gRPC method name, so that
// what ghost asks of etcd is counted (issue 22).
func WithRequestObserver(observe func(method string)) ClientOption {
	return func(c *clientv3.Config) {
		c.DialOptions = append(c.DialOptions,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				observe(method)
				return invoker(ctx, method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				observe(method)
				return streamer(ctx, desc, cc, method, opts...)
			}))
	}
}

// Close stops the server, waiting for in-flight requests and flushing its
// data. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.etcd.Close()
		if s.lock != nil {
			s.lock.Close()
		}
	})
	return nil
}

// NewClient opens a client to endpoints with ghost's settings: a quiet
// logger and a send limit that fits the embedded server's request limit.
func NewClient(endpoints []string, opts ...ClientOption) (*clientv3.Client, error) {
	cfg := clientv3.Config{
		Endpoints:          endpoints,
		DialTimeout:        5 * time.Second,
		MaxCallSendMsgSize: MaxCallSendMsgSize,
		Logger:             zap.NewNop(),
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: client for %v: %w", endpoints, err)
	}
	return c, nil
}

// Open returns a client for ghost's coordination store. With no endpoints
// it starts an embedded etcd under dataDir/etcd and the returned Closer
// closes the client, then stops the server; otherwise it connects to the
// cluster at endpoints and the Closer closes the client.
func Open(ctx context.Context, dataDir string, endpoints []string, opts ...ClientOption) (*clientv3.Client, io.Closer, error) {
	if len(endpoints) > 0 {
		c, err := NewClient(endpoints, opts...)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}
	if dataDir == "" {
		return nil, nil, errors.New("etcdserver: empty data directory and no endpoints")
	}
	srv, err := Start(ctx, Options{Dir: filepath.Join(dataDir, "etcd")})
	if err != nil {
		return nil, nil, err
	}
	c, err := srv.Client(opts...)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return c, closerFunc(func() error {
		cerr := c.Close()
		srv.Close()
		return cerr
	}), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }
