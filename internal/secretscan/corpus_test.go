package secretscan

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
)

// corpusSample is one fake secret from testdata/corpus.tsv: a line on which
// gitleaks v8.30.1 finds exactly rule (testdata/gencorpus).
type corpusSample struct {
	rule, line string
}

func loadCorpus(t testing.TB) []corpusSample {
	t.Helper()
	f, err := os.Open("testdata/corpus.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []corpusSample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		id, q, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("bad corpus line %q", sc.Text())
		}
		line, err := strconv.Unquote(q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, corpusSample{id, line})
	}
	return out
}

// TestCorpusStandalone checks each sample on its own: the engine must find
// exactly the rule gitleaks finds.
func TestCorpusStandalone(t *testing.T) {
	e := defaultEngine(t)
	samples := loadCorpus(t)
	if len(samples) < 50 {
		t.Fatalf("corpus has %d rules, want >= 50", len(samples))
	}
	for _, s := range samples {
		cs := e.scanContent([]byte("first line\n" + s.line + "\n"))
		var here []*candidate
		for i := range cs {
			here = append(here, &cs[i])
		}
		fs := e.findingsAt(here, commitInfo{}, "", "conf.txt")
		var got []string
		for _, f := range fs {
			got = append(got, f.RuleID)
		}
		if len(fs) != 1 || got[0] != s.rule || fs[0].StartLine != 2 {
			t.Errorf("%s: got %v (%+v) in %q", s.rule, got, fs, s.line)
		}
	}
}
