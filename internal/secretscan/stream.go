package secretscan

import (
	"bytes"
	"fmt"
	"io"
)

// Streams: content read from a reader rather than held, a Git LFS object
// of any size (docs/adr/0130-lfs-push-protection.md, "Bounds"). It is
// scanned in windows of at most Window bytes, so memory is one window
// whatever the object's size. Windows end at a line end where there is
// one, and each starts with the last whole lines of the one before, up
// to windowOverlap bytes, so that a secret spanning lines across a
// boundary (a PEM private key) lies whole in some window; candidates
// that lie wholly in that overlap were reported by the window before
// and are dropped. Line numbers are the object's.

// DefaultWindow is the window of a stream scan.
const DefaultWindow = 4 << 20

// windowOverlap is how much of a window the next one scans again: more
// than any multi-line secret the rules match (a 4096-bit PEM key is
// about 3.3 KiB) and the decoder's context.
const windowOverlap = 64 << 10

// streamScan is what scanStream read and found.
type streamScan struct {
	cands  []candidate
	bytes  int64
	binary bool // a NUL in the first window: git's "binary"
}

// scanStream scans r in windows of window bytes (DefaultWindow if 0;
// at least 4*windowOverlap) leaving out the path rules of skip. With
// stopBinary, it stops after a first window that is binary, as a scan
// that skips binary content does.
func (e *Engine) scanStream(r io.Reader, window int, skip uint64, stopBinary bool) (streamScan, error) {
	if window <= 0 {
		window = DefaultWindow
	}
	window = max(window, 4*windowOverlap)
	var (
		out      streamScan
		buf      = make([]byte, window)
		carry    int // bytes at buf[:carry] from the window before
		carried  int // whole lines in those bytes, reported already
		lineBase int // lines of the object before buf[0]
		colBase  int // bytes of buf[0]'s line before buf[0] (a long line cut)
		first    = true
	)
	for {
		n, err := io.ReadFull(r, buf[carry:])
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return streamScan{}, fmt.Errorf("secretscan: read: %w", err)
		}
		out.bytes += int64(n)
		end := carry + n
		w := buf[:end]
		if first {
			first = false
			out.binary = isBinary(w)
			if out.binary && stopBinary {
				return out, nil
			}
		}
		if end == carry && carry == 0 {
			return out, nil // empty
		}
		// Cut at the last line end past the carry, unless the line that
		// follows is so long that the next window could not hold it.
		cut := end
		if !eof {
			if i := bytes.LastIndexByte(w[carry:], '\n'); i >= 0 && end-(carry+i+1) <= window/2 {
				cut = carry + i + 1
			}
		}
		for _, c := range e.scanSkipping(w[:cut], skip) {
			if c.endLine <= carried {
				continue // wholly in the overlap: the window before has it
			}
			if !eof || cut != end {
				c.noEOL = false // not the object's last line
			}
			if c.startLine == 1 {
				c.startCol += colBase
			}
			if c.endLine == 1 {
				c.endCol += colBase
			}
			c.startLine += lineBase
			c.endLine += lineBase
			out.cands = append(out.cands, c)
		}
		if eof && cut == end {
			return out, nil
		}
		// The next window starts at the first line start within the
		// last windowOverlap bytes before the cut, and carries the rest
		// of the window.
		start := max(0, cut-windowOverlap)
		if start > 0 {
			if i := bytes.IndexByte(w[start-1:cut], '\n'); i >= 0 {
				start += i // w[start-1+i] is the newline; the line after it
			}
		}
		if ls := bytes.LastIndexByte(w[:start], '\n') + 1; ls > 0 {
			colBase = start - ls
		} else {
			colBase += start
		}
		lineBase += bytes.Count(w[:start], []byte{'\n'})
		carried = bytes.Count(w[start:cut], []byte{'\n'})
		carry = copy(buf, w[start:end])
	}
}

// ScanStream scans an object read from r, of any size, as the file at
// path, in bounded memory (windows of DefaultWindow bytes): a Git LFS
// object too large to hold. Path-only rules match path; binary content
// is skipped when Options.SkipBinary says so. Options.MaxBlobSize does
// not apply: memory is bounded by the window, not the object. The
// findings carry no blob or commit: the caller places them.
func (e *Engine) ScanStream(path string, r io.Reader) ([]Finding, Stats, error) {
	var st Stats
	var here []*candidate
	for _, ri := range e.pathOut {
		if e.cfg.Rules[ri].Path.MatchString(path) {
			here = append(here, &candidate{rule: ri, pathOnly: true})
		}
	}
	ss, err := e.scanStream(r, e.opts.Window, 0, e.opts.SkipBinary)
	if err != nil {
		return nil, st, err
	}
	st.Blobs++
	st.Bytes += ss.bytes
	switch {
	case ss.binary && e.opts.SkipBinary:
		st.BinarySkipped++
		return e.findingsAt(here, commitInfo{}, "", path), st, nil
	case ss.binary:
		st.BinaryScanned++
	}
	st.BlobsScanned++
	st.BytesScanned += ss.bytes
	for i := range ss.cands {
		here = append(here, &ss.cands[i])
	}
	return e.findingsAt(here, commitInfo{}, "", path), st, nil
}

// ScanLFSStream is ScanLFS for an object read from r, of any size, in
// bounded memory (ScanStream): its candidates join the pointer blob id's,
// with the object's line numbers. It returns what it scanned, which
// s.Stats counts too.
func (s *BlobScan) ScanLFSStream(id string, r io.Reader) (Stats, error) {
	e := s.e
	ss, err := e.scanStream(r, e.opts.Window, s.skipRules[id], e.opts.SkipBinary)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	st.Blobs++
	st.Bytes += ss.bytes
	switch {
	case ss.binary && e.opts.SkipBinary:
		st.BinarySkipped++
	default:
		if ss.binary {
			st.BinaryScanned++
		}
		st.BlobsScanned++
		st.BytesScanned += ss.bytes
		if len(ss.cands) > 0 {
			s.blobs[id] = append(s.blobs[id], ss.cands...)
		}
	}
	s.Stats.Add(st)
	return st, nil
}

// HasPathRule reports whether a rule restricted to paths applies at p: a
// file there is one the rules single out (a key store, a credentials
// file), which callers that must order their work read first.
func (e *Engine) HasPathRule(p string) bool {
	for i := range e.cfg.Rules {
		if r := e.cfg.Rules[i].Path; r != nil && r.MatchString(p) {
			return true
		}
	}
	return false
}

// Merge adds the candidates of o, a scan of more objects with the same
// engine (a push's previous versions of the files it changes), to s, so
// that attribution compares each file with its previous version with
// the candidates of both, a Git LFS object's included (ScanLFS on either
// scan), without scanning s's blobs again. o's pointer blobs join s's.
func (s *BlobScan) Merge(o *BlobScan) {
	for id, cs := range o.blobs {
		s.blobs[id] = append(s.blobs[id], cs...)
	}
	for id, bits := range o.skipRules {
		if _, ok := s.skipRules[id]; !ok {
			if s.skipRules == nil {
				s.skipRules = map[string]uint64{}
			}
			s.skipRules[id] = bits
		}
	}
	for id, oid := range o.pointers {
		if s.pointers == nil {
			s.pointers = map[string]string{}
		}
		s.pointers[id] = oid
	}
	s.Stats.Add(o.Stats)
}
