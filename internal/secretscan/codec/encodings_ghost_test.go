package codec

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func goSources(t testing.TB) []string {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("this test reads the Go toolchain's sources, and `go env GOROOT` failed: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "src", "net", "url")
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) == 0 {
		t.Skipf("this test reads the Go toolchain's sources, and %s has no .go files", dir)
	}
	var srcs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, string(b))
	}
	return srcs
}

var encodedSamples = []string{
	"token: " + base64.StdEncoding.EncodeToString([]byte("ghp_Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7")) + "\n",
	"hex " + hex.EncodeToString([]byte("aws_secret_access_key = abcdefghij0123456789")) + " end\n",
	"url?q=" + url.QueryEscape("password=\"hunter2 hunter2\"&x=1") + "\n",
	"U+0041 U+0042\nU+0043 x\n\\u0041\\u0042 and \\\\u0043\n",
}

// decodable keeps the matches that decode to something: the only ones
// the decoder uses.
func decodable(s string, ms []encodingMatch) []encodingMatch {
	var out []encodingMatch
	for _, m := range ms {
		if m.encoding.decode(s[m.start:m.end]) != "" {
			out = append(out, m)
		}
	}
	return out
}

// TestRegionsEquivalent: the region-restricted search finds the same
// decodable matches as gitleaks' whole-text search.
func TestRegionsEquivalent(t *testing.T) {
	texts := append(goSources(t), encodedSamples...)
	texts = append(texts, strings.Join(encodedSamples, "filler line\n"))
	for i, s := range texts {
		if got, want := decodable(s, findEncodingMatches(s)), decodable(s, findEncodingMatchesWhole(s)); !reflect.DeepEqual(got, want) {
			t.Errorf("text %d: regions found %d matches, whole text %d", i, len(got), len(want))
		}
	}
}

func FuzzRegionsEquivalent(f *testing.F) {
	for _, s := range encodedSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := decodable(s, findEncodingMatches(s)), decodable(s, findEncodingMatchesWhole(s))
		if len(got) == 0 && len(want) == 0 {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: regions %v, whole %v", s, got, want)
		}
	})
}

// FuzzDecode: the decoder never panics and its positions stay in range.
func FuzzDecode(f *testing.F) {
	for _, s := range encodedSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d := NewDecoder()
		raw, segs := s, []*EncodedSegment(nil)
		for range 3 {
			if raw, segs = d.Decode(raw, segs); len(segs) == 0 {
				return
			}
			for _, sg := range segs {
				if sg.original.start < 0 || sg.original.end > len(s) {
					t.Fatalf("segment %v outside the input (%d bytes)", sg.original, len(s))
				}
			}
		}
	})
}
