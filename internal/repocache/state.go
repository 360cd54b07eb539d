package repocache

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"

	"github.com/ghost-scm/ghost/internal/wal"
)

func isHex(s string) bool { return wal.IsObjectID(s) }

// state is what the cache has applied: a base (the objects of every seq
// through base.seq, in base.packs), then the layers after it in seq
// order, with the pack each produced. It lives in <repo>/ghost-state.
type state struct {
	seq    uint64
	base   stateBase
	layers []stateLayer // seqs base.seq+1 .. seq
}

// stateBase is what replaced the first layers: a checkpoint that was
// installed, or the packs a consolidation left (docs/design.md §5.6).
type stateBase struct {
	seq uint64
	// last is the log's layer at seq, when seq was a layer's (zero when
	// it is a checkpoint's seq or unknown); it is checked against the log
	// while the log still lists that layer.
	last ulid.ULID
	// checkpoint is the sha256 of the checkpoint installed at seq (zero
	// when the base did not come from one).
	checkpoint [32]byte
	packs      []string
}

type stateLayer struct {
	id   ulid.ULID
	pack string // "" when the layer carried no objects
}

const stateFile = "ghost-state"

const stateMagic = "ghost-cache 1"

func readState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("no cache state: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	bad := func(why string) (*state, error) { return nil, fmt.Errorf("cache state unreadable: %s", why) }
	if len(lines) < 2 || lines[0] != stateMagic {
		return bad("bad magic")
	}
	n, ok := strings.CutPrefix(lines[1], "seq ")
	if !ok {
		return bad("no seq")
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return bad("bad seq")
	}
	st := &state{seq: seq}
	lines = lines[2:]
	if len(lines) > 0 && strings.HasPrefix(lines[0], "base ") {
		b, err := parseBase(lines[0])
		if err != nil {
			return bad(err.Error())
		}
		st.base = b
		lines = lines[1:]
	}
	if st.base.seq > seq || seq-st.base.seq != uint64(len(lines)) {
		return bad("seq does not match the layer list")
	}
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "layer" {
			return bad("bad layer line")
		}
		id, err := ulid.ParseStrict(f[1])
		if err != nil {
			return bad("bad layer id")
		}
		sl := stateLayer{id: id}
		if f[2] != "-" {
			if !isHex(f[2]) {
				return bad("bad pack name")
			}
			sl.pack = f[2]
		}
		st.layers = append(st.layers, sl)
	}
	return st, nil
}

// parseBase reads "base <seq> <last ULID|-> <checkpoint sha256|-> <pack>...".
func parseBase(line string) (stateBase, error) {
	f := strings.Fields(line)
	if len(f) < 4 {
		return stateBase{}, errors.New("short base line")
	}
	var b stateBase
	var err error
	if b.seq, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return stateBase{}, errors.New("bad base seq")
	}
	if f[2] != "-" {
		if b.last, err = ulid.ParseStrict(f[2]); err != nil {
			return stateBase{}, errors.New("bad base layer id")
		}
	}
	if f[3] != "-" {
		raw, err := hex.DecodeString(f[3])
		if err != nil || len(raw) != 32 {
			return stateBase{}, errors.New("bad base checkpoint")
		}
		copy(b.checkpoint[:], raw)
	}
	for _, p := range f[4:] {
		if !isHex(p) {
			return stateBase{}, errors.New("bad base pack name")
		}
		b.packs = append(b.packs, p)
	}
	return b, nil
}

// writeState replaces the state file atomically (write, then rename).
func writeState(dir string, st *state) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nseq %d\n", stateMagic, st.seq)
	if bs := st.base; bs.seq > 0 || len(bs.packs) > 0 || bs.last != (ulid.ULID{}) || bs.checkpoint != ([32]byte{}) {
		last, ck := "-", "-"
		if bs.last != (ulid.ULID{}) {
			last = bs.last.String()
		}
		if bs.checkpoint != ([32]byte{}) {
			ck = hex.EncodeToString(bs.checkpoint[:])
		}
		fmt.Fprintf(&b, "base %d %s %s", bs.seq, last, ck)
		for _, p := range bs.packs {
			b.WriteString(" " + p)
		}
		b.WriteString("\n")
	}
	for _, l := range st.layers {
		p := l.pack
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(&b, "layer %s %s\n", l.id, p)
	}
	if err := replaceFile(filepath.Join(dir, stateFile), b.String()); err != nil {
		return fmt.Errorf("write cache state: %w", err)
	}
	return nil
}

// replaceFile replaces the file at path by one holding data, atomically:
// it writes path+".tmp", then renames it over path.
func replaceFile(path, data string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
