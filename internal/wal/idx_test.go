package wal

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// idxHeader builds the start of a version 2 pack index whose fanout
// counts n objects, spread over the first bytes 0..n-1.
func idxHeader(n uint32) []byte {
	b := append([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}, make([]byte, 256*4)...)
	for i := range 255 {
		binary.BigEndian.PutUint32(b[8+4*i:], min(uint32(i+1), n))
	}
	binary.BigEndian.PutUint32(b[8+4*255:], n)
	return b
}

// TestIdxObjects: the count is the fanout's last entry; anything but a
// version 2 index's header is corrupt, never a count.
func TestIdxObjects(t *testing.T) {
	for _, n := range []uint32{0, 1, 300, 1 << 31} {
		if got, err := idxObjects("k", idxHeader(n)); err != nil || got != int64(n) {
			t.Errorf("idxObjects(%d objects) = %d, %v", n, got, err)
		}
	}
	v1 := idxHeader(5)
	v1[7] = 1
	dec := idxHeader(300)
	binary.BigEndian.PutUint32(dec[8+4*255:], 2)
	for name, b := range map[string][]byte{
		"empty":     nil,
		"short":     idxHeader(5)[:idxHeaderLen-1],
		"version 1": v1,
		"pack":      append([]byte("PACK"), idxHeader(5)[4:]...),
		"decreases": dec,
	} {
		var ce *CorruptError
		if _, err := idxObjects("k", b); !errors.As(err, &ce) {
			t.Errorf("%s: err = %v, want a *CorruptError", name, err)
		}
	}
}

// TestIdxObjectsOfGit: the count read from an index git wrote is its
// object count.
func TestIdxObjectsOfGit(t *testing.T) {
	dir := t.TempDir()
	var in strings.Builder
	for i := range 7 {
		in.WriteString(strings.Repeat("x", i) + "\n")
	}
	base := filepath.Join(dir, "p")
	// Seven blobs through hash-object, then a pack of them.
	git := func(stdin string, args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	git("", "init", "-q", "--bare", ".")
	var ids []string
	for _, body := range strings.SplitAfter(in.String(), "\n")[:7] {
		ids = append(ids, git(body, "hash-object", "-w", "--stdin"))
	}
	name := git(strings.Join(ids, "\n")+"\n", "pack-objects", "-q", base)
	b, err := os.ReadFile(base + "-" + name + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := idxObjects("k", b[:idxHeaderLen]); err != nil || got != 7 {
		t.Fatalf("idxObjects = %d, %v; want 7", got, err)
	}
}

// FuzzIdxObjects: any bytes give a count or a *CorruptError, never a
// panic, and a count never exceeds what a fanout can say.
func FuzzIdxObjects(f *testing.F) {
	f.Add(idxHeader(3))
	f.Add([]byte("PACK"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := idxObjects("k", b)
		var ce *CorruptError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("err %v is no *CorruptError", err)
		}
		if n < 0 || n > 1<<32-1 {
			t.Fatalf("count %d", n)
		}
	})
}
