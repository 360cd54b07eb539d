package wal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/oklog/ulid/v2"
)

// ReadIndex returns the repository's index and its ETag. A missing index
// is the empty repository at seq 0 with etag "". A tombstone is returned
// as is (Deleted set); callers decide whether that is an error.
func (l *Log) ReadIndex(ctx context.Context, repo string) (*Index, string, error) {
	if err := CheckRepoID(repo); err != nil {
		return nil, "", err
	}
	key := IndexKey(repo)
	b, info, err := objstore.ReadAll(ctx, l.store, key, MaxIndexSize)
	if errors.Is(err, objstore.ErrNotFound) {
		return &Index{}, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read index of %s: %w", repo, err)
	}
	x, err := DecodeIndex(b, key)
	if err != nil {
		return nil, "", err
	}
	return x, info.ETag, nil
}

// Head returns the live index of an existing, undeleted repository:
// ErrRepoDeleted for a tombstone.
func (l *Log) Head(ctx context.Context, repo string) (*Index, error) {
	x, _, err := l.ReadIndex(ctx, repo)
	if err != nil {
		return nil, err
	}
	if x.Deleted {
		return nil, fmt.Errorf("%s: %w", repo, ErrRepoDeleted)
	}
	return x, nil
}

// OpenPackIndex opens the derived pack index stored beside a layer's
// entry. It fails with an error matching objstore.ErrNotFound when the
// entry has none (pushed without one, or by an older ghost).
func (l *Log) OpenPackIndex(ctx context.Context, repo string, layer Layer) (io.ReadCloser, int64, error) {
	rc, info, err := l.store.Get(ctx, PackIndexKey(repo, layer.ULID))
	if err != nil {
		return nil, 0, fmt.Errorf("pack index of %s: %w", layer.ULID, err)
	}
	return rc, info.Size, nil
}

// headerProbe is the first ranged read of an entry: most headers fit.
const headerProbe = 4096

// ReadEntryHeader reads an entry's header with one ranged GET, or two when
// the header is longer than the first probe.
func (l *Log) ReadEntryHeader(ctx context.Context, repo string, id ulid.ULID) (*EntryHeader, error) {
	key := EntryKey(repo, id)
	first, err := l.readRange(ctx, key, 0, headerProbe)
	if err != nil {
		return nil, err
	}
	n, err := entryHeaderLen(first, key)
	if err != nil {
		return nil, err
	}
	buf := first
	if n > int64(len(first)) {
		rest, err := l.readRange(ctx, key, int64(len(first)), n-int64(len(first)))
		if err != nil {
			return nil, err
		}
		buf = append(first, rest...)
	}
	if int64(len(buf)) < n {
		return nil, corrupt(key, "entry ends inside its %d-byte header", n)
	}
	h, err := DecodeEntryHeader(buf[:n], key)
	if err != nil {
		return nil, err
	}
	if h.ULID != id {
		return nil, corrupt(key, "header names entry %s", h.ULID)
	}
	return h, nil
}

func (l *Log) readRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	rc, err := l.store.GetRange(ctx, key, off, n)
	if err != nil {
		if errors.Is(err, objstore.ErrNotFound) {
			return nil, corrupt(key, "entry referenced by the index is missing")
		}
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, n))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// OpenPack streams a layer's pack with a ranged GET after its header. The
// reader verifies the pack's size and sha256 against the index and fails
// with a *CorruptError at the end if they differ, so a damaged entry is
// never applied silently.
func (l *Log) OpenPack(ctx context.Context, repo string, layer Layer) (io.ReadCloser, *EntryHeader, error) {
	h, err := l.ReadEntryHeader(ctx, repo, layer.ULID)
	if err != nil {
		return nil, nil, err
	}
	key := EntryKey(repo, layer.ULID)
	rc, err := l.store.GetRange(ctx, key, h.Len, layer.Size)
	if err != nil {
		return nil, nil, fmt.Errorf("open pack %s: %w", key, err)
	}
	return &verifyReader{rc: rc, key: key, want: layer.SHA256, size: layer.Size, sum: sha256.New()}, h, nil
}

type verifyReader struct {
	rc   io.ReadCloser
	key  string
	want [32]byte
	size int64
	n    int64
	sum  hash.Hash
}

func (v *verifyReader) Read(p []byte) (int, error) {
	n, err := v.rc.Read(p)
	v.sum.Write(p[:n])
	v.n += int64(n)
	if err == io.EOF {
		if v.n != v.size {
			return n, corrupt(v.key, "pack is %d bytes, index says %d", v.n, v.size)
		}
		if !bytes.Equal(v.sum.Sum(nil), v.want[:]) {
			return n, corrupt(v.key, "pack sha256 differs from the index")
		}
	}
	return n, err
}

func (v *verifyReader) Close() error { return v.rc.Close() }
