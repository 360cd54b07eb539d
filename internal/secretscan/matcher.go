package secretscan

import (
	"bytes"
	"fmt"
	"regexp/syntax"
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
	kwRules   [][]int // keyword index -> rule indexes
	before    []int   // per rule
	after     []int   // per rule
	noKeyword []int   // rules with a regexp and no keyword
	pool      sync.Pool
}

type matchScratch struct {
	lower []byte
	wins  [][]span // per rule
	hit   []int    // rules with at least one window, in first-hit order
}

type span struct{ start, end int }

// NewKeywordMatcher builds the two-stage matcher for rules.
func NewKeywordMatcher(rules []*Rule) (*KeywordMatcher, error) {
	m := &KeywordMatcher{rules: rules, before: make([]int, len(rules)), after: make([]int, len(rules))}
	kwIndex := make(map[string]int)
	var kws []string
	for i, r := range rules {
		if r.Regex == nil {
			continue
		}
		l := maxMatchLen(r.Regex.String())
		m.before[i], m.after[i] = min(l, windowBefore), min(l, windowAfter)
		if len(r.Keywords) == 0 {
			m.noKeyword = append(m.noKeyword, i)
			continue
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

// Match implements Matcher.
func (m *KeywordMatcher) Match(content []byte, emit func(rule, start, end int)) {
	for _, r := range m.noKeyword {
		for _, loc := range m.rules[r].Regex.FindAllIndex(content, -1) {
			emit(r, loc[0], loc[1])
		}
	}
	if m.ac == nil {
		return
	}
	s := m.pool.Get().(*matchScratch)
	defer m.pool.Put(s)
	m.keywordPass(content, s)
	for _, r := range s.hit {
		wins := s.wins[r]
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
		s.wins[r] = wins[:0]
	}
	s.hit = s.hit[:0]
}

// keywordPass records, per rule, the merged windows around its keyword
// hits. The blob is lower-cased chunk by chunk (ASCII only: keywords are
// compared as gitleaks does after strings.ToLower, and its keywords are
// ASCII); consecutive chunks overlap by maxKW-1 bytes so a keyword across
// a chunk border is seen once.
func (m *KeywordMatcher) keywordPass(content []byte, s *matchScratch) {
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
				w := span{max(0, p-m.before[r]), min(len(content), q+m.after[r])}
				ws := s.wins[r]
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
