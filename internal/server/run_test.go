package server_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/server"
)

// TestRunOwnsTheNode: Run serves the listener, opens the coordination
// store the server owns (the embedded etcd: /readyz turns ready and its
// endpoint is recorded for the other commands), and when its context ends
// it stops serving and closes the store (the endpoint record is gone).
func TestRunOwnsTheNode(t *testing.T) {
	data := t.TempDir()
	s, err := server.New(context.Background(), server.Options{
		Store: memstore.New(), CacheDir: filepath.Join(data, "cache"),
		Etcd:        &server.EtcdOptions{DataDir: data, Namespace: "/test/run"},
		ScanWorkers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Scanner() == nil {
		t.Fatal("with Options.Etcd the server scans pushes; Scanner() is nil")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, server.Listeners{HTTP: ln}) }()

	base := "http://" + ln.Addr().String()
	for {
		res, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == http.StatusOK {
			break
		}
		t.Logf("not ready yet: %s", body)
		time.Sleep(50 * time.Millisecond) // the embedded etcd is starting
	}
	endpoint := server.EtcdEndpointFile(data)
	for {
		if _, err := os.Stat(endpoint); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after its context ended: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the listener still answers after Run returned")
	}
	if _, err := os.Stat(endpoint); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the embedded etcd's endpoint record outlived Run: %v", err)
	}
}

// TestRunStopsWhenATransportFails: a listener that fails ends Run with its
// error, and the other transport stops with it.
func TestRunStopsWhenATransportFails(t *testing.T) {
	s, err := server.New(context.Background(), server.Options{Store: memstore.New(), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ssh, err := s.SSHServer(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sshLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), server.Listeners{HTTP: httpLn, SSH: sshLn, SSHServer: ssh})
	}()
	time.Sleep(50 * time.Millisecond)
	sshLn.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run returned nil after its SSH listener failed")
		}
		t.Logf("Run: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Run did not return after its SSH listener failed: the HTTP transport kept it alive")
	}
	if c, err := net.Dial("tcp", httpLn.Addr().String()); err == nil {
		c.Close()
		t.Error("the HTTP listener still accepts after Run returned")
	}
}
