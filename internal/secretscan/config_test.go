package secretscan

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
)

const testRule = `
[[rules]]
id = "test-token"
description = "test token"
regex = '''tok_[a-z0-9]{16}'''
keywords = ["tok_"]
`

// configRepo has one commit with four test-token secrets.
func configRepo(t *testing.T) (dir, commit string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "repo")
	env := gittest.Env(t.TempDir())
	files := map[string]string{
		"a.txt":         "first\ntok_aaaa1111bbbb2222\n",
		"b/ignored.txt": "tok_cccc3333dddd4444\n",
		"c.txt":         "x = tok_eeee5555ffff6666 # test\n",
		"d.txt":         "tok_dummy00000000000\n",
		"e.txt":         "ghp_Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7 and glpat-Xk2Lq9Zr7Tm4Vb8Nc3Wd\n",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gittest.Git(t, env, dir, "init", "-q", "-b", "main")
	gittest.Git(t, env, dir, "add", "-A")
	gittest.Git(t, env, dir, "commit", "-q", "-m", "secrets")
	return dir, strings.TrimSpace(gittest.Git(t, env, dir, "rev-parse", "HEAD"))
}

// TestConfigBehaviour runs each config over the same history and checks
// the findings, and that gitleaks (when installed) finds the same.
func TestConfigBehaviour(t *testing.T) {
	dir, commit := configRepo(t)
	all := []string{"test-token a.txt:2", "test-token b/ignored.txt:1", "test-token c.txt:1", "test-token d.txt:1"}
	cases := []struct {
		name, config, ignore string
		want                 []string
	}{
		{"plain", testRule, "", all},
		{"rule allowlist regex on secret", testRule + `
[[rules.allowlists]]
regexes = ['''^tok_dummy''']`, "", all[:3]},
		{"regexTarget line", testRule + `
[[rules.allowlists]]
regexTarget = "line"
regexes = ['''# test$''']`, "", []string{all[0], all[1], all[3]}},
		{"regexTarget match", testRule + `
[[rules.allowlists]]
regexTarget = "match"
regexes = ['''cccc''']`, "", []string{all[0], all[2], all[3]}},
		{"stopwords", testRule + `
[[rules.allowlists]]
stopwords = ["DUMMY"]`, "", all[:3]},
		{"global path allowlist", testRule + `
[[allowlists]]
paths = ['''^b/''']`, "", []string{all[0], all[2], all[3]}},
		{"deprecated global allowlist", testRule + `
[allowlist]
paths = ['''^b/''']`, "", []string{all[0], all[2], all[3]}},
		{"AND path and regex", testRule + `
[[rules.allowlists]]
condition = "AND"
paths = ['''^[ac]\.txt$''']
regexes = ['''eeee''']`, "", []string{all[0], all[1], all[3]}},
		{"commit allowlist", testRule + `
[[allowlists]]
commits = ["` + strings.ToUpper(commit) + `"]`, "", nil},
		{"targetRules", testRule + `
[[rules]]
id = "other"
regex = '''nothing_matches_this'''
[[allowlists]]
targetRules = ["test-token"]
regexes = ['''aaaa''']`, "", all[1:]},
		{"entropy", strings.Replace(testRule, "keywords", "entropy = 2.5\nkeywords", 1), "", []string{all[0], all[1], all[2]}},
		{"gitleaksignore", testRule, "# comment\n" + commit + ":a.txt:test-token:2\nc.txt:test-token:1\n", []string{all[1], all[3]}},
		{"extend default, disabled rule", `
[extend]
useDefault = true
disabledRules = ["github-pat"]
` + testRule, "", append([]string{"gitlab-pat e.txt:1"}, all...)},
		{"extend default, override rule", `
[extend]
useDefault = true
[[rules]]
id = "gitlab-pat"
[[rules.allowlists]]
stopwords = ["xk2lq9"]
`, "", []string{"github-pat e.txt:1"}},
	}
	gl, glErr := exec.LookPath("gitleaks")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			cfgPath := filepath.Join(tmp, "gitleaks.toml")
			ignPath := filepath.Join(tmp, "gitleaksignore")
			if err := os.WriteFile(cfgPath, []byte(tc.config), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(ignPath, []byte(tc.ignore), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			ig, err := LoadIgnore(ignPath)
			if err != nil {
				t.Fatal(err)
			}
			e, err := New(cfg, Options{Workers: 1, Ignore: ig})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			bs, err := e.ScanRepo(ctx, Repo{Dir: dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			fs, err := bs.Attribute(ctx, Repo{Dir: dir}, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				got = append(got, f.RuleID+" "+f.Path+":"+itoa(f.StartLine))
			}
			if !sameSet(got, tc.want) {
				t.Errorf("ghost found %q, want %q", got, tc.want)
			}
			if glErr != nil {
				return
			}
			out := filepath.Join(tmp, "out.json")
			cmd := exec.Command(gl, "git", "--no-banner", "--log-level", "error", "--exit-code", "0",
				"--config", cfgPath, "--gitleaks-ignore-path", ignPath,
				"--report-format", "json", "--report-path", out, dir)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("gitleaks: %v\n%s", err, b)
			}
			var glf []struct {
				RuleID, File string
				StartLine    int
			}
			data, _ := os.ReadFile(out)
			if err := json.Unmarshal(data, &glf); err != nil {
				t.Fatal(err)
			}
			var theirs []string
			for _, f := range glf {
				theirs = append(theirs, f.RuleID+" "+f.File+":"+itoa(f.StartLine))
			}
			if !sameSet(theirs, got) {
				t.Errorf("gitleaks found %q, ghost %q", theirs, got)
			}
		})
	}
	if glErr != nil {
		t.Log("gitleaks not on PATH: compared with the expected results only")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := make(map[string]int)
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return true
}

func TestConfigErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"bad toml":          "[[rules]\n",
		"bad regex":         "[[rules]]\nid = \"x\"\nregex = '''(['''\n",
		"no id":             "[[rules]]\nregex = '''x'''\n",
		"no regex or path":  "[[rules]]\nid = \"x\"\n",
		"bad secret group":  "[[rules]]\nid = \"x\"\nregex = '''(a)'''\nsecretGroup = 2\n",
		"empty allowlist":   "[[allowlists]]\ndescription = \"nothing\"\n",
		"bad condition":     "[[allowlists]]\ncondition = \"XOR\"\npaths = ['''a''']\n",
		"bad regexTarget":   "[[allowlists]]\nregexTarget = \"file\"\npaths = ['''a''']\n",
		"unknown target":    "[[allowlists]]\ntargetRules = [\"nope\"]\npaths = ['''a''']\n",
		"extend path+deflt": "[extend]\nuseDefault = true\npath = \"x.toml\"\n",
	} {
		if _, err := ParseConfig([]byte(doc)); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err = %v, want ErrConfig", name, err)
		}
	}
}

// FuzzParseConfig: any input either parses into a usable rule set or is
// rejected with an error; it never panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(testRule))
	f.Add([]byte("[extend]\nuseDefault = true\ndisabledRules = [\"github-pat\"]\n"))
	f.Add([]byte("[[rules]]\nid = \"x\"\nregex = '''(a)(b)'''\nsecretGroup = 2\n[[rules.allowlists]]\ncondition = \"AND\"\nregexTarget = \"line\"\nregexes = ['''a''']\nstopwords = [\"b\"]\npaths = ['''c''']\n"))
	f.Add([]byte("[allowlist]\npaths = ['''x''']\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		cfg, err := ParseConfig(doc)
		if err != nil {
			return
		}
		e, err := New(cfg, Options{Workers: 1})
		if err != nil {
			t.Fatalf("parsed config does not build an engine: %v", err)
		}
		e.scanContent([]byte("tok_aaaa1111bbbb2222 ab c\n"))
	})
}

// FuzzIgnore: .gitleaksignore parsing never panics.
func FuzzIgnore(f *testing.F) {
	f.Add("abc:a.txt:rule:2\na.txt:rule:1\n# c\n")
	f.Fuzz(func(t *testing.T, s string) {
		ig, err := ParseIgnore(strings.NewReader(s))
		if err != nil {
			return
		}
		ig.Ignored(&Finding{Path: "a.txt", RuleID: "rule", StartLine: 1, Commit: "abc"})
	})
}
