package secretscan

import (
	"bytes"
	"hash/maphash"
	"slices"
	"sort"
	"strings"

	"github.com/ghost-scm/ghost/internal/secretscan/codec"
)

// Scanning only what changed (docs/adr/0120-scanner-speed.md). In a
// whole-history scan most blobs are a file's next version: every diff
// entry that adds the blob replaces the same blob, its base. A match of
// the new blob that touches none of the lines the base lacks is one the
// base has on the same line, which attribution would drop as not added
// (candKey); so such a blob is matched only around those lines, and only
// the candidates touching them are kept. The keyword pass still reads
// the whole blob, and a window around a keyword hit that reaches a
// changed line is matched whole, so a private key of which only middle
// lines changed is still found (beyond gitleaks, which reads the added
// lines only).
//
// The reader needs the base's lines when the blob comes: the object list
// is ordered so that every such blob comes after its base (chainOrder),
// and the reader keeps the line hashes of a base until the last blob
// based on it has been read (lineSets).

// regionPlan is, per position of the object list, the position of the
// object's base (-1: scanned whole) and how many later objects have it
// as their base; the reader fills runs, how the lines of each blob
// scanned against its base map to the base's.
type regionPlan struct {
	base  []int32
	kids  []int32
	runs  [][]lineRun
	lines []int32 // lines of each blob scanned against its base
}

// lineRun says that lines b..b+n-1 of a blob (0-based) are lines
// a..a+n-1 of its base.
type lineRun struct{ a, b, n int32 }

// chainOrder reorders objs (in pack order) so that each object with a
// base in bases comes after it: the roots — objects with no base among
// objs — in pack order, each followed by the objects derived from it,
// depth first. An object on a cycle of bases (a file reverted to an
// earlier version) that no root reaches is scanned whole.
func chainOrder(objs []scanObj, bases map[oidKey]oidKey) ([]scanObj, *regionPlan) {
	idx := make(map[oidKey]int, len(objs))
	for i, o := range objs {
		idx[o.key] = i
	}
	children := make(map[int][]int)
	child := make([]bool, len(objs))
	for i, o := range objs {
		if b, ok := bases[o.key]; ok {
			if j, ok := idx[b]; ok && j != i {
				children[j] = append(children[j], i)
				child[i] = true
			}
		}
	}
	out := make([]scanObj, 0, len(objs))
	plan := &regionPlan{base: make([]int32, 0, len(objs)), kids: make([]int32, 0, len(objs)),
		runs: make([][]lineRun, len(objs)), lines: make([]int32, len(objs))}
	done := make([]bool, len(objs))
	var visit func(i int, base int32)
	visit = func(i int, base int32) {
		done[i] = true
		pos := int32(len(out))
		out = append(out, objs[i])
		plan.base = append(plan.base, base)
		plan.kids = append(plan.kids, 0)
		for _, c := range children[i] {
			if !done[c] {
				plan.kids[pos]++
				visit(c, pos)
			}
		}
	}
	for i := range objs {
		if !child[i] && !done[i] {
			visit(i, -1)
		}
	}
	for i := range objs { // cycles
		if !done[i] {
			visit(i, -1)
		}
	}
	return out, plan
}

// lineSet holds, per hash of a line (with its newline, if it has one),
// the numbers (0-based) of the blob's lines with that hash, in order.
type lineSet map[uint64][]int32

// lineSets is the reader's side of a plan: the line sets of the bases
// still to be used.
type lineSets struct {
	plan *regionPlan
	seed maphash.Seed
	sets map[int]lineSet
}

func newLineSets(plan *regionPlan) *lineSets {
	return &lineSets{plan: plan, seed: maphash.MakeSeed(), sets: make(map[int]lineSet)}
}

// next takes the blob at position pos of the list and returns the spans
// of its lines that its base lacks, and whether it is to be scanned only
// there (false: whole). It records how its other lines map to the
// base's in the plan.
func (l *lineSets) next(pos int, data []byte) ([]span, bool) {
	if l.plan == nil || pos >= len(l.plan.base) {
		return nil, false
	}
	var base lineSet
	region := false
	if b := int(l.plan.base[pos]); b >= 0 {
		base, region = l.sets[b], true
		if l.plan.kids[b]--; l.plan.kids[b] <= 0 {
			delete(l.sets, b)
		}
	}
	keep := l.plan.kids[pos] > 0
	var own lineSet
	if keep {
		own = make(lineSet)
		l.sets[pos] = own
	}
	if !region && !keep {
		return nil, false
	}
	changed, runs := changedLines(data, base, own, l.seed, region)
	l.plan.runs[pos] = runs
	l.plan.lines[pos] = int32(bytes.Count(data, []byte{'\n'}))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		l.plan.lines[pos]++
	}
	return changed, region
}

// changedLines returns the spans of data's lines (each with its newline)
// that base lacks, counting repeats: a line base holds twice is matched
// twice, in order. The other lines are matched to the base's, returned
// as runs. It adds every line to own when own is not nil; with region
// false it does only that.
func changedLines(data []byte, base, own lineSet, seed maphash.Seed, region bool) ([]span, []lineRun) {
	var (
		out  []span
		runs []lineRun
		used map[uint64]int32
		line int32
	)
	for start := 0; start < len(data); line++ {
		end := len(data)
		if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		h := maphash.Bytes(seed, data[start:end])
		if own != nil {
			own[h] = append(own[h], line)
		}
		if region {
			if as := base[h]; used[h] < int32(len(as)) {
				if used == nil {
					used = make(map[uint64]int32)
				}
				a := as[used[h]]
				used[h]++
				if k := len(runs); k > 0 && runs[k-1].a+runs[k-1].n == a && runs[k-1].b+runs[k-1].n == line {
					runs[k-1].n++
				} else {
					runs = append(runs, lineRun{a, line, 1})
				}
			} else if k := len(out); k > 0 && out[k-1].end == start {
				out[k-1].end = end
			} else {
				out = append(out, span{start, end})
			}
		}
		start = end
	}
	return out, runs
}

// inherit completes the candidates of each blob scanned against its
// base with the base's candidates on the lines it kept unchanged, at
// their new line numbers: every blob's candidates are then those a
// whole scan finds, and attribution drops what a diff did not add as
// it does after whole scans. Bases come before the blobs derived from
// them, so a base's own list is complete when it is used.
//
// A candidate is inherited only where the scan of the blob could not
// have found it: its lines are more than its rule's line reach (the
// newlines a match can hold) from every changed line (scanChanged keeps
// the candidates within that reach); a rule whose reach is beyond
// maxZoneLines is never inherited, since its candidates are all found.
func (s *BlobScan) inherit(objs []scanObj, plan *regionPlan) {
	for pos, o := range objs {
		b := plan.base[pos]
		if b < 0 {
			continue
		}
		runs := plan.runs[pos]
		plan.runs[pos] = nil
		from := s.blobs[hexOID(objs[b].key)]
		id := hexOID(o.key)
		cs := s.blobs[id]
		n := len(cs)
		for _, c := range from {
			reach := s.e.lineReach[c.rule]
			if reach > maxZoneLines && len(c.tags) > 0 {
				reach = decodeZone // decoded: found only near changed lines
			}
			if c.pathOnly || reach > maxZoneLines {
				continue
			}
			if d, ok := shiftLines(runs, int32(c.startLine-1), int32(c.endLine-1)); ok &&
				allKept(runs, int32(c.startLine-1)+d-int32(reach), int32(c.endLine-1)+d+int32(reach), plan.lines[pos]) {
				c.startLine += int(d)
				c.endLine += int(d)
				cs = append(cs, c)
			}
		}
		if len(cs) == n {
			continue
		}
		// Attribution drops equal candidates in order: keep a whole
		// scan's order, by place.
		slices.SortStableFunc(cs, func(x, y candidate) int {
			if x.startLine != y.startLine {
				return x.startLine - y.startLine
			}
			return x.startCol - y.startCol
		})
		s.blobs[id] = cs
	}
}

// allKept reports whether every line from lo to hi (clipped to the
// blob's lines) is in a run: none of them changed.
func allKept(runs []lineRun, lo, hi, lines int32) bool {
	lo, hi = max(lo, 0), min(hi, lines-1)
	i := sort.Search(len(runs), func(i int) bool { return runs[i].b+runs[i].n > lo })
	for ; lo <= hi; i++ {
		if i >= len(runs) || runs[i].b > lo {
			return false
		}
		lo = runs[i].b + runs[i].n
	}
	return true
}

// shiftLines reports whether base lines a0..a1 are all kept, in one run,
// and by how much their numbers shift.
func shiftLines(runs []lineRun, a0, a1 int32) (int32, bool) {
	i, _ := slices.BinarySearchFunc(runs, a0, func(r lineRun, a int32) int {
		switch {
		case r.a+r.n <= a:
			return -1
		case r.a > a:
			return 1
		}
		return 0
	})
	// runs are in the blob's line order; base lines rise with them
	// within a run but not across runs, so search linearly when the
	// binary search misses.
	if i < len(runs) && runs[i].a <= a0 && a1 < runs[i].a+runs[i].n {
		return runs[i].b - runs[i].a, true
	}
	for _, r := range runs {
		if r.a <= a0 && a1 < r.a+r.n {
			return r.b - r.a, true
		}
	}
	return 0, false
}

// touches reports whether [start, end) meets one of the sorted spans.
func touches(spans []span, start, end int) bool {
	end = max(end, start+1)
	lo, hi := 0, len(spans)
	for lo < hi { // the first span ending after start
		m := (lo + hi) / 2
		if spans[m].end <= start {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(spans) && spans[lo].start < end
}

// regionMatcher is a Matcher that can match only around spans: zone
// gives each rule's spans (nil: the whole content).
type regionMatcher interface {
	matchRegions(content []byte, omit func(rule int) bool, zone func(rule int) []span, emit func(rule, start, end int))
}

// maxZoneLines is the largest line reach of a rule scanned only near
// changed lines; a rule whose matches may hold more newlines (a private
// key) runs over the whole blob, in its keyword windows.
const maxZoneLines = 64

// zones are, per rule, the spans of a blob where a candidate is kept:
// its changed lines widened by the rule's line reach.
type zones struct {
	e       *Engine
	content []byte
	changed []span
	byReach map[int][]span
}

// of returns rule r's zone, nil for the whole blob.
func (z *zones) of(r int) []span {
	n := z.e.lineReach[r]
	switch {
	case n > maxZoneLines:
		return nil
	case n == 0:
		return z.changed
	}
	sp, ok := z.byReach[n]
	if !ok {
		sp = append([]span{}, widenLines(z.content, z.changed, n)...)
		z.byReach[n] = sp
	}
	return sp
}

// keep reports whether a candidate of rule r at [start, end) is in r's
// zone.
func (z *zones) keep(r, start, end int) bool {
	sp := z.of(r)
	return sp == nil || touches(sp, start, end)
}

// decodeZone is how many lines from a changed line a decoded candidate
// of a rule with no zone (a private key) is kept: decoding runs only
// near changed lines, so beyond that the base's are inherited.
const decodeZone = decodeContext + 1

// keepDecoded is keep for a decoded candidate.
func (z *zones) keepDecoded(r, start, end int) bool {
	if z.e.lineReach[r] <= maxZoneLines {
		return z.keep(r, start, end)
	}
	sp, ok := z.byReach[-1]
	if !ok {
		sp = widenLines(z.content, z.changed, decodeZone)
		z.byReach[-1] = sp
	}
	return touches(sp, start, end)
}

// scanChanged is scanSkipping for a blob scanned only where it differs
// from its base: changed are the spans of its lines the base lacks, and
// only the candidates touching them are returned.
func (e *Engine) scanChanged(content []byte, skip uint64, changed []span) []candidate {
	if changed == nil {
		changed = []span{} // nothing changed; a nil zone is the whole blob
	}
	omit := func(r int) bool { return e.pathBit[r]&skip != 0 }
	// full matches a whole text (a decoded one); m only around changed.
	full := func(content []byte, emit func(rule, start, end int)) {
		e.m.Match(content, func(r, start, end int) {
			if !omit(r) {
				emit(r, start, end)
			}
		})
	}
	if sm, ok := e.m.(subsetMatcher); ok {
		full = func(content []byte, emit func(rule, start, end int)) { sm.matchSubset(content, omit, emit) }
	}
	z := &zones{e: e, content: content, changed: changed, byReach: make(map[int][]span)}
	m := full
	if rm, ok := e.m.(regionMatcher); ok {
		m = func(content []byte, emit func(rule, start, end int)) { rm.matchRegions(content, omit, z.of, emit) }
	}
	var out []candidate
	li := &lineIndex{content: content}
	m(content, func(ri, start, end int) {
		secret := strings.Trim(string(content[start:end]), "\n")
		if !z.keep(ri, start, start+len(secret)) {
			return
		}
		if c, ok := e.candidate(content, li, ri, start, start+len(secret), secret, "", nil); ok {
			out = append(out, c)
		}
	})
	if e.opts.MaxDecodeDepth > 0 {
		// Decoding only near the changed lines: a decoded match is
		// placed on its encoded text, which must touch them, and it
		// reaches at most decodeContext lines from it (matchNear).
		for _, r := range widenLines(content, changed, decodeContext+1+e.maxReach) {
			text := content[r.start:r.end]
			if !codec.MayHoldEncoded(text) {
				continue
			}
			out = append(out, e.scanDecodedAt(full, content, li, r, z.keepDecoded)...)
		}
	}
	markNoEOL(out, content)
	return out
}

// widenLines widens each span by n lines each way and merges those that
// then touch.
func widenLines(content []byte, spans []span, n int) []span {
	var out []span
	for _, s := range spans {
		st, en := s.start, s.end
		for k := 0; k < n && st > 0; k++ {
			st = bytes.LastIndexByte(content[:st-1], '\n') + 1
		}
		for k := 0; k < n && en < len(content); k++ {
			i := bytes.IndexByte(content[en:], '\n')
			if i < 0 {
				en = len(content)
				break
			}
			en += i + 1
		}
		if k := len(out); k > 0 && st <= out[k-1].end {
			out[k-1].end = max(out[k-1].end, en)
			continue
		}
		out = append(out, span{st, en})
	}
	return out
}
