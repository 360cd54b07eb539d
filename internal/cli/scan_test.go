package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
)

const fakePAT = "ghp_" + "Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7"

func scanRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	env := gittest.Env(t.TempDir())
	gittest.Git(t, env, dir, "init", "-q")
	for p, c := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, env, dir, "add", "-A")
	gittest.Git(t, env, dir, "commit", "-q", "--allow-empty", "-m", "c")
	return dir
}

func runGhost(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(context.Background(), args, &o, &e)
	return code, o.String(), e.String()
}

func TestScanExitCodesAndTable(t *testing.T) {
	dirty := scanRepo(t, map[string]string{"a.go": "const t = \"" + fakePAT + "\"\n"})
	clean := scanRepo(t, map[string]string{"a.go": "package a\n"})

	code, out, errOut := runGhost("scan", dirty, "--workers", "2")
	if code != 1 || !strings.Contains(out, "github-pat") || !strings.Contains(out, "a.go:1") || strings.Contains(out, fakePAT) {
		t.Errorf("dirty: code %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(errOut, "\r") {
		t.Errorf("progress bar drawn on a non-terminal stderr: %q", errOut)
	}
	for flag, want := range map[string]int{"0": 0, "1": 1, "2": 2, "7": 7, "126": 2, "-1": 2} {
		if code, _, _ := runGhost("scan", "--exit-code", flag, dirty); code != want {
			t.Errorf("--exit-code %s: code %d, want %d", flag, code, want)
		}
	}
	if code, _, _ := runGhost("scan", "--exit-code", "7", clean); code != 0 {
		t.Errorf("--exit-code 7 without findings: code %d, want 0", code)
	}
	if code, out, _ := runGhost("scan", clean); code != 0 || out != "no secrets found\n" {
		t.Errorf("clean: code %d\n%s", code, out)
	}
	if code, _, _ := runGhost("scan", t.TempDir()); code != 2 {
		t.Errorf("not a repository: code %d, want 2", code)
	}
	if code, _, _ := runGhost("scan", "--report-format", "xml", dirty); code != 2 {
		t.Errorf("bad format: code %d, want 2", code)
	}
	// --no-git scans the work tree's files, without commits.
	code, out, _ = runGhost("scan", "--no-git", dirty)
	if code != 1 || !strings.Contains(out, "a.go:1") || !strings.Contains(out, " - ") {
		t.Errorf("--no-git: code %d\n%s", code, out)
	}
}

func TestScanReports(t *testing.T) {
	dir := scanRepo(t, map[string]string{"a.go": "const t = \"" + fakePAT + "\"\n"})
	out := filepath.Join(t.TempDir(), "r.json")
	if code, _, e := runGhost("scan", dir, "--report-path", out); code != 1 {
		t.Fatalf("code %d: %s", code, e)
	}
	var fs []map[string]any
	data, _ := os.ReadFile(out)
	if err := json.Unmarshal(data, &fs); err != nil || len(fs) != 1 || fs[0]["RuleID"] != "github-pat" {
		t.Fatalf("json report (%v): %s", err, data)
	}
	sarif := filepath.Join(t.TempDir(), "r.sarif")
	if code, _, e := runGhost("scan", "--report-format", "sarif", "--report-path", sarif, dir); code != 1 {
		t.Fatalf("code %d: %s", code, e)
	}
	data, _ = os.ReadFile(sarif)
	if !strings.Contains(string(data), `"version": "2.1.0"`) || !strings.Contains(string(data), `"partialFingerprints"`) {
		t.Errorf("sarif report: %.300s", data)
	}
}

// TestScanRepoConfig: a .gitleaks.toml at the root is used, as in gitleaks,
// and --config overrides it.
func TestScanRepoConfig(t *testing.T) {
	cfg := "[[rules]]\nid = \"house\"\nregex = '''house_[0-9]{8}'''\nkeywords = [\"house_\"]\n"
	dir := scanRepo(t, map[string]string{
		".gitleaks.toml": cfg,
		"a.txt":          "house_12345678\n" + fakePAT + "\n",
	})
	code, out, _ := runGhost("scan", dir)
	if code != 1 || !strings.Contains(out, "house") || strings.Contains(out, "github-pat") {
		t.Errorf("repo config: code %d\n%s", code, out)
	}
	def := filepath.Join(t.TempDir(), "d.toml")
	os.WriteFile(def, []byte("[extend]\nuseDefault = true\n"), 0o644)
	code, out, _ = runGhost("scan", "--config", def, dir)
	if code != 1 || strings.Contains(out, "house") || !strings.Contains(out, "github-pat") {
		t.Errorf("--config: code %d\n%s", code, out)
	}
}

// TestScanBinary: a NUL byte does not hide a secret from ghost scan, in
// history or in a directory; --skip-binary skips and counts such blobs,
// as gitleaks does.
func TestScanBinary(t *testing.T) {
	dir := scanRepo(t, map[string]string{"notes.txt": "\x00\ntoken = \"" + fakePAT + "\"\n"})
	for _, args := range [][]string{{"scan", dir}, {"scan", "--no-git", dir}} {
		code, out, errOut := runGhost(args...)
		if code != 1 || !strings.Contains(out, "notes.txt:2") || !strings.Contains(errOut, "(1 binary)") {
			t.Errorf("%v: code %d\n%s\n%s", args, code, out, errOut)
		}
		code, out, errOut = runGhost(append(args, "--skip-binary")...)
		if code != 0 || !strings.Contains(errOut, "skipped 1 binary") {
			t.Errorf("%v --skip-binary: code %d\n%s\n%s", args, code, out, errOut)
		}
	}
}
