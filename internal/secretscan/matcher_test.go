package secretscan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// goroot is the Go tree of the go command on PATH.
func goroot(tb testing.TB) string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		tb.Skipf("this test reads the Go toolchain's sources, and `go env GOROOT` failed: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// wholeBlobMatcher is gitleaks' strategy: every rule with a keyword
// anywhere in the blob runs its regexp over the whole blob. The keyword
// matcher must find the same matches.
type wholeBlobMatcher struct{ rules []*Rule }

func (m wholeBlobMatcher) Match(content []byte, emit func(rule, start, end int)) {
	lower := bytes.ToLower(content)
	for i, r := range m.rules {
		if r.Regex == nil {
			continue
		}
		hit := len(r.Keywords) == 0
		for _, k := range r.Keywords {
			hit = hit || bytes.Contains(lower, []byte(k))
		}
		if !hit {
			continue
		}
		for _, loc := range r.Regex.FindAllIndex(content, -1) {
			emit(i, loc[0], loc[1])
		}
	}
}

func matches(m Matcher, content []byte) []string {
	var out []string
	m.Match(content, func(r, s, e int) { out = append(out, fmt.Sprintf("%d:%d:%d", r, s, e)) })
	sort.Strings(out)
	return out
}

// realContent returns some of the Go tree's source, a realistic mix of
// text in which "key", "token", "secret" and "api" are everywhere.
func realContent(t *testing.T, n int) [][]byte {
	t.Helper()
	pattern := filepath.Join(goroot(t), "src", "crypto", "*", "*.go")
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		t.Skipf("this test reads the Go toolchain's sources, and nothing matches %s", pattern)
	}
	var out [][]byte
	for _, f := range files[:min(n, len(files))] {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

const pemKey = `-----BEGIN RSA PRIVATE KEY-----
%s-----END RSA PRIVATE KEY-----
`

// TestKeywordMatcherEquivalence: windows around keyword hits find exactly
// what whole-blob scanning finds, on real source with secrets spliced in,
// including a multi-line private key and keywords across chunk borders.
func TestKeywordMatcherEquivalence(t *testing.T) {
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	km, err := NewKeywordMatcher(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	wm := wholeBlobMatcher{cfg.Rules}
	samples := loadCorpus(t)
	rng := rand.New(rand.NewPCG(1, 2))
	var body strings.Builder
	for range 50 {
		fmt.Fprintf(&body, "%064x\n", rng.Uint64())
	}
	key := fmt.Sprintf(pemKey, body.String())
	blobs := realContent(t, 6)
	// A blob over a chunk long, with a sample right at the chunk border.
	var big []byte
	for len(big) < acChunk+(32<<10) {
		big = append(big, blobs[len(big)%len(blobs)]...)
	}
	s := samples[7].line
	at := acChunk - len(s)/2
	big = append(big[:at:at], append([]byte(s), big[at+len(s):]...)...)
	blobs = append(blobs, big)
	for i, b := range blobs {
		lines := bytes.SplitAfter(b, []byte("\n"))
		for j := 0; j < 5; j++ {
			at := rng.IntN(len(lines))
			lines[at] = append([]byte(samples[rng.IntN(len(samples))].line+"\n"), lines[at]...)
		}
		lines = append(lines, []byte(key))
		blobs[i] = bytes.Join(lines, nil)
	}
	total := 0
	for i, b := range blobs {
		want, got := matches(wm, b), matches(km, b)
		total += len(want)
		if strings.Join(want, " ") != strings.Join(got, " ") {
			t.Errorf("blob %d (%d bytes): whole-blob %d matches, keyword windows %d\nwant %v\n got %v", i, len(b), len(want), len(got), want, got)
		}
	}
	if total < 5*len(blobs) {
		t.Errorf("only %d matches: the test content lacks secrets", total)
	}
}

func TestMaxMatchLen(t *testing.T) {
	for expr, want := range map[string]int{
		`abc`:            3,
		`ab{2,5}`:        6,
		`(?:x|yy)[0-9]?`: 3,
		`a+`:             unbounded,
		`\bkey\b.{0,10}`: 3 + 10*4,
		`(?i)ab`:         6,
	} {
		if got := maxMatchLen(expr); got != want {
			t.Errorf("maxMatchLen(%q) = %d, want %d", expr, got, want)
		}
	}
}
