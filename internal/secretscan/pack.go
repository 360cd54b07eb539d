package secretscan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A scan of a whole history reads blobs in pack order
// (docs/adr/0036-scanner-on-real-histories.md): git cat-file does not
// expose where each object sits, so this file reads the pack indexes.
// Nothing here is needed for correctness: an object this reader cannot
// place (a loose object, an unknown index version) is read last.

// packLoc is where an object's representation starts: a pack (an index
// into packSet.packs) and the offset of its header in the pack file.
type packLoc struct {
	pack int32
	off  uint64
}

// noLoc is the location of an object in no pack this reader knows.
var noLoc = packLoc{pack: -1}

// packSet is the packs of a repository's object directories.
type packSet struct {
	packs []packFile
}

type packFile struct {
	idx, pack string // paths
	f         *os.File
}

// objectDirs returns the object directories git reads for repo: its own
// (or GIT_OBJECT_DIRECTORY's) and, recursively, the alternates named by
// GIT_ALTERNATE_OBJECT_DIRECTORIES and objects/info/alternates files.
func objectDirs(ctx context.Context, repo Repo) ([]string, error) {
	args := []string{"rev-parse", "--path-format=absolute", "--git-path", "objects"}
	cmd := repo.command(ctx, args...)
	out, err := cmd.Output()
	if err != nil {
		return nil, gitError(cmd, args, err)
	}
	main := strings.TrimSpace(string(out))
	var dirs []string
	seen := make(map[string]bool)
	var add func(dir string, depth int)
	add = func(dir string, depth int) {
		dir = filepath.Clean(dir)
		if seen[dir] || depth > 5 { // git stops at 5 levels of alternates too
			return
		}
		seen[dir] = true
		dirs = append(dirs, dir)
		data, err := os.ReadFile(filepath.Join(dir, "info", "alternates"))
		if err != nil {
			return
		}
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			if !filepath.IsAbs(line) {
				line = filepath.Join(dir, line)
			}
			add(line, depth+1)
		}
	}
	add(main, 0)
	for _, kv := range repo.Env {
		if v, ok := strings.CutPrefix(kv, "GIT_ALTERNATE_OBJECT_DIRECTORIES="); ok {
			for _, d := range filepath.SplitList(v) {
				if d != "" {
					add(d, 1)
				}
			}
		}
	}
	return dirs, nil
}

// openPacks lists the packs of dirs. Pack files are opened on first use.
func openPacks(dirs []string) *packSet {
	ps := &packSet{}
	for _, d := range dirs {
		idxs, _ := filepath.Glob(filepath.Join(d, "pack", "*.idx"))
		slices.Sort(idxs)
		for _, idx := range idxs {
			pack := strings.TrimSuffix(idx, ".idx") + ".pack"
			if _, err := os.Stat(pack); err == nil {
				ps.packs = append(ps.packs, packFile{idx: idx, pack: pack})
			}
		}
	}
	return ps
}

// Close closes the pack files opened.
func (ps *packSet) Close() {
	for i := range ps.packs {
		if f := ps.packs[i].f; f != nil {
			f.Close()
			ps.packs[i].f = nil
		}
	}
}

// errIdx is an index file this reader does not understand.
var errIdx = errors.New("unsupported pack index")

// locate finds the pack location of every id in ids (raw object ids,
// all of one length, sorted): locs[i] is ids[i]'s, or noLoc. Each index
// is read once, sequentially, merged with ids; memory is O(len(ids)).
// An index that cannot be read is skipped (its objects stay noLoc).
func (ps *packSet) locate(ids [][]byte, locs []packLoc) {
	for i := range locs {
		locs[i] = noLoc
	}
	if len(ids) == 0 {
		return
	}
	for p := range ps.packs {
		ps.locateIn(int32(p), ids, locs) // an unreadable index locates nothing
	}
}

// locateIn is locate for one pack index (version 2: magic, version,
// fanout[256], names[n], crc32[n], offsets32[n], offsets64[...]).
func (ps *packSet) locateIn(p int32, ids [][]byte, locs []packLoc) error {
	f, err := os.Open(ps.packs[p].idx)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var hdr [8 + 256*4]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return err
	}
	if !bytes.Equal(hdr[:4], []byte{0xff, 't', 'O', 'c'}) || binary.BigEndian.Uint32(hdr[4:8]) != 2 {
		return errIdx
	}
	n := int64(binary.BigEndian.Uint32(hdr[8+255*4:]))
	hashLen := int64(len(ids[0]))
	// Size check: header, names, crc32s, offsets32, then offsets64 and
	// two trailing hashes; a mismatch means another hash length.
	if min := 8 + 256*4 + n*(hashLen+8) + 2*hashLen; st.Size() < min || (st.Size()-min)%8 != 0 {
		return errIdx
	}
	// Merge the sorted names with the sorted ids.
	type hit struct {
		pos int64 // index in the pack's table
		id  int   // index in ids
	}
	var hits []hit
	br := bufio.NewReaderSize(f, 64<<10)
	name := make([]byte, hashLen)
	j := 0
	for i := int64(0); i < n && j < len(ids); i++ {
		if _, err := io.ReadFull(br, name); err != nil {
			return err
		}
		for j < len(ids) && bytes.Compare(ids[j], name) < 0 {
			j++
		}
		if j < len(ids) && bytes.Equal(ids[j], name) {
			if locs[j].pack < 0 {
				hits = append(hits, hit{i, j})
			}
			j++
		}
	}
	if len(hits) == 0 {
		return nil
	}
	// Offsets: read the 32-bit table at the hits (ascending positions).
	base32 := 8 + 256*4 + n*(hashLen+4)
	base64 := base32 + n*4
	var b [8]byte
	for _, h := range hits {
		if _, err := f.ReadAt(b[:4], base32+4*h.pos); err != nil {
			return err
		}
		v := binary.BigEndian.Uint32(b[:4])
		off := uint64(v)
		if v&0x80000000 != 0 {
			if _, err := f.ReadAt(b[:8], base64+8*int64(v&0x7fffffff)); err != nil {
				return err
			}
			off = binary.BigEndian.Uint64(b[:8])
		}
		locs[h.id] = packLoc{pack: p, off: off}
	}
	return nil
}
