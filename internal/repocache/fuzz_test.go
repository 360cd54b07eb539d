package repocache

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzReadState feeds arbitrary ghost-state files to readState. A refused
// file is reported as unreadable (the cache is then rebuilt); an accepted
// one holds seq layers with valid ids and pack names, and writing it back
// reads back the same state.
func FuzzReadState(f *testing.F) {
	f.Add([]byte("ghost-cache 1\nseq 0\n"))
	f.Add([]byte("ghost-cache 1\nseq 2\nlayer 01J0000000000000000000000A " + strings.Repeat("ab", 20) + "\nlayer 01J0000000000000000000000B -\n"))
	f.Add([]byte("ghost-cache 1\nseq 1\nlayer 01J0000000000000000000000A " + strings.Repeat("0f", 32) + "\n"))
	f.Add([]byte("ghost-cache 1\nseq 1\n"))
	f.Add([]byte("ghost-cache 2\n"))
	f.Add([]byte("ghost-cache 1\nseq 3\nbase 2 - " + strings.Repeat("01", 32) + " " + strings.Repeat("ab", 20) + "\nlayer 01J0000000000000000000000B -\n"))
	f.Add([]byte("ghost-cache 1\nseq 4\nbase 4 01J0000000000000000000000A - " + strings.Repeat("ab", 20) + " " + strings.Repeat("cd", 20) + "\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, stateFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := readState(dir)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cache state unreadable: ") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if st.seq != st.base.seq+uint64(len(st.layers)) || st.base.seq > st.seq {
			t.Fatalf("seq %d with %d layers", st.seq, len(st.layers))
		}
		for _, p := range st.base.packs {
			if !isHex(p) {
				t.Fatalf("bad base pack name %q accepted", p)
			}
		}
		for _, l := range st.layers {
			if l.pack != "" && !isHex(l.pack) {
				t.Fatalf("bad pack name %q accepted", l.pack)
			}
		}
		out := t.TempDir()
		if err := writeState(out, st); err != nil {
			t.Fatal(err)
		}
		again, err := readState(out)
		if err != nil {
			t.Fatalf("written state unreadable: %v", err)
		}
		if !reflect.DeepEqual(st, again) {
			t.Fatalf("state changed on rewrite:\n%+v\n%+v", st, again)
		}
	})
}

// FuzzParsePackName checks the reading of index-pack's output line.
func FuzzParsePackName(f *testing.F) {
	f.Add("pack\t" + strings.Repeat("ab", 20) + "\n")
	f.Add("keep\t" + strings.Repeat("cd", 32) + "\n")
	f.Add("pack " + strings.Repeat("ab", 20))
	f.Add("")
	f.Fuzz(func(t *testing.T, out string) {
		h, err := parsePackName(out)
		if err != nil {
			if h != "" {
				t.Fatalf("name %q returned with an error", h)
			}
			return
		}
		if !isHex(h) || (len(h) != 40 && len(h) != 64) || !strings.Contains(out, "\t"+h) {
			t.Fatalf("%q: bad pack name %q accepted", out, h)
		}
	})
}

// packFiles builds a structurally valid idx (v1 or v2), pack and rev for
// n objects; the contents behind the headers are zeros.
func packFiles(n uint32, hashLen int, v2 bool) (idx, pack, rev []byte) {
	sum := bytes.Repeat([]byte{0x5a}, hashLen)
	if v2 {
		idx = append([]byte{0xff, 't', 'O', 'c'}, 0, 0, 0, 2)
	}
	for i := 0; i < 256; i++ {
		idx = binary.BigEndian.AppendUint32(idx, n)
	}
	per := hashLen + 4
	if v2 {
		per = hashLen + 8
	}
	idx = append(idx, make([]byte, int(n)*per)...)
	idx = append(idx, sum...)
	idx = append(idx, make([]byte, hashLen)...)

	pack = append([]byte("PACK"), 0, 0, 0, 2)
	pack = binary.BigEndian.AppendUint32(pack, n)
	pack = append(pack, make([]byte, 3*int(n))...)
	pack = append(pack, sum...)

	rev = append([]byte("RIDX"), 0, 0, 0, 1, 0, 0, 0, 1)
	rev = append(rev, make([]byte, 4*int(n))...)
	rev = append(rev, sum...)
	rev = append(rev, make([]byte, hashLen)...)
	return idx, pack, rev
}

// FuzzCheckPack writes arbitrary idx, pack and rev files and runs the
// structural check on them: it must answer nil or an error, never panic,
// and it may only pass a pack whose header and trailer match its index.
func FuzzCheckPack(f *testing.F) {
	for _, n := range []uint32{0, 1, 3} {
		for _, v2 := range []bool{true, false} {
			idx, pack, rev := packFiles(n, 20, v2)
			f.Add(idx, pack, rev, false, true)
			f.Add(idx, pack, []byte(nil), false, false)
		}
		idx, pack, rev := packFiles(n, 32, true)
		f.Add(idx, pack, rev, true, true)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, idx, pack, rev []byte, sha256, withRev bool) {
		name := strings.Repeat("ab", 20)
		if sha256 {
			name = strings.Repeat("ab", 32)
		}
		hashLen := len(name) / 2
		base := filepath.Join(dir, "pack-"+name)
		for _, p := range []string{".idx", ".pack", ".rev"} {
			os.Remove(base + p)
		}
		if err := os.WriteFile(base+".idx", idx, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(base+".pack", pack, 0o644); err != nil {
			t.Fatal(err)
		}
		if withRev {
			if err := os.WriteFile(base+".rev", rev, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := checkPack(dir, name); err != nil {
			return
		}
		if len(pack) < 12+hashLen || string(pack[:4]) != "PACK" || len(idx) < 2*hashLen ||
			!bytes.Equal(pack[len(pack)-hashLen:], idx[len(idx)-2*hashLen:len(idx)-hashLen]) {
			t.Fatal("pack passed that does not match its index")
		}
		if withRev && (len(rev) < 12+2*hashLen || string(rev[:4]) != "RIDX" ||
			!bytes.Equal(rev[len(rev)-2*hashLen:len(rev)-hashLen], pack[len(pack)-hashLen:])) {
			t.Fatal("reverse index passed that does not match its pack")
		}
	})
}

// FuzzTrailerWriter checks the checksum split a stored pack index is
// verified with: whatever the write sizes, the writer keeps exactly the
// last 20 bytes (all of them when fewer) and hashes everything before.
func FuzzTrailerWriter(f *testing.F) {
	f.Add([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x00"+strings.Repeat("z", 20)), []byte{3, 0, 17})
	f.Add([]byte("short"), []byte{1})
	f.Add([]byte{}, []byte{})
	f.Add(bytes.Repeat([]byte{7}, 100), []byte{40, 20, 19, 1})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		w := &trailerWriter{h: sha1.New()}
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(sizes) {
				n = min(n, int(sizes[i]))
			}
			if got, err := w.Write(rest[:n]); got != n || err != nil {
				t.Fatalf("Write = %d, %v; want %d", got, err, n)
			}
			rest = rest[n:]
		}
		cut := max(len(data)-sha1.Size, 0)
		if !bytes.Equal(w.tail, data[cut:]) {
			t.Fatalf("tail %x, want %x", w.tail, data[cut:])
		}
		if want := sha1.Sum(data[:cut]); !bytes.Equal(w.h.Sum(nil), want[:]) {
			t.Fatal("hash does not cover exactly the bytes before the trailer")
		}
	})
}
