package etcdserver_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/ghost-scm/ghost/internal/etcdserver"
	"github.com/ghost-scm/ghost/internal/etcdserver/etcdtest"
)

func TestOpenEmbeddedPersistsAcrossRestart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, closer, err := etcdserver.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "k", "v1"); err != nil {
		t.Fatal(err)
	}
	for _, ep := range c.Endpoints() {
		host, _, err := net.SplitHostPort(ep[len("http://"):])
		if err != nil || host != "127.0.0.1" {
			t.Fatalf("endpoint %q is not on 127.0.0.1", ep)
		}
	}
	if err := closer.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "k"); err == nil {
		t.Fatal("client still works after Close")
	}

	c, closer, err = etcdserver.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	resp, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("after restart got %v", resp.Kvs)
	}
}

func TestRestartOnSameAddress(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := filepath.Join(t.TempDir(), "etcd")
	srv := etcdtest.StartServer(t, etcdserver.Options{Dir: dir, UnsafeNoFsync: true})
	addr := srv.ClientAddr()
	c, err := srv.Client()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	srv = etcdtest.StartServer(t, etcdserver.Options{Dir: dir, ClientAddr: addr, UnsafeNoFsync: true})
	if srv.ClientAddr() != addr {
		t.Fatalf("restarted on %s, want %s", srv.ClientAddr(), addr)
	}
	// The old client reconnects by itself.
	resp, err := c.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 {
		t.Fatalf("lost the key across the restart")
	}
}

func TestRejectsNonLoopback(t *testing.T) {
	_, err := etcdserver.Start(context.Background(), etcdserver.Options{Dir: t.TempDir(), ClientAddr: "0.0.0.0:2379"})
	if err == nil {
		t.Fatal("started on a non-loopback address")
	}
}

func TestMaxTxnOpsRaised(t *testing.T) {
	c := etcdtest.Start(t)
	ops := make([]clientv3.Op, 1000)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("k%04d", i), "v")
	}
	resp, err := c.Txn(context.Background()).Then(ops...).Commit()
	if err != nil {
		t.Fatalf("1000-op txn: %v", err)
	}
	if !resp.Succeeded {
		t.Fatal("txn did not succeed")
	}
}
