package secretscan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestWholeBlobRules: the default rules whose matches need not contain a
// keyword are exactly those gitleaks would find far from it
// (issue 27, 1.2). The list is computed from the regexps; a new rule
// set that adds one must show up here.
func TestWholeBlobRules(t *testing.T) {
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	km, err := NewKeywordMatcher(cfg.Rules)
	if err != nil {
		t.Fatal(err)
	}
	got := km.WholeBlobRules()
	// The first three need not hold their keyword at all; the others
	// spell theirs with '.', which matches any byte.
	want := []string{"airtable-personnal-access-token", "facebook-access-token", "sidekiq-sensitive-url",
		"slack-config-access-token", "slack-webhook-url", "sourcegraph-access-token"}
	if !slices.Equal(got, want) {
		t.Errorf("whole-blob rules = %q, want %q", got, want)
	}
}

func TestMatchHoldsKeyword(t *testing.T) {
	for _, c := range []struct {
		expr string
		kws  []string
		want bool
	}{
		{`abc[0-9]+`, []string{"abc"}, true},
		{`(?i)ABC[0-9]+`, []string{"abc"}, true},
		{`[0-9]{40}`, []string{"abc"}, false},
		{`abc_[0-9]+|[0-9]{40}`, []string{"abc_"}, false},                                 // sourcegraph's shape
		{`fo1_[\w-]{4}|fm1[ar]_[a-z]+|fm2_[a-z]+`, []string{"fo1_", "fm1", "fm2_"}, true}, // prefixes factored out by the parser
		{`xox[pe](?:-[0-9]{10,13}){3}`, []string{"xoxp-", "xoxe-"}, true},                 // keyword across a junction
		{`xox[pe](?:-[0-9]{10,13}){0,3}`, []string{"xoxp-", "xoxe-"}, false},              // the junction may be absent
		{`hooks.slack.com/x`, []string{"hooks.slack.com"}, false},                         // '.' is any byte
		{`hooks\.slack\.com/x`, []string{"hooks.slack.com"}, true},
		{`a(?:key|token)?b`, []string{"key", "token"}, false},
		{`(?:x|y)+key`, []string{"key"}, true},
	} {
		if got := matchHoldsKeyword(c.expr, c.kws); got != c.want {
			t.Errorf("matchHoldsKeyword(%q, %q) = %v, want %v", c.expr, c.kws, got, c.want)
		}
	}
}
