// Package acbench compares Aho–Corasick libraries on gitleaks' default
// keywords over lower-cased Go source (docs/adr/0030-secret-scanning-engine.md).
// A module of its own so ghost does not depend on the alternatives.
// Run: cd internal/secretscan/testdata/acbench && go test -bench . -benchtime 10x
package acbench

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	bobu "github.com/BobuSumisu/aho-corasick"
	cf "github.com/cloudflare/ahocorasick"
	coregx "github.com/coregx/ahocorasick"
	petar "github.com/petar-dambovaliev/aho-corasick"
)

func keywords(b *testing.B) []string {
	data, err := os.ReadFile("../../gitleaks/gitleaks.toml")
	if err != nil {
		b.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	for _, m := range regexp.MustCompile(`(?s)\nkeywords = \[(.*?)\]`).FindAllStringSubmatch(string(data), -1) {
		for _, k := range regexp.MustCompile(`"([^"]*)"`).FindAllStringSubmatch(m[1], -1) {
			k := strings.ToLower(k[1])
			if !seen[k] {
				seen[k] = true
				out = append(out, k)
			}
		}
	}
	return out
}

func corpus(b *testing.B) []byte {
	out, _ := exec.Command("go", "env", "GOROOT").Output()
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "src", "net", "http", "*.go"))
	var all []byte
	for _, f := range files {
		d, _ := os.ReadFile(f)
		all = append(all, d...)
	}
	return []byte(strings.ToLower(string(all)))
}

func BenchmarkCoregx(b *testing.B) {
	kw, text := keywords(b), corpus(b)
	ac, _ := coregx.NewBuilder().AddStrings(kw).Build()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	n := 0
	for range b.N {
		n = len(ac.FindAllOverlapping(text))
	}
	b.ReportMetric(float64(n), "hits")
}

func BenchmarkBobuSumisu(b *testing.B) {
	kw, text := keywords(b), corpus(b)
	t := bobu.NewTrieBuilder().AddStrings(kw).Build()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	n := 0
	for range b.N {
		n = len(t.Match(text))
	}
	b.ReportMetric(float64(n), "hits")
}

func BenchmarkPetar(b *testing.B) {
	kw, text := keywords(b), corpus(b)
	bld := petar.NewAhoCorasickBuilder(petar.Opts{MatchKind: petar.StandardMatch, DFA: true})
	ac := bld.Build(kw)
	s := string(text)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	n := 0
	for range b.N {
		n = 0
		it := ac.IterOverlapping(s)
		for m := it.Next(); m != nil; m = it.Next() {
			n++
		}
	}
	b.ReportMetric(float64(n), "hits")
}

func BenchmarkCloudflare(b *testing.B) {
	kw, text := keywords(b), corpus(b)
	m := cf.NewStringMatcher(kw)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	n := 0
	for range b.N {
		n = len(m.Match(text)) // which keywords occur; no positions
	}
	b.ReportMetric(float64(n), "distinct")
}
