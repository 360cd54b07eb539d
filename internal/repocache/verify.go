package repocache

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ghost-scm/ghost/internal/wal"
)

// verifiedFile lists, for each pack file and pack index of the repository
// known to hold the log's bytes, the stamp (size, inode, change time) it
// had then. A file whose stamp differs has been written to since, and is
// checksummed again before it is served. See
// docs/adr/0016-cache-self-healing.md.
const verifiedFile = "ghost-verified"

// stamp identifies a file's content cheaply: any write, rename into place
// or truncation changes the change time, which, unlike the modification
// time, no tool can set back.
type stamp struct {
	size, ctime int64
	ino         uint64
}

func (s stamp) String() string {
	return fmt.Sprintf("%d %d %d", s.size, s.ctime, s.ino)
}

// readVerified reads the verified list; a missing or garbled list is
// empty, which costs one verification of every pack.
func readVerified(dir string) map[string]stamp {
	m := map[string]stamp{}
	b, err := os.ReadFile(filepath.Join(dir, verifiedFile))
	if err != nil {
		return m
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 {
			continue
		}
		size, err1 := strconv.ParseInt(f[1], 10, 64)
		ctime, err2 := strconv.ParseInt(f[2], 10, 64)
		ino, err3 := strconv.ParseUint(f[3], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		m[f[0]] = stamp{size: size, ctime: ctime, ino: ino}
	}
	return m
}

// writeVerified replaces the verified list atomically. Failing to write
// it only costs a verification later.
func writeVerified(dir string, m map[string]stamp) error {
	var b strings.Builder
	for name, s := range m {
		fmt.Fprintf(&b, "%s %s\n", name, s)
	}
	if err := replaceFile(filepath.Join(dir, verifiedFile), b.String()); err != nil {
		return fmt.Errorf("write verified list: %w", err)
	}
	return nil
}

// packFileNames are the files of a pack whose bytes matter to git.
func packFileNames(name string) []string {
	return []string{"pack-" + name + ".pack", "pack-" + name + ".idx"}
}

// verify checks the packs st records: each layer's pack that the log's
// index x still lists against that layer (size and sha256: the cache keeps
// the very bytes the log stores), and the others (a checkpoint's, a
// consolidation's, and those of layers a checkpoint folded, which the log
// no longer lists) against git's own trailing SHA-1; every pack index
// against its trailing SHA-1. With all false, only packs whose files
// changed since they were last verified (or that were never verified) are
// read; the others cost a stat.
func (c *Cache) verify(ctx context.Context, dir string, x *wal.Index, st *state, all bool) error {
	packDir := filepath.Join(dir, "objects", "pack")
	known := readVerified(dir)
	changed := false
	done := map[string]bool{}
	for _, p := range recordedPacks(st, x) {
		if done[p.name] {
			continue
		}
		done[p.name] = true
		stamps := map[string]stamp{}
		same := true
		for _, f := range packFileNames(p.name) {
			s, err := stampOf(filepath.Join(packDir, f))
			if err != nil {
				return fmt.Errorf("%s: %w", p.what, err)
			}
			stamps[f] = s
			if k, ok := known[f]; !ok || k != s {
				same = false
			}
		}
		if same && !all {
			continue
		}
		if err := verifyPack(ctx, packDir, p.name, p.want); err != nil {
			return fmt.Errorf("%s: %w", p.what, err)
		}
		for f, s := range stamps {
			known[f] = s
		}
		changed = true
	}
	if changed {
		if err := writeVerified(dir, known); err != nil {
			c.logger.Warn("recording verified packs failed", "dir", dir, "err", err)
		}
	}
	return nil
}

// recordedPack is one pack the state names, with the log's record of it
// when the log still has one.
type recordedPack struct {
	name string
	want *wal.Layer // nil: check the pack against its own checksum
	what string
}

func recordedPacks(st *state, x *wal.Index) []recordedPack {
	var out []recordedPack
	for _, p := range st.base.packs {
		out = append(out, recordedPack{name: p, what: fmt.Sprintf("pack through seq %d", st.base.seq)})
	}
	for i, l := range st.layers {
		if l.pack == "" {
			continue
		}
		seq := st.base.seq + uint64(i) + 1
		p := recordedPack{name: l.pack, what: fmt.Sprintf("layer seq %d", seq)}
		if x != nil && seq > x.CompactedThroughSeq {
			p.want = &x.Layers[seq-x.CompactedThroughSeq-1]
		}
		out = append(out, p)
	}
	return out
}

// trustNew records the packs of st that the verified list does not name
// at all: packs this cache has just installed from the log (whose bytes
// were checked against the log's sha256 on the way in) or adopted from
// the push that committed them.
func (c *Cache) trustNew(dir string, st *state) { c.trust(dir, st, readVerified(dir)) }

// trustAll records every pack of st as it is now.
func (c *Cache) trustAll(dir string, st *state) { c.trust(dir, st, map[string]stamp{}) }

func (c *Cache) trust(dir string, st *state, known map[string]stamp) {
	changed := false
	for _, p := range recordedPacks(st, nil) {
		for _, f := range packFileNames(p.name) {
			if _, ok := known[f]; ok {
				continue
			}
			s, err := stampOf(filepath.Join(dir, "objects", "pack", f))
			if err != nil {
				continue
			}
			known[f], changed = s, true
		}
	}
	if changed {
		if err := writeVerified(dir, known); err != nil && c.logger != nil {
			c.logger.Warn("recording verified packs failed", "dir", dir, "err", err)
		}
	}
}

// verifyPack compares one cached pack with its layer in the log, or, when
// want is nil, with the SHA-1 git writes at its end.
func verifyPack(ctx context.Context, packDir, name string, want *wal.Layer) error {
	base := filepath.Join(packDir, "pack-"+name)
	if want != nil {
		sum, n, err := hashFile(ctx, base+".pack", sha256.New())
		if err != nil {
			return err
		}
		if n != want.Size || !bytes.Equal(sum, want.SHA256[:]) {
			return fmt.Errorf("pack-%s.pack differs from the log's pack (sha256 or size)", name)
		}
	} else {
		pf, err := os.Open(base + ".pack")
		if err != nil {
			return err
		}
		t := &trailerWriter{h: sha1.New()}
		_, err = io.Copy(t, ctxReader{ctx, pf})
		pf.Close()
		if err != nil {
			return err
		}
		if len(t.tail) != sha1.Size || !bytes.Equal(t.h.Sum(nil), t.tail) {
			return fmt.Errorf("pack-%s.pack fails its checksum", name)
		}
	}
	f, err := os.Open(base + ".idx")
	if err != nil {
		return err
	}
	defer f.Close()
	t := &trailerWriter{h: sha1.New()}
	if _, err := io.Copy(t, ctxReader{ctx, f}); err != nil {
		return err
	}
	if len(t.tail) != sha1.Size || !bytes.Equal(t.h.Sum(nil), t.tail) {
		return fmt.Errorf("pack-%s.idx fails its checksum", name)
	}
	return nil
}

// hashFile returns h over the file's bytes, and its size.
func hashFile(ctx context.Context, path string, h hash.Hash) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	n, err := io.Copy(h, ctxReader{ctx, f})
	if err != nil {
		return nil, n, err
	}
	return h.Sum(nil), n, nil
}

// ctxReader stops a long read when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
