package pushprotect

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// Git LFS objects (issue 23 §5): a file tracked by LFS is a pointer in
// git and its bytes live in the object store, so the git scan sees only
// the pointer. A secret in an LFS-tracked config file is as real as any:
// push protection opens the objects the push's pointers name, and scans
// those that are small enough and text as the pointer's file.

// Bounds of the LFS scan of one push.
const (
	// DefaultMaxLFSObject is the largest LFS object scanned: config files
	// are small; models and art, which LFS mostly holds, are neither small
	// nor text.
	DefaultMaxLFSObject = 1 << 20
	// DefaultMaxLFSBytes bounds the LFS bytes one push has scanned; past
	// it, objects are counted as skipped.
	DefaultMaxLFSBytes = 64 << 20
)

// LFSObjects opens a repository's Git LFS objects (the server adapts
// lfs.Handler).
type LFSObjects interface {
	// Open opens oid's bytes and returns their size. The caller closes
	// the reader.
	Open(ctx context.Context, oid string) (io.ReadCloser, int64, error)
}

// lfsScan is what the LFS scan of a push found.
type lfsScan struct {
	findings []secretscan.Finding
	stats    secretscan.Stats
	// content holds the scanned bytes of the objects with findings, by
	// their pointer's blob id, for the secrets a bypass records.
	content map[string][]byte
}

// scanLFS scans the LFS objects of the pointer blobs the push adds
// (paths: the pushed objects and their paths). Findings carry the
// pointer's blob id and path and the first pushed ref that reaches it
// (secretscan.Locate), like a blob no diff adds. An object that cannot
// be read is an error: push protection fails closed.
func (s *Checker) scanLFS(ctx context.Context, e *secretscan.Engine, p Push, refs []secretscan.RefTip, paths map[string]string) (lfsScan, error) {
	out := lfsScan{content: map[string][]byte{}}
	if p.LFS == nil || len(p.LFSPointers) == 0 {
		return out, nil
	}
	maxObject := s.opts.MaxLFSObject
	if maxObject == 0 {
		maxObject = DefaultMaxLFSObject
	}
	budget := s.opts.MaxLFSBytes
	if budget == 0 {
		budget = DefaultMaxLFSBytes
	}
	var blobs []string
	for id := range p.LFSPointers {
		if _, pushed := paths[id]; pushed {
			blobs = append(blobs, id)
		}
	}
	slices.Sort(blobs) // a stable order for the budget
	var found []string
	for _, id := range blobs {
		oid := p.LFSPointers[id]
		rc, size, err := p.LFS.Open(ctx, oid)
		if err != nil {
			return lfsScan{}, fmt.Errorf("pushprotect: git lfs object %s: %w", oid, err)
		}
		out.stats.Blobs++
		out.stats.Bytes += size
		if maxObject < 0 || size > maxObject || size > budget {
			rc.Close()
			out.stats.LargeSkipped++
			out.stats.LargeBytes += size
			continue
		}
		b, err := io.ReadAll(io.LimitReader(rc, size+1))
		rc.Close()
		if err != nil {
			return lfsScan{}, fmt.Errorf("pushprotect: read git lfs object %s: %w", oid, err)
		}
		if int64(len(b)) != size {
			return lfsScan{}, fmt.Errorf("pushprotect: git lfs object %s is %d bytes, not %d", oid, len(b), size)
		}
		budget -= size
		fs, st := e.ScanBytes(paths[id], b)
		out.stats.Add(st)
		if len(fs) == 0 {
			continue
		}
		for i := range fs {
			fs[i].BlobID = id
		}
		out.findings = append(out.findings, fs...)
		out.content[id] = b
		found = append(found, id)
	}
	if len(found) == 0 {
		return out, nil
	}
	reach, err := secretscan.Locate(ctx, p.Repo, refs, []string{"--all"}, found)
	if err != nil {
		return lfsScan{}, fmt.Errorf("pushprotect: locate: %w", err)
	}
	for i := range out.findings {
		f := &out.findings[i]
		if r, ok := reach[f.BlobID]; ok {
			f.Ref = r.Ref
		}
	}
	return out, nil
}
