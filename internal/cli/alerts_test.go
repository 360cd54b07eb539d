package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
)

const cliSecret = "AKIAIOSFODNN7EXAMPLESECRET"

// plantAlerts records two alerts in acme/app: one found by two rules at
// three places (one of them without a line), one resolved.
func plantAlerts(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	objects, err := fsstore.Open(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := metaStore(t, dir).Repo(ctx, "acme", "app")
	if err != nil {
		t.Fatal(err)
	}
	as := alerts.New(objects)
	blob := strings.Repeat("a", 40)
	fs := []alerts.Finding{
		{RuleID: "aws-access-token", Description: "AWS access key", Commit: strings.Repeat("c", 40), Path: "cfg/prod env.txt", Line: 4, Column: 7, BlobID: blob, Match: "key=AKIA…", Secret: cliSecret},
		{RuleID: "aws-access-token", Path: "cfg/copy.txt", Line: 1, Column: 1, BlobID: blob, Match: "key=AKIA…", Secret: cliSecret},
		{RuleID: "generic-api-key", Path: "notes", Line: 0, BlobID: blob, Match: "…", Secret: cliSecret},
		{RuleID: "slack-token", Path: "bot.py", Line: 9, BlobID: strings.Repeat("b", 40), Match: "xoxb-…", Secret: "xoxb-secret-token"},
	}
	if err := as.Record(ctx, "acme", repo.ID, fs, alerts.RunRef{ID: "r1", Seq: 2}); err != nil {
		t.Fatal(err)
	}
	fp, err := as.Fingerprint(ctx, "acme", "xoxb-secret-token")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := as.SetState(ctx, "acme", repo.ID, fp, alerts.Change{State: alerts.StateResolved, Resolution: alerts.ResolutionRevoked, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := as.RecordBypass(ctx, "acme", repo.ID, fs[0], "dev", alerts.BypassWillFixLater); err != nil {
		t.Fatal(err)
	}
}

func TestRepoAlerts(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := t.TempDir()
	mustGhost(t, dir, "init")
	mustGhost(t, dir, "tenant", "create", "acme", "--org")
	mustGhost(t, dir, "repo", "create", "acme/app")
	mustGhost(t, dir, "repo", "create", "acme/empty")
	plantAlerts(t, dir)

	table := mustGhost(t, dir, "repo", "alerts", "acme/app")
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 3 || !strings.Contains(table, "resolved (revoked)") || !strings.Contains(table, "cfg/prod env.txt:4") {
		t.Errorf("table:\n%s", table)
	}
	for _, format := range []string{"table", "json", "sarif"} {
		if out := mustGhost(t, dir, "repo", "alerts", "acme/app", "--format", format); strings.Contains(out, cliSecret) || strings.Contains(out, "xoxb-secret") {
			t.Errorf("--format %s shows a secret:\n%s", format, out)
		}
	}

	var js []client.Alert
	if err := json.Unmarshal([]byte(mustGhost(t, dir, "repo", "alerts", "acme/app", "--format", "json", "--state", "open")), &js); err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0].RuleID != "aws-access-token" || len(js[0].Locations) != 3 || len(js[0].Rules) != 2 || js[0].Repository != "acme/app" ||
		len(js[0].Bypasses) != 1 || js[0].Bypasses[0].Reason != string(alerts.BypassWillFixLater) {
		t.Errorf("open alerts: %+v", js)
	}
	if err := json.Unmarshal([]byte(mustGhost(t, dir, "repo", "alerts", "acme/app", "--format", "json", "--rule", "slack-token")), &js); err != nil || len(js) != 1 || js[0].State != string(alerts.StateResolved) {
		t.Errorf("--rule slack-token: %+v, %v", js, err)
	}
	if err := json.Unmarshal([]byte(mustGhost(t, dir, "repo", "alerts", "acme/empty", "--format", "json")), &js); err != nil || len(js) != 0 {
		t.Errorf("no alerts: %+v, %v", js, err)
	}

	var sarif struct {
		Version string `json:"version"`
		Schema  string `json:"$schema"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name  string `json:"name"`
					Rules []struct {
						ID string `json:"id"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Message   struct {
					Text string `json:"text"`
				} `json:"message"`
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct {
							URI string `json:"uri"`
						} `json:"artifactLocation"`
						Region *struct {
							StartLine   int `json:"startLine"`
							StartColumn int `json:"startColumn"`
						} `json:"region"`
					} `json:"physicalLocation"`
				} `json:"locations"`
				PartialFingerprints map[string]string `json:"partialFingerprints"`
				Suppressions        []struct {
					Kind, Status string
				} `json:"suppressions"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(mustGhost(t, dir, "repo", "alerts", "acme/app", "--format", "sarif")), &sarif); err != nil {
		t.Fatal(err)
	}
	if sarif.Version != "2.1.0" || !strings.Contains(sarif.Schema, "sarif-2.1.0") || len(sarif.Runs) != 1 || sarif.Runs[0].Tool.Driver.Name == "" {
		t.Fatalf("sarif header: %+v", sarif)
	}
	run := sarif.Runs[0]
	if len(run.Results) != 4 {
		t.Fatalf("%d results, want one per location (4)", len(run.Results))
	}
	uris := map[string]bool{}
	suppressed := 0
	for _, r := range run.Results {
		if r.RuleIndex < 0 || r.RuleIndex >= len(run.Tool.Driver.Rules) || run.Tool.Driver.Rules[r.RuleIndex].ID != r.RuleID {
			t.Errorf("result of %s has ruleIndex %d", r.RuleID, r.RuleIndex)
		}
		if r.Message.Text == "" || r.Level != "error" || len(r.Locations) != 1 || len(r.PartialFingerprints["ghostAlert/v1"]) != 64 {
			t.Errorf("result %+v", r)
		}
		pl := r.Locations[0].PhysicalLocation
		uris[pl.ArtifactLocation.URI] = true
		if pl.Region != nil && pl.Region.StartLine < 1 {
			t.Errorf("region with startLine %d", pl.Region.StartLine)
		}
		if pl.ArtifactLocation.URI == "notes" && pl.Region != nil {
			t.Errorf("a location without a line has a region")
		}
		if len(r.Suppressions) > 0 {
			suppressed++
		}
	}
	if !uris["cfg/prod%20env.txt"] || suppressed != 1 || len(run.Tool.Driver.Rules) != 3 {
		t.Errorf("uris %v, %d suppressed, %d rules", uris, suppressed, len(run.Tool.Driver.Rules))
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"repo", "alerts", "acme/app", "--format", "xml"}, 2, "--format"},
		{[]string{"repo", "alerts", "acme/app", "--state", "closed"}, 2, "--state"},
		{[]string{"repo", "alerts", "acme"}, 2, "<owner>/<name>"},
		{[]string{"repo", "alerts", "acme/nope"}, 1, "not found"},
	} {
		if r := ghost(t, dir, tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, %q", tc.args, r.code, r.stderr)
		}
	}
}

// TestOneLineKeepsOutControls: a redacted match reaches the table on one
// line and without anything a terminal would interpret.
// TestAlertResolveReopen: an alert resolved and reopened by the id the
// table shows, or any unique prefix of 7 digits, never fewer; --state all
// lists both states; the resolver is named.
func TestAlertResolveReopen(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	mustGhost(t, dir, "init")
	mustGhost(t, dir, "tenant", "create", "acme", "--org")
	mustGhost(t, dir, "repo", "create", "acme/app")
	plantAlerts(t, dir)
	var js []client.Alert
	if err := json.Unmarshal([]byte(mustGhost(t, dir, "repo", "alerts", "acme/app", "--format", "json", "--state", "open")), &js); err != nil || len(js) != 1 {
		t.Fatalf("open alerts: %+v %v", js, err)
	}
	id := js[0].ID
	if r := ghost(t, dir, "repo", "alerts", "resolve", "acme/app", id[:6], "--reason", "revoked"); r.code != 1 || !strings.Contains(r.stderr, "at least 7 hex digits") {
		t.Errorf("a 6-digit prefix: %+v", r)
	}
	if r := ghost(t, dir, "repo", "alerts", "resolve", "acme/app", id[:7]); r.code != 2 || !strings.Contains(r.stderr, "--reason") {
		t.Errorf("resolve without a reason: %+v", r)
	}
	out := mustGhost(t, dir, "repo", "alerts", "resolve", "acme/app", id[:7], "--reason", "false_positive", "--comment", "a test key")
	if !strings.Contains(out, "alert "+id[:12]+" of acme/app: resolved (false_positive)") {
		t.Errorf("resolve: %q", out)
	}
	if table := mustGhost(t, dir, "repo", "alerts", "acme/app", "--state", "open"); strings.Count(strings.TrimSpace(table), "\n") != 0 {
		t.Errorf("open alerts after resolving:\n%s", table)
	}
	all := mustGhost(t, dir, "repo", "alerts", "acme/app", "--state", "all")
	if strings.Count(all, "resolved (") != 2 {
		t.Errorf("--state all:\n%s", all)
	}
	if err := json.Unmarshal([]byte(mustGhost(t, dir, "repo", "alerts", "acme/app", "--format", "json", "--state", "resolved", "--rule", "aws-access-token")), &js); err != nil || len(js) != 1 ||
		js[0].ResolutionComment != "a test key" || !strings.Contains(js[0].ResolvedBy, "(store)") {
		t.Errorf("resolved alert: %+v %v", js, err)
	}
	if out := mustGhost(t, dir, "repo", "alerts", "reopen", "acme/app", strings.ToUpper(id[:12])); !strings.Contains(out, ": open") {
		t.Errorf("reopen: %q", out)
	}
	if r := ghost(t, dir, "repo", "alerts", "reopen", "acme/app", "0000000"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("an unknown id: %+v", r)
	}
	if r := ghost(t, dir, "repo", "alerts", "acme/app", "--state", "closed"); r.code != 2 {
		t.Errorf("--state closed: %+v", r)
	}
}

func TestOneLineKeepsOutControls(t *testing.T) {
	if got := oneLine("a\nb\x1b[2J\xffc"); got != `a\nb?[2J?c` {
		t.Errorf("oneLine = %q", got)
	}
}
