package secretscan

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestScanStreamMatchesWhole: a stream scan in small windows finds
// exactly what a scan of the whole content finds, at the same lines and
// columns, with secrets placed on every side of the window boundaries: a
// token just before and across a cut, a multi-line private key across
// one, a secret on the last line without a newline, and a line longer
// than half a window.
func TestScanStreamMatchesWhole(t *testing.T) {
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	const window = 4 * windowOverlap
	e, err := New(cfg, Options{Workers: 1, FingerprintKey: []byte("k"), Window: window, MaxDecodeDepth: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(43, 1))
	var body strings.Builder
	for range 50 {
		fmt.Fprintf(&body, "%064x\n", rng.Uint64())
	}
	key := fmt.Sprintf(pemKey, body.String())
	token := func() string {
		const al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		b := []byte("ghp_")
		for range 36 {
			b = append(b, al[rng.IntN(len(al))])
		}
		return string(b)
	}
	build := func(at []int, long bool, last string) []byte {
		var b bytes.Buffer
		next := 0
		for b.Len() < 5*window {
			if next < len(at) && b.Len() >= at[next] {
				if next%2 == 0 {
					fmt.Fprintf(&b, "GITHUB_TOKEN=%s\n", token())
				} else {
					b.WriteString(key)
				}
				next++
				continue
			}
			if long && b.Len() > 2*window && b.Len() < 2*window+200 {
				b.WriteString(strings.Repeat("x", window*3/4) + " TOKEN=" + token() + "\n")
				continue
			}
			fmt.Fprintf(&b, "line %d of filler text, nothing to see\n", rng.IntN(1e6))
		}
		b.WriteString(last)
		return b.Bytes()
	}
	cases := map[string][]byte{
		"secrets near every boundary": build([]int{window - 60, window - 20, 2*window - windowOverlap - 30, 2*window - 2000, 3*window - 10, 4*window - 3000}, false, "END="+token()),
		"a long line":                 build([]int{window / 2, 3 * window}, true, "\n"),
		"small":                       []byte("TOKEN=" + token() + "\n"),
		"empty":                       nil,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			want, _ := e.ScanBytes("app.env", content)
			// Short reads, as from the network.
			got, st, err := e.ScanStream("app.env", iotest.HalfReader(bytes.NewReader(content)))
			if err != nil {
				t.Fatal(err)
			}
			if st.BytesScanned != int64(len(content)) {
				t.Errorf("scanned %d bytes of %d", st.BytesScanned, len(content))
			}
			if g, w := brief(got), brief(want); !slices.Equal(g, w) {
				t.Errorf("stream:\n%v\nwhole:\n%v", g, w)
			}
			if name == "secrets near every boundary" && len(want) < 7 {
				t.Fatalf("the whole scan found %d secrets; the test places 7", len(want))
			}
		})
	}
}

func brief(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %d:%d-%d:%d %s", f.RuleID, f.StartLine, f.StartColumn, f.EndLine, f.EndColumn, f.Fingerprint))
	}
	slices.Sort(out)
	return out
}
