// Package etcdtest starts embedded etcd servers for tests, bound to
// 127.0.0.1 and stopped when the test (or test binary) ends.
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/ghost-scm/ghost/internal/etcdserver"
)

// Start starts an etcd for the duration of t under a fresh temporary
// directory and returns a client to it. Client and server are closed in
// t.Cleanup. fsync is disabled: tests gain speed and lose nothing, since a
// test's data never outlives a power loss anyway.
func Start(t testing.TB) *clientv3.Client {
	t.Helper()
	srv := StartServer(t, etcdserver.Options{Dir: t.TempDir(), UnsafeNoFsync: true, Logger: zap.NewNop()})
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// StartServer starts an etcd with opts for the duration of t; the caller
// controls the directory and the address, which lets a test stop the server
// and start it again on the same data. Pass Logger: zap.NewNop() to
// silence the errors etcd logs while shutting down.
func StartServer(t testing.TB, opts etcdserver.Options) *etcdserver.Server {
	t.Helper()
	srv, err := etcdserver.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

// Main runs a test binary with one etcd shared by all its tests, for
// packages whose tests each need a fresh namespace rather than a fresh
// server. Call it from TestMain:
//
//	func TestMain(m *testing.M) { etcdtest.Main(m, &client) }
//
// It sets *client before the tests run, stops the server after them and
// exits with the tests' status.
func Main(m *testing.M, client **clientv3.Client) {
	os.Exit(runMain(m, client))
}

func runMain(m *testing.M, client **clientv3.Client) int {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: dir, UnsafeNoFsync: true, Logger: zap.NewNop()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest:", err)
		return 1
	}
	defer srv.Close()
	c, err := srv.Client()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdtest:", err)
		return 1
	}
	defer c.Close()
	*client = c
	return m.Run()
}
