package pushprotect

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/secretscan"
)

// Git LFS objects (issue 23 §5): a file tracked by LFS is a pointer in
// git and its bytes live in the object store, so the git scan sees only
// the pointer. A secret in an LFS-tracked config file is as real as any:
// push protection opens the objects the push's pointers name and scans
// them as the pointers' files.
//
// Bounds (issue 43, docs/adr/0130-lfs-push-protection.md): no object is
// skipped silently. Objects up to WholeLFSObject are read whole (their
// bytes kept, for the secrets a bypass records); larger ones are scanned
// as a stream in bounded memory (secretscan.Engine.ScanStream). One push
// reads at most MaxLFSBytes, in order of risk: files whose names hold
// secrets (.env, keys, credentials) first, then text and configuration,
// then the rest, smaller before larger. An object that does not fit in
// what is left is not read before the commit point: the push is refused,
// naming it, unless the repository scans LFS objects after the push
// (Push.LFSScanAfterPush), when it lands and the push's scan run reads it.

// Bounds of the LFS scan of one push.
const (
	// DefaultWholeLFSObject is the largest LFS object read whole; larger
	// ones are scanned as a stream.
	DefaultWholeLFSObject = 1 << 20
	// DefaultMaxLFSBytes bounds the LFS bytes one push reads before its
	// commit point.
	DefaultMaxLFSBytes = 256 << 20
)

// LFSObjects opens a repository's Git LFS objects (the server adapts
// lfs.Handler).
type LFSObjects interface {
	// Open opens oid's bytes and returns their size. The caller closes
	// the reader.
	Open(ctx context.Context, oid string) (io.ReadCloser, int64, error)
}

// LFSObject is a Git LFS object of a push: the pointer's path, the
// object's oid and size.
type LFSObject struct {
	Path string
	OID  string
	Size int64
}

// lfsScan is what the LFS scan of a push found: its candidates join the
// pointer blobs' in the push's BlobScan.
type lfsScan struct {
	stats secretscan.Stats
	// content holds the bytes of the objects read whole, by their
	// pointer's blob id, for the secrets a bypass records.
	content map[string][]byte
	// unscanned are the objects past the push's budget, not read.
	unscanned []LFSObject
}

// lfsItem is a pointer blob of the push, in the order it is read.
type lfsItem struct {
	blob string
	LFSObject
	risk int
}

// scanLFS scans the LFS objects of the pointer blobs the push adds
// (paths: the pushed objects and the path rev-list gives each) into bs,
// as those blobs' content (secretscan.BlobScan.ScanLFS and
// ScanLFSStream), in order of risk within the push's budget (the bounds
// above). The candidates join the pointer blobs', so attribution places
// them as a git blob's: at each commit and path that adds the pointer,
// whatever later commits rename it to (a path the allowlist skips
// included). An object that cannot be read, or whose bytes are not its
// size, is an error: push protection fails closed.
func (s *Checker) scanLFS(ctx context.Context, e *secretscan.Engine, bs *secretscan.BlobScan, p Push, paths map[string]string) (lfsScan, error) {
	out := lfsScan{content: map[string][]byte{}}
	if p.LFS == nil || len(p.LFSPointers) == 0 {
		return out, nil
	}
	whole := cmp.Or(s.opts.WholeLFSObject, DefaultWholeLFSObject)
	budget := cmp.Or(s.opts.MaxLFSBytes, DefaultMaxLFSBytes)
	if budget < 0 {
		budget = math.MaxInt64 // no bound
	}
	var items []lfsItem
	for id, ptr := range p.LFSPointers {
		if pth, pushed := paths[id]; pushed {
			items = append(items, lfsItem{blob: id, LFSObject: LFSObject{Path: pth, OID: ptr.OID, Size: ptr.Size}, risk: lfsRisk(e, pth)})
		}
	}
	slices.SortFunc(items, func(a, b lfsItem) int {
		return cmp.Or(cmp.Compare(a.risk, b.risk), cmp.Compare(a.Size, b.Size), strings.Compare(a.blob, b.blob))
	})
	for _, it := range items {
		if it.Size > budget {
			// Not even opened: the pointer's size says it cannot fit.
			// A pointer that overstates its size is refused or deferred,
			// never scanned less.
			out.stats.Blobs++
			out.stats.LargeSkipped++
			out.stats.LargeBytes += it.Size
			out.unscanned = append(out.unscanned, it.LFSObject)
			continue
		}
		rc, size, err := p.LFS.Open(ctx, it.OID)
		if err != nil {
			return lfsScan{}, fmt.Errorf("pushprotect: git lfs object %s: %w", it.OID, err)
		}
		if size > budget {
			rc.Close()
			out.stats.Blobs++
			out.stats.LargeSkipped++
			out.stats.LargeBytes += size
			it.Size = size
			out.unscanned = append(out.unscanned, it.LFSObject)
			continue
		}
		budget -= size
		st, held, err := scanObject(bs, it, rc, size, whole)
		rc.Close()
		if err != nil {
			return lfsScan{}, err
		}
		_ = st // counted in bs.Stats
		if held != nil {
			out.content[it.blob] = held
		}
	}
	return out, nil
}

// scanPreviousLFS scans into ps, a scan of the previous versions of the
// files with candidates, the objects of those that are Git LFS pointers,
// so that a secret the file's previous object already held is not taken
// for new. Each is read up to DefaultWholeLFSObject whole and past it as
// a stream; one that cannot be opened is an error (the push is refused
// as busy), since otherwise the old secret would block it as new.
func (s *Checker) scanPreviousLFS(ctx context.Context, ps *secretscan.BlobScan, objects LFSObjects) error {
	if objects == nil {
		return nil
	}
	whole := cmp.Or(s.opts.WholeLFSObject, DefaultWholeLFSObject)
	for id, oid := range ps.LFSPointers() {
		rc, size, err := objects.Open(ctx, oid)
		if err != nil {
			return fmt.Errorf("pushprotect: git lfs object %s of a previous version: %w", oid, err)
		}
		_, _, err = scanObject(ps, lfsItem{blob: id, LFSObject: LFSObject{OID: oid, Size: size}}, rc, size, whole)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// scanObject scans one object of size bytes from rc into bs as it.blob's
// content: read whole (and returned, held) up to whole bytes, as a stream
// past that.
func scanObject(bs *secretscan.BlobScan, it lfsItem, rc io.Reader, size, whole int64) (secretscan.Stats, []byte, error) {
	body := io.LimitReader(rc, size+1)
	if size > whole {
		cr := &countReader{r: body}
		st, err := bs.ScanLFSStream(it.blob, cr)
		if err != nil {
			return st, nil, fmt.Errorf("pushprotect: read git lfs object %s: %w", it.OID, err)
		}
		if cr.n > size || cr.n < size && st.BinarySkipped == 0 {
			return st, nil, fmt.Errorf("pushprotect: git lfs object %s is %d bytes, not %d", it.OID, cr.n, size)
		}
		return st, nil, nil
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return secretscan.Stats{}, nil, fmt.Errorf("pushprotect: read git lfs object %s: %w", it.OID, err)
	}
	if int64(len(b)) != size {
		return secretscan.Stats{}, nil, fmt.Errorf("pushprotect: git lfs object %s is %d bytes, not %d", it.OID, len(b), size)
	}
	return bs.ScanLFS(it.blob, b), b, nil
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// Risk classes of an LFS object's path, read first to last.
const (
	riskSecret = iota // names that hold secrets, or a path rule's
	riskText          // text and configuration
	riskOther         // the rest: models, art, archives
)

// lfsRisk classes path: names that hold secrets first (and those some
// rule of the engine applies to by path), then text and configuration,
// then everything else.
func lfsRisk(e *secretscan.Engine, p string) int {
	base := strings.ToLower(path.Base(p))
	ext := path.Ext(base)
	switch {
	case e.HasPathRule(p),
		base == ".env" || strings.HasPrefix(base, ".env.") || ext == ".env",
		secretName(base), secretExt(ext),
		strings.HasPrefix(base, "id_rsa") || strings.HasPrefix(base, "id_dsa") ||
			strings.HasPrefix(base, "id_ecdsa") || strings.HasPrefix(base, "id_ed25519"),
		strings.Contains(base, "secret") || strings.Contains(base, "credential") || strings.Contains(base, "password"):
		return riskSecret
	case textExt(ext) || ext == "":
		return riskText
	}
	return riskOther
}

func secretName(base string) bool {
	switch base {
	case ".npmrc", ".pypirc", ".netrc", ".git-credentials", ".htpasswd", ".dockercfg",
		"config.json", "credentials", ".s3cfg", ".pgpass":
		return true
	}
	return false
}

func secretExt(ext string) bool {
	switch ext {
	case ".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".ppk", ".kdbx", ".tfvars",
		".tfstate", ".asc", ".gpg":
		return true
	}
	return false
}

func textExt(ext string) bool {
	switch ext {
	case ".json", ".yml", ".yaml", ".toml", ".ini", ".conf", ".cfg", ".config", ".properties",
		".xml", ".sh", ".txt", ".sql", ".csv", ".md", ".js", ".ts", ".py", ".go", ".rb", ".java",
		".cs", ".php", ".tf", ".log":
		return true
	}
	return false
}
