package secretscan

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// A whole-history scan (Engine.ScanRevs) reads the history's diffs
// before any blob: one git log --raw over every commit, merges against
// their first parent, which lists every blob a commit adds and every
// path it is added at (docs/adr/0036-scanner-on-real-histories.md). From
// it the scan knows which blobs appear only at paths the global
// allowlist excludes (never read), which path-restricted rules can apply
// to a blob (the others are not run on it), and the log is kept in a
// temporary file for attribution, which would otherwise run it again.

// oidKey is an object id in binary: SHA-1's 20 bytes or SHA-256's 32,
// and the length in the last byte.
type oidKey [33]byte

func keyOf(id string) (oidKey, bool) {
	var k oidKey
	if len(id) != 40 && len(id) != 64 {
		return k, false
	}
	if _, err := hex.Decode(k[:], []byte(id)); err != nil {
		return k, false
	}
	k[32] = byte(len(id) / 2)
	return k, true
}

// raw is the id's bytes.
func (k *oidKey) raw() []byte { return k[:k[32]] }

func hexOID(k oidKey) string { return hex.EncodeToString(k.raw()) }

// Blob states gathered from the history.
const (
	blobNeeded   = 1 << iota // at some path the global allowlist does not exclude
	blobMustScan             // reached some way the log does not show
)

// blobInfo is what the history says about one blob.
type blobInfo struct {
	flags uint8
	// pathRules has bit i set when e.pathRules[i] applies at some path
	// of the blob; pathOnly likewise for e.pathOut.
	pathRules, pathOnly uint64
	path                string // one path, for the object list
	// base is the blob that every diff entry adding this one replaces,
	// when baseState is baseOne: the blob is then scanned only where it
	// differs from base (docs/adr/0120-scanner-speed.md).
	base      oidKey
	baseState uint8
}

// Base states of a blob (blobInfo.baseState).
const (
	baseUnset = iota // no entry seen yet
	baseOne          // every entry replaces the same blob
	baseNone         // some entry adds it from nothing, from another blob, or as a type change
)

// noteBase records that an entry adds blob id replacing src (ok false:
// from nothing — a new file, a type change, a submodule).
func (h *logState) noteBase(id, src oidKey, ok bool) {
	b := h.blobs[id]
	switch {
	case b == nil:
	case !ok:
		b.baseState = baseNone
	case b.baseState == baseUnset:
		b.base, b.baseState = src, baseOne
	case b.baseState == baseOne && b.base != src:
		b.baseState = baseNone
	}
}

// pathVerdict is what a path means for the rules.
type pathVerdict struct {
	allowed             bool // excluded by a global allowlist, whatever the commit
	pathRules, pathOnly uint64
}

// logState is the outcome of the log pass.
type logState struct {
	log   *os.File // the raw log, for attribution (unlinked)
	blobs map[oidKey]*blobInfo
}

// logFormat is the commit header of the log attribution reads: hash,
// parents, author, email, date, message.
const logFormat = "--format=%x01%H%x02%P%x02%an%x02%ae%x02%aI%x02%B%x03"

// logArgs is the git log of a whole history: every commit's diff, merges
// against their first parent, every status but deletion. Attribution
// replays its two passes from it (AttributeAll).
func logArgs(revs []string) []string {
	args := []string{"-c", "log.showSignature=false", "log", "--full-history", "-z", "--raw", "--no-abbrev", "--no-color",
		"--diff-merges=first-parent", "--diff-filter=d", logFormat}
	return append(args, revs...)
}

// maxPathCache bounds the verdicts remembered per distinct path.
const maxPathCache = 1 << 16

// readHistory runs the log pass over revs, keeping its output in a
// temporary file and the state of every blob it names.
func (e *Engine) readHistory(ctx context.Context, repo Repo, revs []string) (*logState, error) {
	f, err := os.CreateTemp("", "ghost-log-*")
	if err != nil {
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	os.Remove(f.Name()) // the open file lives on; nothing is left behind
	h := &logState{log: f, blobs: make(map[oidKey]*blobInfo)}
	args := logArgs(revs)
	cmd := repo.packCommand(ctx, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("secretscan: %w", err)
	}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("secretscan: start git log: %w", err)
	}
	w := bufio.NewWriterSize(f, 256<<10)
	perr := e.readEntries(bufio.NewReaderSize(io.TeeReader(out, w), 256<<10), h)
	if perr != nil {
		cmd.Process.Kill()
	}
	io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if perr == nil {
		perr = w.Flush()
	}
	if perr == nil && werr != nil {
		perr = gitError(cmd, args, werr)
	}
	if perr != nil {
		f.Close()
		return nil, perr
	}
	return h, nil
}

// readEntries reads the raw entries of the log and records each added
// blob's paths.
func (e *Engine) readEntries(br *bufio.Reader, h *logState) error {
	cache := make(map[string]pathVerdict)
	var (
		dst, src oidKey
		hasSrc   bool // the entry replaces a blob of the same type
		want     int  // paths still to read for the current entry
		skip     bool
	)
	for {
		tok, err := br.ReadString(0)
		if err == io.EOF && tok == "" {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("secretscan: read git log: %w", err)
		}
		tok = strings.TrimSuffix(tok, "\x00")
		switch {
		case want > 0:
			want--
			if want == 0 && !skip {
				e.addPath(h, dst, tok, cache)
				h.noteBase(dst, src, hasSrc)
			}
		default:
			tok = strings.TrimLeft(tok, "\n")
			if !strings.HasPrefix(tok, ":") {
				break // a commit header
			}
			meta := strings.Fields(tok[1:])
			if len(meta) != 5 {
				return fmt.Errorf("secretscan: git log: unexpected raw entry %q", tok)
			}
			want = 1
			if s := meta[4]; s[0] == 'R' || s[0] == 'C' {
				want = 2
			}
			var ok bool
			dst, ok = keyOf(meta[3])
			skip = !ok || meta[1] == "160000" || meta[3] == zeroOID
			// A blob replacing a file's (not a symlink's or a
			// submodule's) blob, not as a type change.
			src, hasSrc = keyOf(meta[2])
			hasSrc = hasSrc && meta[2] != zeroOID && meta[0] != "160000" && meta[0] != "120000" && meta[4][0] != 'T'
		}
		if err == io.EOF {
			return nil
		}
	}
}

// addPath records that blob id is added at path.
func (e *Engine) addPath(h *logState, id oidKey, path string, cache map[string]pathVerdict) {
	v, ok := cache[path]
	if !ok {
		v = e.verdict(path)
		if len(cache) >= maxPathCache {
			clear(cache)
		}
		cache[path] = v
	}
	b := h.blobs[id]
	if b == nil {
		b = &blobInfo{path: path}
		h.blobs[id] = b
	}
	if !v.allowed {
		b.flags |= blobNeeded
		b.pathRules |= v.pathRules
		b.pathOnly |= v.pathOnly
	}
}

// verdict decides what path means for the rules: whether a global
// allowlist excludes it on its own (a path list in an OR allowlist, or
// an AND allowlist of paths alone; the config file itself), and which
// path-restricted rules apply there.
func (e *Engine) verdict(path string) pathVerdict {
	var v pathVerdict
	if e.cfg.Path != "" && path == e.cfg.Path {
		v.allowed = true
		return v
	}
	for _, a := range e.cfg.Allowlists {
		if a.Paths == nil || !a.pathAllowed(path) {
			continue
		}
		if !a.MatchAnd || len(a.Commits) == 0 && !a.hasContentChecks() {
			v.allowed = true
			return v
		}
	}
	for i, r := range e.pathRules {
		if e.cfg.Rules[r].Path.MatchString(path) {
			v.pathRules |= 1 << i
		}
	}
	for i, r := range e.pathOut {
		if i < 64 && e.cfg.Rules[r].Path.MatchString(path) {
			v.pathOnly |= 1 << i
		}
	}
	return v
}

// sortedKeys returns the keys of m in order.
func sortedKeys(m map[oidKey]*blobInfo) []oidKey {
	keys := make([]oidKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b oidKey) int { return strings.Compare(string(a[:]), string(b[:])) })
	return keys
}
