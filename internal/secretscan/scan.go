package secretscan

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ghost-scm/ghost/internal/secretscan/codec"
)

// DefaultMaxBlobSize is the default size above which a blob is skipped
// (and counted). It bounds the memory a scan holds per worker
// (docs/adr/0030-secret-scanning-engine.md, "Memory").
const DefaultMaxBlobSize = 50 << 20

// binarySniff is how much of a blob is searched for a NUL byte to call it
// binary: git's own heuristic (xdiff's buffer_is_binary).
const binarySniff = 8000

// allowSignature in a line suppresses its findings, as in gitleaks.
const allowSignature = "gitleaks:allow"

// Options configure an Engine.
type Options struct {
	// Workers scanning blobs in parallel; 0 means runtime.NumCPU().
	Workers int
	// MaxBlobSize skips larger blobs; 0 means DefaultMaxBlobSize, <0 none.
	MaxBlobSize int64
	// FingerprintKey keys the HMAC-SHA256 fingerprint of each secret, so
	// equal secrets of different tenants cannot be correlated.
	FingerprintKey []byte
	// Matcher overrides the default KeywordMatcher (for other backends).
	Matcher Matcher
	// Window is the window of stream scans (ScanStream, ScanLFSStream);
	// 0 means DefaultWindow. Tests make it small to cross boundaries.
	Window int
	// MaxDecodeDepth is how many times encoded segments (base64, hex,
	// percent, unicode escapes) are decoded and rescanned; gitleaks'
	// default is 5, 0 turns decoding off.
	MaxDecodeDepth int
	// Ignore lists gitleaks fingerprints to drop (.gitleaksignore).
	Ignore *Ignore
	// WorkerSetup, when set, is called first on each goroutine that scans
	// blobs of a repository. Background scanning passes
	// gitexec.Background.LowerThread, so that its CPU yields to serving
	// (docs/adr/0051-geometric-checkpoints.md); it must not need undoing,
	// since the goroutine ends with the scan.
	WorkerSetup func()
	// SkipBinary skips blobs git calls binary (a NUL byte in the first
	// 8000 bytes), as gitleaks does, and counts them. By default they are
	// scanned like any other blob, so that a NUL byte cannot hide a
	// secret (docs/adr/0035-binary-blobs.md).
	SkipBinary bool
	// WholeBlobs scans every blob of a whole-history scan in full. By
	// default a blob that every commit adding it derives from the same
	// already-scanned blob (its base) is scanned only around the lines
	// its base lacks (docs/adr/0120-scanner-speed.md); this is the
	// reference that scan is measured and tested against.
	WholeBlobs bool
	// Messages also scans the commit and tag objects given to
	// ScanObjects or reached by ScanRepo: their headers and messages
	// (BlobScan.MessageFindings). The server's scans set it; ghost scan,
	// like gitleaks, does not.
	Messages bool
}

// Engine scans content with a compiled Config. It is safe for concurrent
// use; it holds no per-scan state.
type Engine struct {
	cfg     *Config
	m       Matcher
	opts    Options
	pathOut []int  // path-only rules (no regexp)
	generic []bool // per rule: its id holds "generic" (gitleaks' filter)
	// pathRules are the rules with a regexp and a path (the first 64):
	// ScanRevs runs them only on blobs found at a matching path.
	// pathBit[r] is rule r's bit among them, allPathRules all bits.
	pathRules    []int
	pathBit      []uint64
	allPathRules uint64
	// lineReach bounds, per rule, the newlines a match holds (unbounded
	// when it cannot be bounded): how far from a changed line a match
	// may be changed too (docs/adr/0120-scanner-speed.md).
	lineReach []int
	// maxReach is the largest lineReach of at most maxZoneLines.
	maxReach int
}

// New builds an Engine for cfg.
func New(cfg *Config, opts Options) (*Engine, error) {
	if opts.Workers <= 0 {
		opts.Workers = runtime.NumCPU()
	}
	if opts.MaxBlobSize == 0 {
		opts.MaxBlobSize = DefaultMaxBlobSize
	}
	e := &Engine{cfg: cfg, m: opts.Matcher, opts: opts}
	if e.m == nil {
		km, err := NewKeywordMatcher(cfg.Rules)
		if err != nil {
			return nil, err
		}
		e.m = km
	}
	e.generic = make([]bool, len(cfg.Rules))
	e.lineReach = make([]int, len(cfg.Rules))
	e.pathBit = make([]uint64, len(cfg.Rules))
	for i, r := range cfg.Rules {
		if r.Regex == nil && r.Path != nil && !r.SkipReport {
			e.pathOut = append(e.pathOut, i)
		}
		if r.Regex != nil && r.Path != nil && len(e.pathRules) < 64 {
			e.pathBit[i] = 1 << len(e.pathRules)
			e.allPathRules |= e.pathBit[i]
			e.pathRules = append(e.pathRules, i)
		}
		e.generic[i] = strings.Contains(strings.ToLower(r.ID), "generic")
		e.lineReach[i] = unbounded
		if r.Regex != nil {
			e.lineReach[i] = matchReach(r.Regex.String()).nlAfter
		}
		if e.lineReach[i] <= maxZoneLines {
			e.maxReach = max(e.maxReach, e.lineReach[i])
		}
	}
	return e, nil
}

// Config returns the engine's rules.
func (e *Engine) Config() *Config { return e.cfg }

// candidate is a match that survived every path-independent check. What
// still depends on where the blob sits (rule paths, allowlist paths and
// commits, .gitleaksignore) is decided per location by attribution.
type candidate struct {
	rule               int
	startLine, endLine int // 1-based
	startCol, endCol   int // 1-based, inclusive end
	secret, match      string
	lineHash           uint64 // identifies the line for "was it added?"
	entropy            float32
	deferred           []*Allowlist // AND allowlists awaiting path/commit
	tags               []string     // decoding tags (decoded:base64, ...)
	pathOnly           bool
	noEOL              bool // ends on the blob's last line, which has no newline
}

func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), binarySniff)], 0) >= 0
}

// lineIndex turns byte offsets into line numbers, moving forward from the
// last answer so a blob's matches cost one pass in the common case.
type lineIndex struct {
	content   []byte
	pos, line int // line (0-based) of content[pos]; pos is a line start
}

func (li *lineIndex) at(off int) (line, lineStart int) {
	if off < li.pos {
		li.pos, li.line = 0, 0
	}
	for {
		i := bytes.IndexByte(li.content[li.pos:off], '\n')
		if i < 0 {
			return li.line, li.pos
		}
		li.pos += i + 1
		li.line++
	}
}

// scanContent returns the path-independent candidates of one blob: the
// matches in its text and, up to Options.MaxDecodeDepth passes, in its
// decoded base64, hex, percent- and unicode-escaped segments (gitleaks'
// decoding, docs/adr/0030-secret-scanning-engine.md).
func (e *Engine) scanContent(content []byte) []candidate {
	return e.scan(e.m.Match, content)
}

// scanSkipping is scanContent leaving out the path-restricted rules
// whose bits (of e.pathRules) skip has set: they apply at none of the
// blob's paths.
func (e *Engine) scanSkipping(content []byte, skip uint64) []candidate {
	if skip == 0 {
		return e.scanContent(content)
	}
	omit := func(r int) bool { return e.pathBit[r]&skip != 0 }
	if sm, ok := e.m.(subsetMatcher); ok {
		return e.scan(func(content []byte, emit func(rule, start, end int)) { sm.matchSubset(content, omit, emit) }, content)
	}
	return e.scan(func(content []byte, emit func(rule, start, end int)) {
		e.m.Match(content, func(r, start, end int) {
			if !omit(r) {
				emit(r, start, end)
			}
		})
	}, content)
}

// matchFunc is a Matcher's Match.
type matchFunc func(content []byte, emit func(rule, start, end int))

// subsetMatcher is a Matcher that can leave rules out without running
// them.
type subsetMatcher interface {
	matchSubset(content []byte, omit func(rule int) bool, emit func(rule, start, end int))
}

// scan is scanContent with the matcher m.
func (e *Engine) scan(m matchFunc, content []byte) []candidate {
	var out []candidate
	li := &lineIndex{content: content}
	m(content, func(ri, start, end int) {
		secret := strings.Trim(string(content[start:end]), "\n")
		// As gitleaks: the location spans len(secret) bytes from the start.
		if c, ok := e.candidate(content, li, ri, start, start+len(secret), secret, "", nil); ok {
			out = append(out, c)
		}
	})
	if e.opts.MaxDecodeDepth > 0 && codec.MayHoldEncoded(content) {
		out = append(out, e.scanDecoded(m, content, li)...)
	}
	markNoEOL(out, content)
	// A generic candidate that a specific one shadows is kept: whether
	// it is shadowed depends on where the blob is (findingsAt).
	return out
}

// markNoEOL sets noEOL on the candidates that end on content's last
// line when that line has no newline (candKey).
func markNoEOL(cs []candidate, content []byte) {
	if len(cs) == 0 || len(content) == 0 || content[len(content)-1] == '\n' {
		return
	}
	last := bytes.Count(content, []byte{'\n'}) + 1
	for i := range cs {
		if cs[i].endLine == last {
			cs[i].noEOL = true
		}
	}
}

// scanDecoded is gitleaks' decoding loop: decode the encoded segments,
// match the decoded text, keep the matches that overlap a decoded
// segment, and place them at the encoded text's position in the blob.
func (e *Engine) scanDecoded(m matchFunc, content []byte, li *lineIndex) []candidate {
	return e.scanDecodedAt(m, content, li, span{0, len(content)}, nil)
}

// scanDecodedAt is scanDecoded over the lines r of content; with keep
// set, it keeps only the candidates whose encoded text it keeps.
func (e *Engine) scanDecodedAt(m matchFunc, content []byte, li *lineIndex, r span, keep func(rule, start, end int) bool) []candidate {
	var out []candidate
	dec := codec.NewDecoder()
	// Read-only views, not copies: blobs run to megabytes and each depth
	// makes a new text. content is not modified while this runs (the
	// worker owns it), the codec only reads its input, and Match only
	// reads its content.
	region := content[r.start:r.end]
	raw := unsafe.String(unsafe.SliceData(region), len(region))
	var segs []*codec.EncodedSegment
	for depth := 1; depth <= e.opts.MaxDecodeDepth; depth++ {
		if raw, segs = dec.Decode(raw, segs); len(segs) == 0 {
			break
		}
		text := unsafe.Slice(unsafe.StringData(raw), len(raw))
		matchNear(m, text, segs, func(ri, start, end int) {
			over := codec.SegmentsWithDecodedOverlap(segs, start, end)
			if len(over) == 0 {
				return // found by an earlier pass
			}
			secret := strings.Trim(raw[start:end], "\n")
			loc := codec.AdjustMatchIndex(over, []int{start, end})
			if loc[0] < 0 || loc[1] > len(region) || loc[0] > loc[1] {
				return
			}
			loc[0], loc[1] = loc[0]+r.start, loc[1]+r.start
			if keep != nil && !keep(ri, loc[0], loc[1]) {
				return
			}
			if c, ok := e.candidate(content, li, ri, loc[0], loc[1], secret, codec.CurrentLine(over, raw), codec.Tags(over)); ok {
				out = append(out, c)
			}
		})
	}
	return out
}

// decodeContext is how many lines around a decoded segment are rescanned:
// a match must overlap a segment, and the default rules reach at most 9
// lines from their keyword (generic-api-key; docs/adr/0030).
const decodeContext = 10

// matchNear runs the matcher only over the lines within decodeContext of
// a decoded segment of text, not over all of it.
func matchNear(m matchFunc, text []byte, segs []*codec.EncodedSegment, emit func(rule, start, end int)) {
	var regions []span
	for _, sg := range segs {
		st, en := sg.DecodedSpan()
		st, en = max(0, min(st, len(text))), max(0, min(en, len(text)))
		for n := 0; n <= decodeContext && st > 0; n++ {
			i := bytes.LastIndexByte(text[:st-1], '\n')
			st = i + 1
			if i < 0 {
				break
			}
		}
		for n := 0; n <= decodeContext && en < len(text); n++ {
			i := bytes.IndexByte(text[en:], '\n')
			if i < 0 {
				en = len(text)
				break
			}
			en += i + 1
		}
		if k := len(regions); k > 0 && st <= regions[k-1].end {
			regions[k-1].end = max(regions[k-1].end, en)
			continue
		}
		regions = append(regions, span{st, en})
	}
	for _, r := range regions {
		m(text[r.start:r.end], func(ri, start, end int) { emit(ri, r.start+start, r.start+end) })
	}
}

// candidate applies the path-independent checks to one match of rule ri
// whose text is match and whose location in content is [start, end).
// currentLine, when not empty, is the decoded line the allowlists see.
func (e *Engine) candidate(content []byte, li *lineIndex, ri, start, end int, match, currentLine string, tags []string) (candidate, bool) {
	r := e.cfg.Rules[ri]
	if r.SkipReport {
		return candidate{}, false
	}
	sl, sls := li.at(start)
	el, els := li.at(max(start, end-1))
	lineEnd := bytes.IndexByte(content[end:], '\n')
	if lineEnd < 0 {
		lineEnd = len(content)
	} else {
		lineEnd += end
	}
	line := content[sls:lineEnd]
	if bytes.Contains(line, []byte(allowSignature)) {
		return candidate{}, false
	}
	c := candidate{
		rule: ri, startLine: sl + 1, endLine: el + 1,
		startCol: start - sls + 1, endCol: end - els,
		match: match, secret: match, tags: tags,
	}
	if groups := r.Regex.FindStringSubmatch(match); len(groups) >= 2 {
		if r.SecretGroup > 0 {
			if len(groups) <= r.SecretGroup {
				return candidate{}, false
			}
			c.secret = groups[r.SecretGroup]
		} else {
			for _, g := range groups[1:] {
				if g != "" {
					c.secret = g
					break
				}
			}
		}
	}
	ent := shannonEntropy(c.secret)
	c.entropy = float32(ent)
	if r.Entropy != 0 && ent <= r.Entropy {
		return candidate{}, false
	}
	if currentLine == "" {
		currentLine = string(line)
	}
	for _, lists := range [][]*Allowlist{e.cfg.Allowlists, r.Allowlists} {
		for _, a := range lists {
			allowed, deferred := contentAllowed(a, &c, currentLine)
			if allowed {
				return candidate{}, false
			}
			if deferred {
				c.deferred = append(c.deferred, a)
			}
		}
	}
	h := fnv.New64a()
	h.Write(line)
	c.lineHash = h.Sum64()
	return c, true
}

// contentAllowed applies an allowlist's regexes and stopwords (gitleaks'
// checkFindingAllowed). An AND allowlist that also needs a path or commit
// is deferred to attribution when its content checks hold.
func contentAllowed(a *Allowlist, c *candidate, line string) (allowed, deferred bool) {
	target := c.secret
	switch a.RegexTarget {
	case "match":
		target = c.match
	case "line":
		target = line
	}
	regexOK := a.regexAllowed(target)
	stopOK := a.containsStopWord(c.secret)
	if !a.MatchAnd {
		return regexOK || stopOK, false
	}
	if (a.Regexes != nil && !regexOK) || (len(a.StopWords) > 0 && !stopOK) {
		return false, false
	}
	if a.hasLocationChecks() {
		return false, true
	}
	return a.hasContentChecks(), false
}

// shannonEntropy is gitleaks' entropy: bits per character over runes.
func shannonEntropy(data string) float64 {
	if data == "" {
		return 0
	}
	counts := make(map[rune]int)
	for _, r := range data {
		counts[r]++
	}
	inv := 1.0 / float64(len(data))
	var ent float64
	for _, n := range counts {
		f := float64(n) * inv
		ent -= f * math.Log2(f)
	}
	return ent
}

// fingerprint is the hex HMAC-SHA256 of secret under the caller's key.
func (e *Engine) fingerprint(secret string) string {
	m := hmac.New(sha256.New, e.opts.FingerprintKey)
	m.Write([]byte(secret))
	return hex.EncodeToString(m.Sum(nil))
}

// redact replaces the secret inside match, keeping the context that tells
// a reader what was found without disclosing it.
func redact(match, secret string) string {
	if secret == "" {
		return match
	}
	return strings.ReplaceAll(match, secret, "REDACTED")
}
