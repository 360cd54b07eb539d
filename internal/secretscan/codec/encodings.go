package codec

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"regexp"
)

var (
	// encodingsRe is a regex built by combining all the encoding patterns
	// into named capture groups so that a single pass can detect multiple
	// encodings
	encodingsRe *regexp.Regexp
	// encodings contains all the encoding configurations for the detector.
	// The precedence is important. You want more specific encodings to
	// have a higher precedence or encodings that partially encode the
	// values (e.g. percent) unlike encodings that fully encode the string
	// (e.g. base64). If two encoding matches overlap the decoder will use
	// this order to determine which encoding should wait till the next pass.
	encodings = []*encoding{
		{
			kind:    percentKind,
			pattern: `%[0-9A-Fa-f]{2}(?:.*%[0-9A-Fa-f]{2})?`,
			decode:  decodePercent,
		},
		{
			kind:    unicodeKind,
			pattern: `(?:(?:U\+[a-fA-F0-9]{4}(?:\s|$))+|(?i)(?:\\{1,2}u[a-fA-F0-9]{4})+)`,
			decode:  decodeUnicode,
		},
		{
			kind:    hexKind,
			pattern: `[0-9A-Fa-f]{32,}`,
			decode:  decodeHex,
		},
		{
			kind:    base64Kind,
			pattern: `[\w\/+-]{16,}={0,2}`,
			decode:  decodeBase64,
		},
	}
)

// encodingNames is used to map the encodingKinds to their name
var encodingNames = []string{
	"percent",
	"unicode",
	"hex",
	"base64",
}

// encodingKind can be or'd together to capture all of the unique encodings
// that were present in a segment
type encodingKind int

var (
	// make sure these go up by powers of 2
	percentKind = encodingKind(1)
	unicodeKind = encodingKind(2)
	hexKind     = encodingKind(4)
	base64Kind  = encodingKind(8)
)

func (e encodingKind) String() string {
	i := int(math.Log2(float64(e)))
	if i >= len(encodingNames) {
		return ""
	}
	return encodingNames[i]
}

// kinds returns a list of encodingKinds combined in this one
func (e encodingKind) kinds() []encodingKind {
	kinds := []encodingKind{}

	for i := 0; i < len(encodingNames); i++ {
		if kind := int(e) & int(math.Pow(2, float64(i))); kind != 0 {
			kinds = append(kinds, encodingKind(kind))
		}
	}

	return kinds
}

// encodingMatch represents a match of an encoding in the text
type encodingMatch struct {
	encoding *encoding
	startEnd
}

// encoding represent a type of coding supported by the decoder.
type encoding struct {
	// the kind of decoding (e.g. base64, etc)
	kind encodingKind
	// the regex pattern that matches the encoding format
	pattern string
	// take the match and return the decoded value
	decode func(string) string
	// determine which encoding should win out when two overlap
	precedence int
}

func init() {
	count := len(encodings)
	namedPatterns := make([]string, count)
	for i, encoding := range encodings {
		encoding.precedence = count - i
		namedPatterns[i] = fmt.Sprintf(
			"(?P<%s>%s)",
			encoding.kind,
			encoding.pattern,
		)
	}
	encodingsRe = regexp.MustCompile(strings.Join(namedPatterns, "|"))
}

// findEncodingMatches finds as many encodings as it can for this pass
func findEncodingMatches(data string) []encodingMatch {
	var all []encodingMatch
	// ghost: the regexp runs only over runs of lines that can hold a match
	// (see triggerRegions), not over the whole text; the matches are the
	// same (TestRegionsEquivalent) at a fraction of the cost.
	for _, reg := range triggerRegions(data) {
		all = appendEncodingMatches(all, data[reg.start:reg.end], reg.start)
	}
	return filterEncodingMatches(all)
}

// findEncodingMatchesWhole is gitleaks' original: the regexp over all of
// data. Kept to test that the region version finds the same.
func findEncodingMatchesWhole(data string) []encodingMatch {
	return filterEncodingMatches(appendEncodingMatches(nil, data, 0))
}

func appendEncodingMatches(all []encodingMatch, data string, offset int) []encodingMatch {
	for _, matchIndex := range encodingsRe.FindAllStringSubmatchIndex(data, -1) {
		// Add the encodingMatch with its proper encoding
		for i, j := 2, 0; i < len(matchIndex); i, j = i+2, j+1 {
			if matchIndex[i] > -1 {
				all = append(all, encodingMatch{
					encoding: encodings[j],
					startEnd: startEnd{
						start: offset + matchIndex[i],
						end:   offset + matchIndex[i+1],
					},
				})
			}
		}
	}
	return all
}

// triggerRegions returns the maximal runs of consecutive lines (each with
// its newline) that contain something every encoding match needs: a run
// of 16 bytes of [0-9A-Za-z_/+-] with one of 0-9+/-_ in it, or of 32
// (base64, hex), '%' and two
// hex digits (percent), or "U+" or a backslash and 'u'/'U' (unicode). A
// match starts on such a line, and only a unicode match crosses lines,
// each of which then holds "U+" or a "\u" too; so no match is cut.
func triggerRegions(data string) []startEnd {
	var out []startEnd
	for start := 0; start < len(data); {
		end := len(data)
		if i := strings.IndexByte(data[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		if lineTriggers(data[start:end]) {
			if n := len(out); n > 0 && out[n-1].end == start {
				out[n-1].end = end
			} else {
				out = append(out, startEnd{start, end})
			}
		}
		start = end
	}
	return out
}

func lineTriggers[T string | []byte](line T) bool {
	run, likely := 0, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		next := byte(0)
		if i+1 < len(line) {
			next = line[i+1]
		}
		switch {
		case c == 'U' && next == '+':
			return true
		case c == '\\' && (next == 'u' || next == 'U' || next == '\\'):
			return true
		case c == '%' && i+2 < len(line) && isHex(next) && isHex(line[i+2]):
			return true
		}
		if !base64RunChar[c] {
			run, likely = 0, false
			continue
		}
		run++
		likely = likely || likelyBase64Chars[c]
		// A run decodes as base64 only with one of 0-9+/-_ in it
		// (decodeBase64), and as hex only from 32 bytes on.
		if run >= 16 && likely || run >= 32 {
			return true
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

var base64RunChar = func() (t [256]bool) {
	for c := range 256 {
		b := byte(c)
		t[c] = '0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || b == '_' || b == '/' || b == '+' || b == '-'
	}
	return t
}()

// MayHoldEncoded reports whether any line of data could hold an encoded
// segment: when it is false, decoding finds nothing and can be skipped
// without copying data into a string.
func MayHoldEncoded(data []byte) bool {
	for start := 0; start < len(data); {
		end := len(data)
		if i := bytes.IndexByte(data[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		if lineTriggers(data[start:end]) {
			return true
		}
		start = end
	}
	return false
}

// filterEncodingMatches drops lower-precedence matches that overlap
// their neighbours (gitleaks' code, unchanged).
func filterEncodingMatches(all []encodingMatch) []encodingMatch {

	totalMatches := len(all)
	if totalMatches == 1 {
		return all
	}

	// filter out lower precedence ones that overlap their neigbors
	filtered := make([]encodingMatch, 0, len(all))
	for i, m := range all {
		if i > 0 {
			prev := all[i-1]
			if m.overlaps(prev.startEnd) && prev.encoding.precedence > m.encoding.precedence {
				continue // skip this one
			}
		}
		if i+1 < totalMatches {
			next := all[i+1]
			if m.overlaps(next.startEnd) && next.encoding.precedence > m.encoding.precedence {
				continue // skip this one
			}
		}
		filtered = append(filtered, m)
	}

	return filtered
}
