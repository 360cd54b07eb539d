package secretscan

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The regression fixtures of issue 27 (docs/adr/0036-scanner-on-real-histories.md):
// one-line files and a small history on which ghost must report what
// gitleaks v8.30.1 reports, plus the finds listed as beyond gitleaks.
// Each is also run through gitleaks when it is on PATH, and the two
// reports compared by rule, commit, path, line and secret.

// recallKey is the fingerprint key of these tests: a gitleaks secret is
// compared through its HMAC, as ghost reports none in clear.
var recallKey = []byte("recall")

// hit is a finding as these tests compare it.
type hit struct {
	Rule, Commit, Path string
	Line               int
	Secret             string // HMAC-SHA256 under recallKey
}

func (h hit) String() string {
	return fmt.Sprintf("%s %.7s %s:%d %.8s", h.Rule, h.Commit, h.Path, h.Line, h.Secret)
}

func secretHMAC(s string) string {
	m := hmac.New(sha256.New, recallKey)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}

func recallEngine(t *testing.T) *Engine {
	t.Helper()
	cfg, err := DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, Options{Workers: 2, FingerprintKey: recallKey, MaxDecodeDepth: 5})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func hits(fs []Finding) []hit {
	var out []hit
	for _, f := range fs {
		out = append(out, hit{f.RuleID, f.Commit, f.Path, f.StartLine, f.Fingerprint})
	}
	return out
}

// gitleaksHits runs gitleaks' command mode ("dir" or "git") in dir, on
// ".", so that its paths are relative as ghost's are, when gitleaks is on
// PATH; else it reports false.
func gitleaksHits(t *testing.T, mode, dir string) ([]hit, bool) {
	t.Helper()
	gl, err := exec.LookPath("gitleaks")
	if err != nil {
		t.Log("gitleaks not on PATH: not comparing with it (go install github.com/zricethezav/gitleaks/v8@v8.30.1)")
		return nil, false
	}
	out := filepath.Join(t.TempDir(), "gitleaks.json")
	args := []string{mode, "--no-banner", "--log-level", "error", "--exit-code", "0",
		"--report-format", "json", "--report-path", out, "."}
	cmd := exec.Command(gl, args...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks %v: %v\n%s", args, err, b)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var fs []struct {
		RuleID, Commit, File, Secret string
		StartLine                    int
	}
	if err := json.Unmarshal(data, &fs); err != nil {
		t.Fatal(err)
	}
	var hs []hit
	for _, f := range fs {
		hs = append(hs, hit{f.RuleID, f.Commit, f.File, f.StartLine, secretHMAC(f.Secret)})
	}
	return hs, true
}

// compareHits wants got to be want exactly; with gitleaks' hits, it
// wants got to be gitleaks' plus beyond, the finds gitleaks misses.
func compareHits(t *testing.T, got, want []hit, gitleaks []hit, beyond []hit, haveGitleaks bool) {
	t.Helper()
	key := func(hs []hit) []loc {
		var ls []loc
		for _, h := range hs {
			ls = append(ls, loc{h.Rule + " " + h.Secret, h.Commit, h.Path, h.Line})
		}
		return ls
	}
	missing, extra := diffLocs(key(want), key(got))
	for _, l := range missing {
		t.Errorf("missing: %v", l)
	}
	for _, l := range extra {
		t.Errorf("unexpected: %v", l)
	}
	if !haveGitleaks {
		return
	}
	onlyGitleaks, onlyGhost := diffLocs(key(gitleaks), key(got))
	for _, l := range onlyGitleaks {
		t.Errorf("gitleaks found, ghost did not: %v", l)
	}
	beyondKeys := key(beyond)
	unexplained, unfound := diffLocs(onlyGhost, beyondKeys)
	for _, l := range unexplained {
		t.Errorf("ghost found, gitleaks did not, and it is not listed as beyond gitleaks: %v", l)
	}
	for _, l := range unfound {
		t.Errorf("listed as beyond gitleaks, but gitleaks found it too or ghost did not: %v", l)
	}
}

// oneLiners are files on which a rule restricted to other paths must not
// hide generic-api-key (issue 27, 1.1), next to the files where that rule
// does apply and wins, and files where a rule's keyword is lines away
// from its match (1.2).
var oneLiners = map[string]string{
	"app.py":       "password = \"abcdefgh12345678\"\n",
	"app.env":      "DB_PASSWORD=\"x9k2m4n7p1q8\"\n",
	"k.go":         "password: \"UyFCXCpkJHpEc2I9\"\n",
	"main.tf":      "password = \"abcdefgh12345678\"\n", // hashicorp-tf-password applies, generic yields
	"settings.xml": "<add key=\"ClearTextPassword\" value=\"Xq7!vR2#pL9z\" />\n",
	"nuget.config": "<add key=\"ClearTextPassword\" value=\"Xq7!vR2#pL9z\" />\n",
	"s.txt":        "data: password: dGhpc2lzYXZlcnlsb25ncGFzc3dvcmQx kind: secret\n",
	"s.yaml":       "data: password: dGhpc2lzYXZlcnlsb25ncGFzc3dvcmQx kind: secret\n",
	"sg.txt":       farKeyword("# sourcegraph client settings", `revision = "8f3a9c2e7b1d4f6a0c5e9b3d7f1a2c4e6b8d0f2a"`),
	"at.txt":       farKeyword("Airtable export", "pat = patAbCdEfGhIjKlMn.0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"),
	"fb.txt":       farKeyword("facebook app", "value: 123456789012345|Zq8XvN3kLp7WmR2tYb6HcJ9sDf4Gh1"),
}

// farKeyword puts 20 lines between a rule's keyword and its match.
func farKeyword(first, last string) string {
	var b strings.Builder
	b.WriteString(first + "\n")
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "row %d\n", i)
	}
	b.WriteString(last + "\n")
	return b.String()
}

func oneLinerHits(commit string) []hit {
	return []hit{
		{"generic-api-key", commit, "app.py", 1, secretHMAC("abcdefgh12345678")},
		{"generic-api-key", commit, "app.env", 1, secretHMAC("x9k2m4n7p1q8")},
		{"generic-api-key", commit, "k.go", 1, secretHMAC("UyFCXCpkJHpEc2I9")},
		{"hashicorp-tf-password", commit, "main.tf", 1, secretHMAC(`"abcdefgh12345678"`)},
		{"nuget-config-password", commit, "nuget.config", 1, secretHMAC("Xq7!vR2#pL9z")},
		{"generic-api-key", commit, "s.txt", 1, secretHMAC("dGhpc2lzYXZlcnlsb25ncGFzc3dvcmQx")},
		{"kubernetes-secret-yaml", commit, "s.yaml", 1, secretHMAC("password: dGhpc2lzYXZlcnlsb25ncGFzc3dvcmQx")},
		{"kubernetes-secret-yaml", commit, "s.yaml", 1, secretHMAC("password: thisisaverylongpassword1")}, // decoded
		{"sourcegraph-access-token", commit, "sg.txt", 22, secretHMAC("8f3a9c2e7b1d4f6a0c5e9b3d7f1a2c4e6b8d0f2a")},
		{"airtable-personnal-access-token", commit, "at.txt", 22, secretHMAC("patAbCdEfGhIjKlMn.0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9")},
		{"facebook-access-token", commit, "fb.txt", 22, secretHMAC("123456789012345|Zq8XvN3kLp7WmR2tYb6HcJ9sDf4Gh1")},
	}
}

// TestRecallOneLiners scans the one-line files as a directory.
func TestRecallOneLiners(t *testing.T) {
	dir := t.TempDir()
	for name, body := range oneLiners {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs, _, err := recallEngine(t).ScanDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	gl, ok := gitleaksHits(t, "dir", dir)
	compareHits(t, hits(fs), oneLinerHits(""), gl, nil, ok)
}

// curlBefore is a shell script whose first curl command spans lines and
// has no -u; curlAfter adds two one-line commands with -u below it. A
// whole-blob match from the first curl reaches the last -u and swallows
// the line between (issue 27, 1.3); gitleaks, reading only the added
// lines, reports both at their own lines.
const (
	curlBefore = "#!/bin/sh\n" +
		"curl -k -X POST https://example.com/rest/v2/caches/default/hello \\\n" +
		"  -H \"Content-type: text/plain\" \\\n" +
		"  -d \"world\"\n" +
		"echo done\n"
	curlAfter = curlBefore +
		"curl -u \":d2LkV78zLx7t\" https://localhost:9200\n" +
		"curl -u \"d2LkV78zLx7t:\" https://localhost:9200\n"
)

// pemBody is a private key's body: twelve lines of base64-like text.
func pemBody(seed byte) []string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var lines []string
	x := uint32(seed) + 1
	for range 12 {
		var b strings.Builder
		for range 64 {
			x = x*1664525 + 1013904223
			b.WriteByte(alphabet[x>>26])
		}
		lines = append(lines, b.String())
	}
	return lines
}

func pemFile(body []string) string {
	return "-----BEGIN RSA PRIVATE KEY-----\n" + strings.Join(body, "\n") + "\n-----END RSA PRIVATE KEY-----\n"
}

// TestRecallSmallHistory: the same fixtures in history, where a finding
// also has a commit, plus the multi-line cases: ghost reports what
// gitleaks reports, and beyond it a private key of which only a middle
// line changed (gitleaks' diff holds neither BEGIN nor END).
func TestRecallSmallHistory(t *testing.T) {
	h := newHistory(t)
	for name, body := range oneLiners {
		h.write(name, body)
	}
	one := h.commit("one-liners")
	h.write("deploy.sh", curlBefore)
	h.commit("a curl without -u")
	h.write("deploy.sh", curlAfter)
	curl := h.commit("two curls with -u")
	body := pemBody(1)
	h.write("key.pem", pemFile(body))
	key := h.commit("a private key")
	before := pemFile(body)
	body[5] = "Q" + body[5][1:]
	h.write("key.pem", pemFile(body))
	edited := h.commit("one middle line of the key changes")

	e := recallEngine(t)
	ctx := context.Background()
	bs, err := e.ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	fs, err := bs.Attribute(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	keySecret := func(pem string) string { return secretHMAC(strings.TrimSuffix(pem, "\n")) }
	want := append(oneLinerHits(one),
		hit{"curl-auth-user", curl, "deploy.sh", 6, secretHMAC(`":d2LkV78zLx7t"`)},
		hit{"curl-auth-user", curl, "deploy.sh", 7, secretHMAC(`"d2LkV78zLx7t:"`)},
		hit{"private-key", key, "key.pem", 1, keySecret(before)},
		hit{"private-key", edited, "key.pem", 1, keySecret(pemFile(body))},
	)
	beyond := []hit{
		{"private-key", edited, "key.pem", 1, keySecret(pemFile(body))},
	}
	gl, ok := gitleaksHits(t, "git", h.dir)
	compareHits(t, hits(fs), want, gl, beyond, ok)
}

// TestScanRevsPathSkip: a blob the history adds only at globally
// allowlisted paths is never read (counted in Stats.PathSkipped) and
// yields nothing, while the same content elsewhere — another blob, and
// one blob at both kinds of path — is scanned and reported at the path
// that is not allowlisted.
func TestScanRevsPathSkip(t *testing.T) {
	h := newHistory(t)
	h.write("go.sum", "password = \"abcdefgh12345678\"\n# only here\n")
	h.write("dup/go.sum", "password = \"x9k2m4n7p1q8zz\"\n")
	h.write("dup/app.py", "password = \"x9k2m4n7p1q8zz\"\n")
	c := h.commit("one blob only at go.sum, one at go.sum and app.py")

	e := recallEngine(t)
	ctx := context.Background()
	bs, err := e.ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if bs.Stats.PathSkipped != 1 {
		t.Errorf("PathSkipped = %d, want 1 (the blob only at go.sum)", bs.Stats.PathSkipped)
	}
	fs, err := bs.Attribute(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []hit{{"generic-api-key", c, "dup/app.py", 1, secretHMAC("x9k2m4n7p1q8zz")}}
	gl, ok := gitleaksHits(t, "git", h.dir)
	compareHits(t, hits(fs), want, gl, nil, ok)
}

// TestRecallNewlineAtEOF: a commit that only adds the newline a last line
// lacked re-adds that line in git's diff, and gitleaks reports its
// secret again there (seen in gitleaks' own history); ghost must too. A
// later change elsewhere in the file re-adds nothing.
func TestRecallNewlineAtEOF(t *testing.T) {
	const key = "AIzaSyDtz3Di0ZrzeU5ET3UFU0p-xP4bx2FkSrg"
	h := newHistory(t)
	h.write("env", "A=1\n\nGOOGLE_MAPS_KEY="+key)
	first := h.commit("no newline at the end")
	h.write("env", "A=1\n\nGOOGLE_MAPS_KEY="+key+"\n")
	eol := h.commit("newline at the end")
	h.write("env", "A=2\n\nGOOGLE_MAPS_KEY="+key+"\n")
	h.commit("another line changes")

	e := recallEngine(t)
	ctx := context.Background()
	bs, err := e.ScanRepo(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	fs, err := bs.Attribute(ctx, h.repo(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []hit{
		{"gcp-api-key", first, "env", 3, secretHMAC(key)},
		{"gcp-api-key", eol, "env", 3, secretHMAC(key)},
	}
	gl, ok := gitleaksHits(t, "git", h.dir)
	compareHits(t, hits(fs), want, gl, nil, ok)
}
