package api

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/testkit"
)

const plantedSecret = "ghp_plantedSecretValue0123456789abcdef"

// alertFixture is the API fixture with alerts enabled and these
// repositories: acme/secret (private org repo; bob is a member),
// alice/pub (public) and alice/priv (private), each with one alert of
// plantedSecret, and alice/priv with a second one.
type alertFixture struct {
	*fixture
	a       *alerts.Store
	objects *testkit.FailGet // under both the metadata and the alerts
	logs    *testkit.Buffer
	ids     map[string]string // "owner/name" -> the planted secret's alert id
}

func newAlertFixture(t *testing.T) *alertFixture {
	t.Helper()
	objects := &testkit.FailGet{Store: memstore.New()}
	logs := &testkit.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	f := newFixtureOn(t, objects, logger)
	a := alerts.New(objects)
	srv := httptest.NewServer(NewHandler(f.s, logger, WithAlerts(a))) // 127.0.0.1
	t.Cleanup(srv.Close)
	f.srv = srv
	af := &alertFixture{fixture: f, a: a, objects: objects, logs: logs, ids: map[string]string{}}
	ctx := context.Background()
	for _, r := range []struct {
		owner, name string
		public      bool
	}{{"acme", "secret", false}, {"alice", "pub", true}, {"alice", "priv", false}} {
		repo, err := f.s.CreateRepo(ctx, r.owner, r.name, r.public)
		if err != nil {
			t.Fatal(err)
		}
		fs := []alerts.Finding{{
			RuleID: "github-pat", Description: "GitHub token", Commit: strings.Repeat("c", 40),
			Path: "config.yml", Line: 3, Column: 9, BlobID: strings.Repeat("b", 40),
			Match: "token: ghp_REDACTED", Secret: plantedSecret,
		}}
		if r.name == "priv" {
			fs = append(fs, alerts.Finding{RuleID: "aws-access-token", Path: "x", Line: 1, BlobID: strings.Repeat("d", 40), Match: "AKIA…", Secret: "AKIAEXAMPLE"})
		}
		if err := a.Record(ctx, r.owner, repo.ID, fs, alerts.RunRef{ID: "run", Seq: 1}); err != nil {
			t.Fatal(err)
		}
		fp, err := a.Fingerprint(ctx, r.owner, plantedSecret)
		if err != nil {
			t.Fatal(err)
		}
		af.ids[repo.FullName()] = fp
	}
	return af
}

// TestAlertsAPIAccess: alerts are for those who may write the
// repository (its owner's write tokens, an owning org's members, admins).
// Anyone else gets 404 for every alert endpoint: a caller who cannot read
// the repository the answer of a missing repository, one who can read it
// (anonymous or another tenant on a public repository, a read token) the
// answer of a path that does not exist, word for word.
func TestAlertsAPIAccess(t *testing.T) {
	f := newAlertFixture(t)
	noPage := f.do("GET", "/api/repos/alice/pub/no-such-page", f.aliceW, "")
	noRepo := f.do("GET", "/api/repos/alice/priv", f.carolW, "")
	if noPage.status != 404 || noRepo.status != 404 {
		t.Fatalf("reference answers: %d %s, %d %s", noPage.status, noPage.body, noRepo.status, noRepo.body)
	}
	type call struct{ name, method, path, body string }
	calls := func(repo string) []call {
		id := f.ids[repo]
		base := "/api/repos/" + repo + "/alerts"
		return []call{
			{"list", "GET", base, ""},
			{"get", "GET", base + "/" + id, ""},
			{"patch", "PATCH", base + "/" + id, `{"state":"open"}`},
			{"reveal", "POST", base + "/" + id + "/reveal", ""},
		}
	}
	for _, tc := range []struct {
		who, auth, repo string
		want            int
		same            resp // the body a refusal must equal
	}{
		{"owner", f.aliceW, "alice/priv", 200, resp{}},
		{"owner", f.aliceW, "alice/pub", 200, resp{}},
		{"org member", f.bobW, "acme/secret", 200, resp{}},
		{"admin", f.admin, "alice/priv", 200, resp{}},
		{"anonymous", "", "alice/pub", 404, noPage},
		{"read token", f.aliceR, "alice/pub", 404, noPage},
		{"read token", f.aliceR, "alice/priv", 404, noPage},
		{"other tenant", f.carolW, "alice/pub", 404, noPage},
		{"other tenant", f.carolW, "alice/priv", 404, noRepo},
		{"anonymous", "", "alice/priv", 404, f.do("GET", "/api/repos/alice/priv", "", "")},
		{"non-member", f.aliceW, "acme/secret", 404, f.do("GET", "/api/repos/acme/secret", f.aliceW, "")},
	} {
		for _, c := range calls(tc.repo) {
			r := f.do(c.method, c.path, tc.auth, c.body)
			if r.status != tc.want {
				t.Errorf("%s: %s %s = %d %s, want %d", tc.who, c.method, c.path, r.status, r.body, tc.want)
				continue
			}
			if tc.want == 404 && !bytes.Equal(r.body, tc.same.body) {
				t.Errorf("%s: %s %s answers %s, not the same as %s", tc.who, c.method, c.path, r.body, tc.same.body)
			}
		}
	}
	f.run([]step{
		// Alice's id is no id in acme's repository.
		{"id of another repo", "GET", "/api/repos/acme/secret/alerts/" + f.ids["alice/priv"], f.admin, "", 404},
		{"malformed id", "GET", "/api/repos/acme/secret/alerts/xyz", f.admin, "", 400},
		{"short prefix", "GET", "/api/repos/acme/secret/alerts/" + f.ids["acme/secret"][:6], f.admin, "", 400},
		{"prefix", "GET", "/api/repos/acme/secret/alerts/" + f.ids["acme/secret"][:7], f.admin, "", 200},
		{"prefix of another repo's", "GET", "/api/repos/acme/secret/alerts/" + f.ids["alice/priv"][:12], f.admin, "", 404},
		{"absent repo", "GET", "/api/repos/alice/nope/alerts", f.aliceW, "", 404},
		// The tenant-wide list: writers only.
		{"tenant list owner", "GET", "/api/tenants/alice/alerts", f.aliceW, "", 200},
		{"tenant list read token", "GET", "/api/tenants/alice/alerts", f.aliceR, "", 404},
		{"tenant list other tenant", "GET", "/api/tenants/alice/alerts", f.carolW, "", 404},
		{"tenant list anonymous", "GET", "/api/tenants/alice/alerts", "", "", 404},
		{"tenant list org member", "GET", "/api/tenants/acme/alerts", f.bobW, "", 200},
		{"tenant list non-member", "GET", "/api/tenants/acme/alerts", f.aliceW, "", 404},
	})
}

func TestAlertsAPIListsRedacted(t *testing.T) {
	f := newAlertFixture(t)
	for _, path := range []string{
		"/api/repos/alice/priv/alerts",
		"/api/repos/alice/priv/alerts/" + f.ids["alice/priv"],
		"/api/tenants/alice/alerts",
	} {
		r := f.do("GET", path, f.aliceW, "")
		if r.status != 200 || strings.Contains(string(r.body), plantedSecret) || strings.Contains(string(r.body), "AKIAEXAMPLE") {
			t.Errorf("GET %s = %d, shows the secret: %s", path, r.status, r.body)
		}
	}
	var page alertPageJSON
	f.do("GET", "/api/repos/alice/priv/alerts", f.aliceW, "").json(t, &page)
	if len(page.Alerts) != 2 || page.NextPage != "" {
		t.Fatalf("page %+v", page)
	}
	var a alertJSON
	f.do("GET", "/api/repos/alice/priv/alerts/"+f.ids["alice/priv"], f.aliceW, "").json(t, &a)
	if a.State != "open" || a.Repository != "alice/priv" || len(a.Locations) != 1 || a.Locations[0].Path != "config.yml" || a.SecretRedacted != "token: ghp_REDACTED" || !a.Revealable {
		t.Errorf("alert %+v", a)
	}
}

func TestAlertsAPIReveal(t *testing.T) {
	f := newAlertFixture(t)
	id := f.ids["acme/secret"]
	r := f.do("POST", "/api/repos/acme/secret/alerts/"+id+"/reveal", f.bobW, "")
	var got struct{ ID, Secret string }
	r.json(t, &got)
	if r.status != 200 || got.Secret != plantedSecret || got.ID != id || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("reveal = %d %+v", r.status, got)
	}
	l := f.logs.String()
	if !strings.Contains(l, "alert secret revealed") || !strings.Contains(l, "by=bob") || !strings.Contains(l, "alert="+id) || !strings.Contains(l, "repo=acme/secret") {
		t.Errorf("reveal not logged with who and which alert:\n%s", l)
	}
	if strings.Contains(l, plantedSecret) {
		t.Errorf("the log shows the secret")
	}
}

func TestAlertsAPIPatch(t *testing.T) {
	f := newAlertFixture(t)
	path := "/api/repos/alice/priv/alerts/" + f.ids["alice/priv"]
	f.run([]step{
		{"resolve", "PATCH", path, f.aliceW, `{"state":"resolved","resolution":"revoked","comment":"rotated"}`, 200},
		{"unknown state", "PATCH", path, f.aliceW, `{"state":"closed"}`, 400},
		{"no resolution", "PATCH", path, f.aliceW, `{"state":"resolved"}`, 400},
		{"bad resolution", "PATCH", path, f.aliceW, `{"state":"resolved","resolution":"fixed"}`, 400},
		{"unknown field", "PATCH", path, f.aliceW, `{"state":"open","why":"x"}`, 400},
		{"absent alert", "PATCH", "/api/repos/alice/priv/alerts/" + strings.Repeat("0", 64), f.aliceW, `{"state":"open"}`, 404},
	})
	var a alertJSON
	f.do("GET", path, f.aliceW, "").json(t, &a)
	if a.State != "resolved" || a.Resolution != "revoked" || a.ResolvedBy != "alice" || a.ResolutionComment != "rotated" || a.ResolvedAt == nil || len(a.History) != 1 {
		t.Errorf("after resolve and refused changes: %+v", a)
	}
	var page alertPageJSON
	f.do("GET", "/api/repos/alice/priv/alerts?state=open", f.aliceW, "").json(t, &page)
	if len(page.Alerts) != 1 || page.Alerts[0].RuleID != "aws-access-token" {
		t.Errorf("open alerts %+v", page.Alerts)
	}
	f.do("GET", "/api/repos/alice/priv/alerts?state=resolved", f.aliceW, "").json(t, &page)
	if len(page.Alerts) != 1 || page.Alerts[0].ID != f.ids["alice/priv"] {
		t.Errorf("resolved alerts %+v", page.Alerts)
	}
	f.run([]step{{"reopen", "PATCH", path, f.aliceW, `{"state":"open","comment":"not rotated after all"}`, 200}})
	a = alertJSON{} // decoding leaves fields the answer omits alone
	f.do("GET", path, f.aliceW, "").json(t, &a)
	if a.State != "open" || a.Resolution != "" || a.ResolvedAt != nil || len(a.History) != 2 {
		t.Errorf("after reopen: %+v", a)
	}
}

func TestAlertsAPIListFiltersAndPages(t *testing.T) {
	f := newAlertFixture(t)
	f.run([]step{
		{"bad state", "GET", "/api/repos/alice/priv/alerts?state=closed", f.aliceW, "", 400},
		{"bad per_page", "GET", "/api/repos/alice/priv/alerts?per_page=0", f.aliceW, "", 400},
		{"bad page", "GET", "/api/repos/alice/priv/alerts?page=%21%21", f.aliceW, "", 400},
		{"tenant of nobody", "GET", "/api/tenants/nobody/alerts", f.admin, "", 404},
		{"tenant repo filter, unknown", "GET", "/api/tenants/alice/alerts?repo=nope", f.aliceW, "", 404},
	})
	var page alertPageJSON
	f.do("GET", "/api/repos/alice/priv/alerts?rule=aws-access-token", f.aliceW, "").json(t, &page)
	if len(page.Alerts) != 1 || page.Alerts[0].RuleID != "aws-access-token" {
		t.Errorf("rule filter: %+v", page.Alerts)
	}
	// Page through alice's alerts one at a time: three, no repeats.
	seen := map[string]bool{}
	next := ""
	for i := 0; ; i++ {
		var p alertPageJSON
		f.do("GET", "/api/tenants/alice/alerts?per_page=1&page="+next, f.aliceW, "").json(t, &p)
		for _, a := range p.Alerts {
			k := a.Repository + "/" + a.ID
			if seen[k] {
				t.Fatalf("%s twice", k)
			}
			seen[k] = true
		}
		if p.NextPage == "" {
			break
		}
		if i > 10 {
			t.Fatal("no end")
		}
		next = p.NextPage
	}
	if len(seen) != 3 {
		t.Errorf("alice sees %d alerts across her repositories, want 3: %v", len(seen), seen)
	}
	// Another tenant, anonymous and a read token see none, not even the
	// public repository's (404, TestAlertsAPIAccess).
	for _, auth := range []string{f.carolW, "", f.aliceR} {
		if r := f.do("GET", "/api/tenants/alice/alerts", auth, ""); r.status != 404 {
			t.Errorf("outsider %q: %d %s", auth, r.status, r.body)
		}
	}
	// An org member sees the org's private alerts, as an admin does.
	for _, auth := range []string{f.bobW, f.admin} {
		var p alertPageJSON
		f.do("GET", "/api/tenants/acme/alerts", auth, "").json(t, &p)
		if len(p.Alerts) != 1 {
			t.Errorf("acme's alerts: %d, want 1", len(p.Alerts))
		}
	}
	f.do("GET", "/api/tenants/alice/alerts?repo=PRIV", f.aliceW, "").json(t, &page)
	if len(page.Alerts) != 2 {
		t.Errorf("repo filter: %d alerts", len(page.Alerts))
	}
	// A deleted repository's alerts no longer show.
	if err := f.s.DeleteRepo(context.Background(), "alice", "priv"); err != nil {
		t.Fatal(err)
	}
	f.do("GET", "/api/tenants/alice/alerts", f.aliceW, "").json(t, &page)
	if len(page.Alerts) != 1 {
		t.Errorf("after deleting alice/priv: %d alerts", len(page.Alerts))
	}
}

// TestAlertsAPIOutage: a failing alert store is 503 with plain words, not
// 404 (the alert is not gone) or 500.
func TestAlertsAPIOutage(t *testing.T) {
	f := newAlertFixture(t)
	f.objects.Fail("meta/alerts/")
	defer f.objects.Heal()
	for _, st := range []step{
		{"get", "GET", "/api/repos/alice/priv/alerts/" + f.ids["alice/priv"], f.aliceW, "", 503},
		{"list", "GET", "/api/repos/alice/priv/alerts", f.aliceW, "", 503},
		{"reveal", "POST", "/api/repos/alice/priv/alerts/" + f.ids["alice/priv"] + "/reveal", f.aliceW, "", 503},
		{"patch", "PATCH", "/api/repos/alice/priv/alerts/" + f.ids["alice/priv"], f.aliceW, `{"state":"open"}`, 503},
	} {
		f.run([]step{st})
	}
	r := f.do("GET", "/api/repos/alice/priv/alerts", f.aliceW, "")
	if strings.Contains(string(r.body), "meta/") {
		t.Errorf("503 body leaks internals: %s", r.body)
	}
}

// TestAlertsAPIDisabled: without WithAlerts the endpoints say so.
func TestAlertsAPIDisabled(t *testing.T) {
	f := newFixture(t)
	if _, err := f.s.CreateRepo(context.Background(), "alice", "r", true); err != nil {
		t.Fatal(err)
	}
	f.run([]step{{"disabled", "GET", "/api/repos/alice/r/alerts", f.aliceW, "", 501}})
}
