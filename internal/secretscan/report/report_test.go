package report

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

func sampleFindings() []secretscan.Finding {
	return []secretscan.Finding{
		{
			RuleID: "github-pat", Description: "GitHub PAT", BlobID: "a474c4ea0792acac89eb88fd6b6415251f3e69e2",
			Commit: "897e15e72cf4ff54ef5150004462386e6d36f0c0", Path: "cmd/main.go",
			StartLine: 3, EndLine: 3, StartColumn: 14, EndColumn: 53, Match: "REDACTED", Entropy: 5.17,
			Tags: []string{"t"}, Fingerprint: "f78d7362", Author: "A", Email: "a@b", Date: "2026-01-01T00:00:00Z", Message: "add",
		},
		{RuleID: "pkcs12-file", Description: "PKCS12", Path: "certs/a.p12", Match: "file detected: certs/a.p12", Fingerprint: "00"},
		{RuleID: "custom", Path: "dir/x.txt", StartLine: 1, EndLine: 1, StartColumn: 1, EndColumn: 20, Match: "key = REDACTED"},
	}
}

func rules(t *testing.T) []*secretscan.Rule {
	cfg, err := secretscan.DefaultConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Rules
}

func compileSARIFSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/sarif-2.1.0-rtm.5.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sarif-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("sarif-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// TestSARIFValidates validates the SARIF output against the vendored
// SARIF 2.1.0 schema, and checks the parts code-scanning UIs rely on.
func TestSARIFValidates(t *testing.T) {
	sch := compileSARIFSchema(t)
	for name, fs := range map[string][]secretscan.Finding{"findings": sampleFindings(), "none": nil} {
		var buf bytes.Buffer
		if err := WriteSARIF(&buf, rules(t), fs); err != nil {
			t.Fatal(err)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Errorf("%s: SARIF does not validate: %v", name, err)
		}
		var log struct {
			Version string
			Runs    []struct {
				Tool struct {
					Driver struct {
						Rules []struct{ ID string }
					}
				}
				Results []struct {
					RuleID    string
					RuleIndex int
					Locations []struct {
						PhysicalLocation struct {
							ArtifactLocation struct{ URI string }
							Region           *struct{ StartLine int }
						}
					}
					PartialFingerprints map[string]string
				}
			}
		}
		if err := json.Unmarshal(buf.Bytes(), &log); err != nil {
			t.Fatal(err)
		}
		run := log.Runs[0]
		if log.Version != "2.1.0" || len(run.Tool.Driver.Rules) != 222 || len(run.Results) != len(fs) {
			t.Fatalf("%s: version %q, %d rules, %d results", name, log.Version, len(run.Tool.Driver.Rules), len(run.Results))
		}
		for i, r := range run.Results {
			pl := r.Locations[0].PhysicalLocation
			if pl.ArtifactLocation.URI != fs[i].Path || r.PartialFingerprints["gitleaksFingerprint/v1"] == "" {
				t.Errorf("%s: result %d = %+v", name, i, r)
			}
			if fs[i].StartLine > 0 && (pl.Region == nil || pl.Region.StartLine != fs[i].StartLine) {
				t.Errorf("%s: result %d region = %+v", name, i, pl.Region)
			}
			if r.RuleIndex >= 0 && run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID {
				t.Errorf("%s: result %d ruleIndex %d is not %s", name, i, r.RuleIndex, r.RuleID)
			}
		}
	}

	// The validator does reject what the schema forbids.
	bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(`{"version":"2.1.0","runs":[{"tool":{"driver":{}}}]}`))
	if err := sch.Validate(bad); err == nil {
		t.Error("a driver without a name validated")
	}
}

// gitleaksFinding mirrors the JSON-visible fields of gitleaks v8.30.1's
// report.Finding (report/finding.go), with their Go types.
type gitleaksFinding struct {
	RuleID      string
	Description string
	StartLine   int
	EndLine     int
	StartColumn int
	EndColumn   int
	Match       string
	Secret      string
	File        string
	SymlinkFile string
	Commit      string
	Link        string `json:",omitempty"`
	Entropy     float32
	Author      string
	Email       string
	Date        string
	Message     string
	Tags        []string
	Fingerprint string
}

// TestJSONGitleaksCompatible round-trips the JSON report into gitleaks'
// Finding shape, and, when gitleaks is installed, has gitleaks itself load
// it as a baseline (json.Unmarshal into []report.Finding).
func TestJSONGitleaksCompatible(t *testing.T) {
	fs := sampleFindings()
	var buf bytes.Buffer
	if err := WriteJSON(&buf, fs); err != nil {
		t.Fatal(err)
	}
	var got []gitleaksFinding
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := gitleaksFinding{
		RuleID: "github-pat", Description: "GitHub PAT", StartLine: 3, EndLine: 3, StartColumn: 14, EndColumn: 53,
		Match: "REDACTED", Secret: "REDACTED", File: "cmd/main.go", Commit: "897e15e72cf4ff54ef5150004462386e6d36f0c0",
		Entropy: 5.17, Author: "A", Email: "a@b", Date: "2026-01-01T00:00:00Z", Message: "add", Tags: []string{"t"},
		Fingerprint: "897e15e72cf4ff54ef5150004462386e6d36f0c0:cmd/main.go:github-pat:3",
	}
	if len(got) != 3 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got[0], want)
	}
	if got[1].Fingerprint != "certs/a.p12:pkcs12-file:0" || got[1].Tags == nil {
		t.Errorf("no-commit finding = %+v", got[1])
	}
	var empty bytes.Buffer
	WriteJSON(&empty, nil)
	if strings.TrimSpace(empty.String()) != "[]" {
		t.Errorf("no findings = %q, want []", empty.String())
	}

	gl, err := exec.LookPath("gitleaks")
	if err != nil {
		t.Skip("gitleaks not on PATH: skipping the baseline load by gitleaks itself")
	}
	dir := t.TempDir()
	gittest.Git(t, gittest.Env(t.TempDir()), dir, "init", "-q")
	baseline := filepath.Join(t.TempDir(), "baseline.json")
	if err := os.WriteFile(baseline, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gl, "dir", "--no-banner", "--exit-code", "0", "--baseline-path", baseline, dir).CombinedOutput()
	if err != nil || strings.Contains(string(out), "not supported") {
		t.Fatalf("gitleaks rejected the JSON report as a baseline: %v\n%s", err, out)
	}
}

func TestTable(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTable(&buf, sampleFindings()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 4 || !strings.Contains(lines[1], "cmd/main.go:3") || !strings.Contains(lines[1], "897e15e72cf4") {
		t.Errorf("table:\n%s", buf.String())
	}
}

// TestTableKeepsOutControls: a match or path holding an escape sequence
// or invalid UTF-8 (a match in a binary blob may hold any byte) reaches
// the terminal as '?'.
func TestTableKeepsOutControls(t *testing.T) {
	var b strings.Builder
	err := WriteTable(&b, []secretscan.Finding{{RuleID: "r", Path: "a\x1b]0;x\x07.txt", StartLine: 1, Match: "key=\x1b[2J\xff REDACTED"}})
	if err != nil {
		t.Fatal(err)
	}
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\xff") || !strings.Contains(out, "a?]0;x?.txt") || !strings.Contains(out, "key=?[2J? REDACTED") {
		t.Errorf("table %q", out)
	}
}
