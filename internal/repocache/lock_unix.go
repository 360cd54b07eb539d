//go:build unix

package repocache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// fileLock is an exclusive advisory lock on a file, held across processes
// so that two ghost processes sharing one cache directory never
// materialize the same repository at the same time.
type fileLock struct{ f *os.File }

func lockFile(ctx context.Context, path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return &fileLock{f: f}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (l *fileLock) unlock() {
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	l.f.Close()
}

// claimTemp takes the lock that tells whether any other process has the
// cache directory open. It returns the lock file and whether this process
// is alone; either way the caller ends up holding a shared lock (after
// clearing tmp when alone, see shareTemp) until it closes the file.
func claimTemp(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("open lock %s: %w", path, err)
	}
	err = flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := flock(f, syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, false, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, false, nil
}

// shareTemp turns the exclusive lock of claimTemp into a shared one.
func shareTemp(f *os.File) error { return flock(f, syscall.LOCK_SH) }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
