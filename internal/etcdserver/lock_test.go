package etcdserver

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A second embedded etcd on the same directory fails at once with
// ErrDirInUse instead of blocking on etcd's own database lock; once the
// first is closed the directory can be used again.
func TestStartRefusesDirInUse(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s1, err := Start(ctx, Options{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	s2, err := Start(ctx, Options{Dir: dir, UnsafeNoFsync: true, StartTimeout: 5 * time.Second})
	if !errors.Is(err, ErrDirInUse) {
		if s2 != nil {
			s2.Close()
		}
		t.Fatalf("second Start = %v, want ErrDirInUse", err)
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("second Start took %v to refuse; it must not block", d)
	}
	s1.Close()
	s3, err := Start(ctx, Options{Dir: dir, UnsafeNoFsync: true})
	if err != nil {
		t.Fatalf("Start after Close: %v", err)
	}
	s3.Close()
}
