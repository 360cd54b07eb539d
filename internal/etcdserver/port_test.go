package etcdserver

import (
	"context"
	"net"
	"testing"

	"go.uber.org/zap"
)

// TestStartRecognisesATakenPort: the error of a port taken before etcd
// binds it is the one Start picks again for (addrInUse); with a fixed
// client address taken for good, Start gives up with it and leaves the
// directory free for the next start.
func TestStartRecognisesATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	_, err = Start(context.Background(), Options{Dir: dir, ClientAddr: l.Addr().String(), UnsafeNoFsync: true, Logger: zap.NewNop()})
	if err == nil || !addrInUse(err) {
		t.Fatalf("Start on a taken port: %v; want an error addrInUse recognises", err)
	}
	srv, err := Start(context.Background(), Options{Dir: dir, UnsafeNoFsync: true, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("a start after the failed ones: %v", err)
	}
	srv.Close()
}
