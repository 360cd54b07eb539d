package repocache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// checkPack makes the cheap structural checks git itself makes when it
// opens a pack (packfile.c: open_packed_git_1, load_idx), plus the same
// for the reverse index when there is one, so that a cache whose packs
// were truncated, overwritten or swapped is rebuilt instead of being
// served: once the refs already match the log, bringing a cache forward
// reads no object, and nothing else would notice.
//
// It reads a few bytes at both ends of each file (never the objects), so
// it is cheap enough to run for every layer on every materialization. It
// does not find damage inside a pack's object data; git reports that when
// it reads the object (a failed ref update then triggers a rebuild).
func checkPack(packDir, name string) error {
	hashLen := len(name) / 2 // 20 for SHA-1, 32 for SHA-256
	base := filepath.Join(packDir, "pack-"+name)

	n, packSum, err := checkIdx(base+".idx", hashLen)
	if err != nil {
		return err
	}

	p, err := os.Open(base + ".pack")
	if err != nil {
		return err
	}
	defer p.Close()
	fi, err := p.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < int64(12+hashLen) {
		return fmt.Errorf("%s: packfile too small (%d bytes)", p.Name(), fi.Size())
	}
	var hdr [12]byte
	if _, err := p.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	if string(hdr[:4]) != "PACK" {
		return fmt.Errorf("%s: not a packfile", p.Name())
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return fmt.Errorf("%s: packfile version %d", p.Name(), v)
	}
	if c := binary.BigEndian.Uint32(hdr[8:12]); c != n {
		return fmt.Errorf("%s: packfile has %d objects, its index %d", p.Name(), c, n)
	}
	trailer := make([]byte, hashLen)
	if _, err := p.ReadAt(trailer, fi.Size()-int64(hashLen)); err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	if !bytes.Equal(trailer, packSum) {
		return fmt.Errorf("%s: packfile does not match its index", p.Name())
	}

	if err := checkRev(base+".rev", hashLen, n, packSum); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// checkIdx validates a pack index's header and size and returns its
// object count and the pack checksum it records.
func checkIdx(path string, hashLen int) (uint32, []byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	size := fi.Size()
	var hdr [8]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return 0, nil, fmt.Errorf("%s: index file too small: %w", path, err)
	}
	v2 := bytes.Equal(hdr[:4], []byte{0xff, 't', 'O', 'c'})
	fanoutAt := int64(0)
	if v2 {
		if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 {
			return 0, nil, fmt.Errorf("%s: index file version %d", path, v)
		}
		fanoutAt = 8
	}
	var last [4]byte
	if _, err := f.ReadAt(last[:], fanoutAt+255*4); err != nil {
		return 0, nil, fmt.Errorf("%s: index file too small: %w", path, err)
	}
	n := binary.BigEndian.Uint32(last[:])
	var lo, hi int64
	if v2 {
		// names, CRCs, 4-byte offsets, then at most n-1 8-byte offsets.
		lo = 8 + 256*4 + int64(n)*int64(hashLen+8) + 2*int64(hashLen)
		hi = lo
		if n > 0 {
			hi += int64(n-1) * 8
		}
	} else {
		lo = 256*4 + int64(n)*int64(hashLen+4) + 2*int64(hashLen)
		hi = lo
	}
	if size < lo || size > hi {
		return 0, nil, fmt.Errorf("%s: wrong index file size %d for %d objects", path, size, n)
	}
	sum := make([]byte, hashLen)
	if _, err := f.ReadAt(sum, size-2*int64(hashLen)); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	return n, sum, nil
}

// checkRev validates a reverse index (pack-*.rev, written by git when
// pack.writeReverseIndex is set, and adopted from a push's quarantine).
func checkRev(path string, hashLen int, n uint32, packSum []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if want := 12 + 4*int64(n) + 2*int64(hashLen); fi.Size() != want {
		return fmt.Errorf("%s: reverse index is %d bytes, want %d", path, fi.Size(), want)
	}
	var hdr [8]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if string(hdr[:4]) != "RIDX" || binary.BigEndian.Uint32(hdr[4:8]) != 1 {
		return fmt.Errorf("%s: not a reverse index", path)
	}
	sum := make([]byte, hashLen)
	if _, err := f.ReadAt(sum, fi.Size()-2*int64(hashLen)); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !bytes.Equal(sum, packSum) {
		return fmt.Errorf("%s: reverse index does not match its pack", path)
	}
	return nil
}
