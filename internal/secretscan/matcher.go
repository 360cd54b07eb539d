package secretscan

import (
	"bytes"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/coregx/ahocorasick"
)

// Matcher finds the raw regexp matches of a rule set in one blob. It is the
// seam for a faster backend (RE2 sets, Vectorscan): everything after the
// raw match — secret group, entropy, allowlists — is backend-independent
// (docs/adr/0030-secret-scanning-engine.md).
type Matcher interface {
	// Match calls emit once for every non-overlapping leftmost match of
	// every rule in content, as byte offsets [start, end) of the whole
	// regexp match. rule indexes the rule slice the matcher was built from.
	// Match is safe for concurrent use.
	Match(content []byte, emit func(rule, start, end int))
}

// Window sizes around a keyword hit (docs/adr/0030). Every default rule's
// keyword is a literal of its regexp, so a match containing a hit at
// [p, q) lies within [p-L, q+L] for the regexp's maximum match length L;
// these caps apply when L is unbounded or larger.
const (
	// windowBefore caps how far before a keyword a match may start: the
	// rules put at most an identifier (generic-api-key: 50 bytes) before it.
	windowBefore = 4 << 10
	// windowAfter caps how far after a keyword a match may end: 64 KiB
	// holds a PEM private key of 16384 bits (about 12.5 KiB) with room.
	windowAfter = 64 << 10
	// lineSnap is how far a window is widened to reach whole lines, so
	// that ^, $ and \b see the same context as in a whole-blob scan.
	lineSnap = 4 << 10
	// acChunk is the unit of the keyword pass: content is lower-cased a
	// chunk at a time into a reused buffer, so the pass allocates O(1).
	acChunk = 256 << 10
)

// KeywordMatcher is the default Matcher: one Aho–Corasick pass over the
// lower-cased blob finds every keyword of every rule, then each triggered
// rule's regexp runs only in windows around its keywords' hits. Rules
// without keywords run over the whole blob.
type KeywordMatcher struct {
	rules     []*Rule
	ac        *ahocorasick.Automaton
	maxKW     int
	kwRules   [][]int  // keyword index -> rule indexes
	bounds    []bounds // per rule
	noKeyword []int    // rules with a regexp and no keyword
	// whole marks the rules whose matches need not contain a keyword:
	// once a keyword appears anywhere in a blob they run over all of it,
	// as gitleaks runs every triggered rule over its whole fragment.
	whole []bool
	// anchors holds, per rule, the check a keyword hit must pass before
	// the rule's window around it is matched (nil: every hit opens one).
	anchors []*anchorCheck
	kws     []string // keyword index -> keyword
	// reach bounds, per rule, a whole match: its length and newlines.
	reach []bounds
	pool  sync.Pool
}

type matchScratch struct {
	lower []byte
	wins  [][]span // per rule
	hit   []int    // rules with at least one window, in first-hit order
}

type span struct{ start, end int }

// NewKeywordMatcher builds the two-stage matcher for rules.
func NewKeywordMatcher(rules []*Rule) (*KeywordMatcher, error) {
	m := &KeywordMatcher{rules: rules, bounds: make([]bounds, len(rules)), whole: make([]bool, len(rules)),
		anchors: make([]*anchorCheck, len(rules)), reach: make([]bounds, len(rules))}
	kwIndex := make(map[string]int)
	var kws []string
	for i, r := range rules {
		if r.Regex == nil {
			continue
		}
		m.bounds[i] = ruleBounds(r.Regex.String(), r.Keywords)
		m.reach[i] = matchReach(r.Regex.String())
		m.whole[i] = len(r.Keywords) > 0 && !matchHoldsKeyword(r.Regex.String(), r.Keywords)
		if len(r.Keywords) == 0 {
			m.noKeyword = append(m.noKeyword, i)
			continue
		}
		if !m.whole[i] {
			m.anchors[i] = newAnchorCheck(r.Regex.String(), r.Keywords)
		}
		for _, k := range r.Keywords {
			if k == "" {
				continue
			}
			j, ok := kwIndex[k]
			if !ok {
				j = len(kws)
				kwIndex[k] = j
				kws = append(kws, k)
				m.kwRules = append(m.kwRules, nil)
				m.maxKW = max(m.maxKW, len(k))
			}
			if n := len(m.kwRules[j]); n == 0 || m.kwRules[j][n-1] != i {
				m.kwRules[j] = append(m.kwRules[j], i)
			}
		}
	}
	m.kws = kws
	if len(kws) > 0 {
		ac, err := ahocorasick.NewBuilder().AddStrings(kws).Build()
		if err != nil {
			return nil, fmt.Errorf("secretscan: build keyword automaton: %w", err)
		}
		m.ac = ac
	}
	m.pool.New = func() any { return &matchScratch{wins: make([][]span, len(rules))} }
	return m, nil
}

// KeywordlessRules reports how many rules run over whole blobs because
// they have no keyword.
func (m *KeywordMatcher) KeywordlessRules() int { return len(m.noKeyword) }

// WholeBlobRules returns the ids of the rules whose matches need not
// contain one of their keywords (sourcegraph-access-token's 40 hex
// digits, facebook-access-token's digits): a keyword anywhere in a blob
// runs them over the whole blob, not in windows around the keyword.
func (m *KeywordMatcher) WholeBlobRules() []string {
	var out []string
	for i, w := range m.whole {
		if w {
			out = append(out, m.rules[i].ID)
		}
	}
	return out
}

// Match implements Matcher.
func (m *KeywordMatcher) Match(content []byte, emit func(rule, start, end int)) {
	m.matchSubset(content, nil, emit)
}

// matchSubset is Match without the rules omit reports (nil: none).
func (m *KeywordMatcher) matchSubset(content []byte, omit func(rule int) bool, emit func(rule, start, end int)) {
	m.matchRegions(content, omit, nil, emit)
}

// matchRegions is matchSubset that, when zone is not nil, runs each
// rule's regexp only where a match can touch the rule's zone (sorted
// spans; nil: the whole content) (docs/adr/0120-scanner-speed.md): a
// keyword window that meets none is dropped, and a rule that runs
// without windows (no keyword, or a match that need not hold it) runs
// around the spans instead of over the whole blob. A match that touches
// no span may or may not be reported.
func (m *KeywordMatcher) matchRegions(content []byte, omit func(rule int) bool, zone func(rule int) []span, emit func(rule, start, end int)) {
	var around []span // scratch for the rules run around the spans
	only := func(r int) []span {
		if zone == nil {
			return nil
		}
		return zone(r)
	}
	for _, r := range m.noKeyword {
		if omit != nil && omit(r) {
			continue
		}
		if z := only(r); z != nil {
			around = m.aroundSpans(content, r, z, around[:0])
			m.findIn(content, r, around, emit)
			continue
		}
		for _, loc := range m.rules[r].Regex.FindAllIndex(content, -1) {
			emit(r, loc[0], loc[1])
		}
	}
	if m.ac == nil {
		return
	}
	s := m.pool.Get().(*matchScratch)
	defer m.pool.Put(s)
	m.keywordPass(content, s, zone)
	for _, r := range s.hit {
		wins := s.wins[r]
		if omit != nil && omit(r) {
			s.wins[r] = wins[:0]
			continue
		}
		z := only(r)
		switch {
		case z == nil:
		case m.whole[r]:
			around = m.aroundSpans(content, r, z, around[:0])
			wins = append(wins[:0], around...)
		default:
			kept := wins[:0]
			for _, w := range wins {
				if touches(z, w.start, w.end) {
					kept = append(kept, w)
				}
			}
			wins = kept
		}
		m.findIn(content, r, wins, emit)
		s.wins[r] = wins[:0]
	}
	s.hit = s.hit[:0]
}

// findIn runs rule r's regexp in the windows wins (sorted), widened to
// whole lines, dropping a match that overlaps one of the previous window.
func (m *KeywordMatcher) findIn(content []byte, r int, wins []span, emit func(rule, start, end int)) {
	re := m.rules[r].Regex
	last := -1
	for _, w := range snapMerge(content, wins) {
		for _, loc := range re.FindAllIndex(content[w.start:w.end], -1) {
			st, en := w.start+loc[0], w.start+loc[1]
			if st < last { // overlaps a match of the previous window
				continue
			}
			last = en
			emit(r, st, en)
		}
	}
}

// aroundSpans appends to dst the windows that hold every match of rule
// r touching one of the spans: each widened by the rule's whole match
// length and newlines (m.reach).
func (m *KeywordMatcher) aroundSpans(content []byte, r int, spans []span, dst []span) []span {
	for _, sp := range spans {
		w := m.reach[r].window(content, sp.start, sp.end)
		if n := len(dst); n > 0 && w.start <= dst[n-1].end {
			dst[n-1].end = max(dst[n-1].end, w.end)
			continue
		}
		dst = append(dst, w)
	}
	return dst
}

// keywordPass records, per rule, the merged windows around its keyword
// hits. The blob is lower-cased chunk by chunk (ASCII only: keywords are
// compared as gitleaks does after strings.ToLower, and its keywords are
// ASCII); consecutive chunks overlap by maxKW-1 bytes so a keyword across
// a chunk border is seen once. With zone set, a hit whose rule's window
// cannot reach the rule's zone is dropped before its anchor is checked.
func (m *KeywordMatcher) keywordPass(content []byte, s *matchScratch, zone func(rule int) []span) {
	overlap := m.maxKW - 1
	for off := 0; off < len(content); {
		end := min(off+acChunk, len(content))
		chunk := content[off:end]
		s.lower = asciiLower(s.lower[:0], chunk)
		for _, h := range m.ac.FindAllOverlapping(s.lower) {
			if off > 0 && h.End <= overlap { // seen in the previous chunk
				continue
			}
			p, q := off+h.Start, off+h.End
			for _, r := range m.kwRules[h.PatternID] {
				ws := s.wins[r]
				if m.whole[r] {
					if len(ws) == 0 {
						s.hit = append(s.hit, r)
						s.wins[r] = append(ws, span{0, len(content)})
					}
					continue
				}
				if zone != nil {
					if z := zone(r); z != nil {
						if w := m.bounds[r].window(content, p, q); !touches(z, w.start, w.end) {
							continue
						}
					}
				}
				var w span
				if a := m.anchors[r]; a != nil {
					var ok bool
					if w, ok = a.window(content, m.kws[h.PatternID], p); !ok {
						continue
					}
				} else {
					w = m.bounds[r].window(content, p, q)
				}
				if len(ws) == 0 {
					s.hit = append(s.hit, r)
				}
				if n := len(ws); n > 0 && w.start <= ws[n-1].end {
					ws[n-1].start = min(ws[n-1].start, w.start)
					ws[n-1].end = max(ws[n-1].end, w.end)
				} else {
					ws = append(ws, w)
				}
				s.wins[r] = ws
			}
		}
		if end == len(content) {
			break
		}
		off = end - overlap
	}
}

// snapMerge widens each window to whole lines (by at most lineSnap bytes
// each way) and merges windows that then touch, in place.
func snapMerge(content []byte, ws []span) []span {
	out := ws[:0]
	for _, w := range ws {
		lo := max(0, w.start-lineSnap)
		if i := bytes.LastIndexByte(content[lo:w.start], '\n'); i >= 0 {
			w.start = lo + i + 1
		} else {
			w.start = lo
		}
		hi := min(len(content), w.end+lineSnap)
		if i := bytes.IndexByte(content[w.end:hi], '\n'); i >= 0 {
			w.end += i
		} else {
			w.end = hi
		}
		if n := len(out); n > 0 && w.start <= out[n-1].end {
			out[n-1].end = max(out[n-1].end, w.end)
			continue
		}
		out = append(out, w)
	}
	return out
}

func asciiLower(dst, src []byte) []byte {
	dst = append(dst, src...)
	for i, c := range dst {
		if 'A' <= c && c <= 'Z' {
			dst[i] = c + 'a' - 'A'
		}
	}
	return dst
}

// bounds say how far from a keyword hit a match containing it can reach,
// in bytes and in newlines, before and after the hit.
type bounds struct {
	before, after     int // bytes, capped at windowBefore/windowAfter
	nlBefore, nlAfter int // newlines, or unbounded
}

// window returns the span around the keyword hit [p, q) that holds every
// match containing the hit: the byte bounds, narrowed to whole lines when
// the match can only span a few (most rules match within one line).
func (b bounds) window(content []byte, p, q int) span {
	w := span{max(0, p-b.before), min(len(content), q+b.after)}
	if b.nlBefore < unbounded {
		i := p
		for n := 0; n <= b.nlBefore && i > w.start; n++ {
			k := bytes.LastIndexByte(content[w.start:i], '\n')
			if k < 0 {
				break
			}
			i = w.start + k
			if n == b.nlBefore {
				w.start = i + 1
			}
		}
	}
	if b.nlAfter < unbounded {
		j := q
		for n := 0; n <= b.nlAfter && j < w.end; n++ {
			k := bytes.IndexByte(content[j:w.end], '\n')
			if k < 0 {
				break
			}
			j += k
			if n == b.nlAfter {
				w.end = j
				break
			}
			j++
		}
	}
	return w
}

// ruleBounds computes a rule's bounds. When the regexp is a concatenation
// with an "anchor" — a part that is a finite set of literals each holding
// one of the rule's keywords — a match's keyword hit lies in the anchor,
// so only what precedes the anchor can come before the hit and only what
// follows it after; otherwise the whole match length applies both ways.
// (A hit outside the anchor is harmless: the anchor's own hit is also
// found, and its window holds the match.)
func ruleBounds(expr string, keywords []string) bounds {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return bounds{windowBefore, windowAfter, unbounded, unbounded}
	}
	re = re.Simplify()
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	l, nl := maxLen(re), maxNewlines(re)
	b := bounds{min(l, windowBefore), min(l, windowAfter), nl, nl}
	if re.Op != syntax.OpConcat {
		return b
	}
	for k, sub := range re.Sub {
		if maxLen(sub) > 256 || !allHoldKeyword(literalSet(sub, 64), keywords) {
			continue
		}
		var bl, bn, al, an int
		for _, s := range re.Sub[:k+1] {
			bl, bn = min(unbounded, bl+maxLen(s)), min(unbounded, bn+maxNewlines(s))
		}
		for _, s := range re.Sub[k:] {
			al, an = min(unbounded, al+maxLen(s)), min(unbounded, an+maxNewlines(s))
		}
		return bounds{min(bl, windowBefore), min(al, windowAfter), bn, an}
	}
	return b
}

// matchHoldsKeyword reports whether every match of expr contains one of
// keywords (compared lower-cased, as gitleaks compares them): only then
// do windows around keyword hits hold every match. It looks for a part
// every match must pass through — a literal run, or an alternation of
// them — whose every string holds a keyword; when it cannot prove it,
// it answers false and the rule runs over whole blobs, which is always
// correct.
func matchHoldsKeyword(expr string, keywords []string) bool {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return false
	}
	return holdsKeyword(re.Simplify(), keywords)
}

// litInfo is what holdsKeyword knows of a regexp: the finite set of
// strings it matches (exact, nil if unknown or over setLimit), sets that
// every match starts and ends with (prefix, suffix: {""} when nothing is
// known), and whether every match provably holds a keyword (must).
type litInfo struct {
	exact, prefix, suffix []string
	must                  bool
}

// setLimit bounds the literal sets holdsKeyword builds.
const setLimit = 64

func holdsKeyword(re *syntax.Regexp, keywords []string) bool {
	return analyze(re, keywords).must
}

func analyze(re *syntax.Regexp, kws []string) litInfo {
	if set := literalSet(re, setLimit); set != nil {
		return litInfo{exact: set, prefix: set, suffix: set, must: allHoldKeyword(set, kws)}
	}
	unknown := litInfo{prefix: []string{""}, suffix: []string{""}}
	switch re.Op {
	case syntax.OpCapture:
		return analyze(re.Sub[0], kws)
	case syntax.OpPlus:
		in := analyze(re.Sub[0], kws)
		return litInfo{prefix: in.prefix, suffix: in.suffix, must: in.must}
	case syntax.OpRepeat:
		if re.Min < 1 {
			return unknown
		}
		in := analyze(re.Sub[0], kws)
		return litInfo{prefix: in.prefix, suffix: in.suffix, must: in.must}
	case syntax.OpAlternate:
		out := litInfo{must: true}
		for _, sub := range re.Sub {
			in := analyze(sub, kws)
			out.must = out.must && in.must
			out.prefix = shrink(append(out.prefix, in.prefix...), true)
			out.suffix = shrink(append(out.suffix, in.suffix...), false)
		}
		return out
	case syntax.OpConcat:
		acc := analyze(re.Sub[0], kws)
		for _, sub := range re.Sub[1:] {
			in := analyze(sub, kws)
			// Every match passes through acc's suffix followed by in's
			// prefix: a keyword may straddle the junction.
			junction := cross(acc.suffix, in.prefix)
			next := litInfo{must: acc.must || in.must || allHoldKeyword(junction, kws)}
			if acc.exact != nil && in.exact != nil {
				next.exact = cross(acc.exact, in.exact)
			}
			next.prefix = acc.prefix
			if acc.exact != nil {
				next.prefix = crossShrink(acc.exact, in.prefix, true)
			}
			next.suffix = in.suffix
			if in.exact != nil {
				next.suffix = crossShrink(acc.suffix, in.exact, false)
			}
			acc = next
		}
		return acc
	}
	return unknown
}

// cross is every a+b, or nil when there would be more than setLimit.
func cross(as, bs []string) []string {
	if as == nil || bs == nil || len(as)*len(bs) > setLimit {
		return nil
	}
	out := make([]string, 0, len(as)*len(bs))
	for _, a := range as {
		for _, b := range bs {
			out = append(out, a+b)
		}
	}
	return out
}

// crossShrink is every a+b; when there would be more than setLimit, as
// alone (a prefix of every a+b) or bs alone (a suffix of every a+b).
func crossShrink(as, bs []string, prefix bool) []string {
	if out := cross(as, bs); out != nil {
		return out
	}
	if prefix {
		return as
	}
	return bs
}

// shrink deduplicates a set of prefixes (or suffixes) and, when it has
// more than setLimit strings, cuts them to the longest length at which
// at most setLimit remain: a prefix of a prefix is still one. At worst
// it is {""}, which says nothing.
func shrink(set []string, prefix bool) []string {
	cut := func(l int) []string {
		out := make([]string, 0, len(set))
		for _, s := range set {
			if len(s) > l {
				if prefix {
					s = s[:l]
				} else {
					s = s[len(s)-l:]
				}
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	longest := 0
	for _, s := range set {
		longest = max(longest, len(s))
	}
	if out := cut(longest); len(out) <= setLimit {
		return out
	}
	lo, hi := 0, longest // cut(lo) fits, cut(hi) does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if len(cut(mid)) <= setLimit {
			lo = mid
		} else {
			hi = mid
		}
	}
	return cut(lo)
}

func allHoldKeyword(set []string, keywords []string) bool {
	if len(set) == 0 {
		return false
	}
	for _, s := range set {
		ok := false
		for _, k := range keywords {
			if strings.Contains(s, k) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// literalSet returns the lower-cased strings re matches if it matches a
// finite set of at most limit literal strings, else nil.
func literalSet(re *syntax.Regexp, limit int) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}
	case syntax.OpCharClass:
		n := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			n += int(re.Rune[i+1]-re.Rune[i]) + 1
			if n > limit {
				return nil
			}
		}
		var out []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for r := re.Rune[i]; r <= re.Rune[i+1]; r++ {
				if s := strings.ToLower(string(r)); !slices.Contains(out, s) {
					out = append(out, s)
				}
			}
		}
		if len(out) > limit {
			return nil
		}
		return out
	case syntax.OpCapture:
		return literalSet(re.Sub[0], limit)
	case syntax.OpEmptyMatch:
		return []string{""}
	case syntax.OpQuest:
		s := literalSet(re.Sub[0], limit)
		if s == nil || len(s)+1 > limit {
			return nil
		}
		return append(s, "")
	case syntax.OpAlternate:
		var out []string
		for _, sub := range re.Sub {
			s := literalSet(sub, limit)
			if s == nil || len(out)+len(s) > limit {
				return nil
			}
			out = append(out, s...)
		}
		return out
	case syntax.OpConcat:
		sets := make([][]string, len(re.Sub))
		n := 1
		for i, sub := range re.Sub {
			sets[i] = literalSet(sub, limit)
			if n *= len(sets[i]); n == 0 || n > limit {
				return nil
			}
		}
		out := []string{""}
		for _, s := range sets {
			next := make([]string, 0, len(out)*len(s))
			for _, a := range out {
				for _, b := range s {
					next = append(next, a+b)
				}
			}
			out = next
		}
		return out
	}
	return nil
}

// maxNewlines bounds the newlines any match of re contains, or unbounded.
func maxNewlines(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if r == '\n' {
				n++
			}
		}
		return n
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return 1
			}
		}
		return 0
	case syntax.OpAnyChar:
		return 1
	case syntax.OpCapture, syntax.OpQuest:
		return maxNewlines(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		if maxNewlines(re.Sub[0]) > 0 {
			return unbounded
		}
		return 0
	case syntax.OpRepeat:
		n := maxNewlines(re.Sub[0])
		if n == 0 {
			return 0
		}
		if re.Max < 0 {
			return unbounded
		}
		return min(unbounded, re.Max*n)
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n = min(unbounded, n+maxNewlines(s))
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			n = max(n, maxNewlines(s))
		}
		return n
	default:
		return 0
	}
}

// unbounded stands for a regexp whose matches have no length limit.
const unbounded = 1 << 30

// maxMatchLen is an upper bound, in bytes, of the length of any match of
// expr, or unbounded.
func maxMatchLen(expr string) int {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return unbounded
	}
	return maxLen(re.Simplify())
}

func maxLen(re *syntax.Regexp) int {
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				n += 3 // k folds to U+212A KELVIN SIGN, 3 bytes
			} else {
				n += utf8.RuneLen(r)
			}
		}
		return n
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			return 0
		}
		return max(1, utf8.RuneLen(re.Rune[len(re.Rune)-1]))
	case syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest:
		return maxLen(re.Sub[0])
	case syntax.OpStar, syntax.OpPlus:
		return unbounded
	case syntax.OpRepeat:
		if re.Max < 0 {
			return unbounded
		}
		return min(unbounded, re.Max*maxLen(re.Sub[0]))
	case syntax.OpConcat:
		n := 0
		for _, s := range re.Sub {
			n = min(unbounded, n+maxLen(s))
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			n = max(n, maxLen(s))
		}
		return n
	default: // empty match, anchors, word boundaries
		return 0
	}
}

// anchorCheck is the test that a keyword hit of a rule must pass before
// the rule's regexp runs in a window around it
// (docs/adr/0120-scanner-speed.md). It applies to a rule whose regexp is
// a concatenation with an anchor: a part every match of which starts
// with one of a finite set of strings, each holding one of the rule's
// keywords (generic-api-key's access|auth|api|…|token, vault's hvs.|s.).
// A match containing the hit then passes through the anchor, starting a
// known distance before the hit, and from there the anchor and what
// follows it (the tail) match. A prefix of the tail (the gate: the
// parts that fit in maxGate bytes, the next one cut short) is cheap to
// try on the few dozen bytes after the hit, where Go's backtracker is
// fast, and most hits of "key" or "token" in code are not followed by
// an assignment of a long value; the whole regexp over the lines around
// the hit is what costs (generic-api-key's lazy [\w.-]{0,50}? keeps
// fifty NFA threads alive at every byte). The gate's longest match also
// bounds the window's end: what follows it is at most restLen bytes and
// restNL newlines long.
type anchorCheck struct {
	// offsets maps a keyword to the distances, in bytes, from where the
	// anchor may start to where the keyword is found in it.
	offsets map[string][]int
	// before bounds the bytes (and newlines) of a match before its anchor.
	before, nlBefore int
	// gate and gateCtx match a prefix of every match of the tail,
	// \A-anchored and leftmost-longest, at most gateLen bytes long;
	// gateCtx runs after one byte of context, (?s:.), so that \b and ^
	// at the anchor see the byte before it.
	gate, gateCtx *regexp.Regexp
	gateLen       int
	// restLen and restNL bound what a match holds after the gate's match:
	// bytes (capped at windowAfter) and newlines.
	restLen, restNL int
}

// maxGate bounds the length of what an anchor's gate matches.
const maxGate = 512

// newAnchorCheck builds the check of a rule, or returns nil when its
// regexp has no anchor.
func newAnchorCheck(expr string, keywords []string) *anchorCheck {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op != syntax.OpConcat {
		return nil
	}
	for k, sub := range re.Sub {
		prefixes := analyze(sub, keywords).prefix
		if !allHoldKeyword(prefixes, keywords) {
			continue
		}
		a := &anchorCheck{offsets: anchorOffsets(prefixes, keywords)}
		for _, s := range re.Sub[:k] {
			a.before = min(unbounded, a.before+maxLen(s))
			a.nlBefore = min(unbounded, a.nlBefore+maxNewlines(s))
		}
		a.before = min(a.before, windowBefore)
		// The gate: whole parts while they fit, then a cut of the next.
		gate := &syntax.Regexp{Op: syntax.OpConcat}
		j, n := k, 0
		for ; j < len(re.Sub) && n+maxLen(re.Sub[j]) <= maxGate; j++ {
			gate.Sub = append(gate.Sub, re.Sub[j])
			n += maxLen(re.Sub[j])
		}
		if j == k {
			return nil // the anchor alone is too long to try cheaply
		}
		if j < len(re.Sub) {
			if c := cutPrefix(re.Sub[j], maxGate-n); c != nil {
				gate.Sub = append(gate.Sub, c)
			}
		}
		for _, s := range re.Sub[j:] {
			a.restLen = min(unbounded, a.restLen+maxLen(s))
			a.restNL = min(unbounded, a.restNL+maxNewlines(s))
		}
		a.restLen = min(a.restLen, windowAfter)
		a.gateLen = maxLen(gate)
		if a.gate, err = regexp.Compile(`\A(?:` + gate.String() + `)`); err != nil {
			return nil
		}
		if a.gateCtx, err = regexp.Compile(`\A(?s:.)(?:` + gate.String() + `)`); err != nil {
			return nil
		}
		a.gate.Longest()
		a.gateCtx.Longest()
		return a
	}
	return nil
}

// anchorOffsets maps each keyword to the byte distances from the start
// of an anchor string (prefixes, lower-cased) to the keyword in it.
func anchorOffsets(prefixes, keywords []string) map[string][]int {
	out := make(map[string][]int)
	for _, kw := range keywords {
		var offs []int
		for _, l := range prefixes {
			for i := 0; ; {
				j := strings.Index(l[i:], kw)
				if j < 0 {
					break
				}
				o := i + j
				// A case-folded k or s before the keyword may be the
				// Kelvin sign (3 bytes) or the long s (2 bytes).
				extra := 2*strings.Count(l[:o], "k") + strings.Count(l[:o], "s")
				for d := o; d <= o+extra; d++ {
					if !slices.Contains(offs, d) {
						offs = append(offs, d)
					}
				}
				i = o + 1
			}
		}
		if len(offs) > 0 {
			out[kw] = offs
		}
	}
	return out
}

// cutPrefix returns a regexp of at most limit bytes (maxLen) that
// matches a prefix of every match of re: re itself when it fits; else
// x{n,m} and x+ cut to x{n} and x, an alternation cut branch by branch,
// a concatenation kept whole while it fits and cut at the first part
// that does not. nil when nothing fits.
func cutPrefix(re *syntax.Regexp, limit int) *syntax.Regexp {
	if maxLen(re) <= limit {
		return re
	}
	switch re.Op {
	case syntax.OpCapture:
		return cutPrefix(re.Sub[0], limit)
	case syntax.OpPlus:
		if maxLen(re.Sub[0]) <= limit {
			return re.Sub[0]
		}
	case syntax.OpRepeat:
		if l := maxLen(re.Sub[0]); re.Min > 0 && l < unbounded && re.Min*l <= limit {
			return &syntax.Regexp{Op: syntax.OpRepeat, Flags: re.Flags, Min: re.Min, Max: re.Min, Sub: re.Sub[:1]}
		}
	case syntax.OpAlternate:
		out := &syntax.Regexp{Op: syntax.OpAlternate, Flags: re.Flags}
		for _, sub := range re.Sub {
			c := cutPrefix(sub, limit)
			if c == nil {
				return nil
			}
			out.Sub = append(out.Sub, c)
		}
		return out
	case syntax.OpConcat:
		out := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags}
		n := 0
		for _, sub := range re.Sub {
			if l := maxLen(sub); n+l <= limit {
				out.Sub = append(out.Sub, sub)
				n += l
				continue
			}
			if c := cutPrefix(sub, limit-n); c != nil {
				out.Sub = append(out.Sub, c)
			}
			break
		}
		if len(out.Sub) == 0 {
			return nil
		}
		return out
	}
	return nil
}

// window returns the span that holds every match containing the hit of
// keyword kw at p, and false when no match can contain it.
func (a *anchorCheck) window(content []byte, kw string, p int) (span, bool) {
	w := span{start: -1}
	for _, o := range a.offsets[kw] {
		s := p - o
		if s < 0 {
			continue
		}
		// A few bytes past the gate's longest match let \b and $ see
		// the next character.
		end := min(len(content), s+a.gateLen+utf8.UTFMax)
		var n int
		if s == 0 {
			loc := a.gate.FindIndex(content[:end])
			if loc == nil {
				continue
			}
			n = loc[1]
		} else {
			loc := a.gateCtx.FindIndex(content[s-1 : end])
			if loc == nil {
				continue
			}
			n = loc[1] - 1
		}
		// The match ends at most restLen bytes and restNL newlines past
		// the gate's longest match.
		b := bounds{before: a.before, after: a.restLen, nlBefore: a.nlBefore, nlAfter: a.restNL}
		ws := b.window(content, s, s+n)
		if w.start < 0 {
			w = ws
			continue
		}
		w.start, w.end = min(w.start, ws.start), max(w.end, ws.end)
	}
	return w, w.start >= 0
}

// matchReach bounds every match of expr: its length (capped at
// windowBefore before a point and windowAfter after it) and newlines.
func matchReach(expr string) bounds {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return bounds{windowBefore, windowAfter, unbounded, unbounded}
	}
	re = re.Simplify()
	l, nl := maxLen(re), maxNewlines(re)
	return bounds{min(l, windowBefore), min(l, windowAfter), nl, nl}
}
