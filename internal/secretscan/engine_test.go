package secretscan

import (
	"testing"
)

func defaultEngine(t testing.TB) *Engine {
	t.Helper()
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, Options{Workers: 2, FingerprintKey: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDefaultConfig(t *testing.T) {
	e := defaultEngine(t)
	if n := len(e.cfg.Rules); n != 222 {
		t.Errorf("default rules = %d, want 222 (gitleaks %s)", n, DefaultRulesVersion)
	}
	if n := e.m.(*KeywordMatcher).KeywordlessRules(); n != 0 {
		t.Errorf("keyword-less rules with a regexp = %d, want 0", n)
	}
	if len(e.pathOut) != 1 {
		t.Errorf("path-only rules = %d, want 1 (pkcs12-file)", len(e.pathOut))
	}
}

func TestScanContent(t *testing.T) {
	e := defaultEngine(t)
	content := []byte("package main\n\n// line 3\nconst tok = \"ghp_" + "Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7\"\n")
	cs := e.scanContent(content)
	if len(cs) != 1 {
		t.Fatalf("candidates = %+v, want 1", cs)
	}
	c := cs[0]
	if got := e.cfg.Rules[c.rule].ID; got != "github-pat" || c.startLine != 4 || c.startCol != 14 {
		t.Errorf("got rule %s line %d col %d, want github-pat 4 14", got, c.startLine, c.startCol)
	}
}
