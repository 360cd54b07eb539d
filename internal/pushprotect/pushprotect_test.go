package pushprotect

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/secretscan"
)

// Fake credentials, split so that no scanner flags this file.
const (
	fakePAT  = "ghp_" + "Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7"
	fakePAT2 = "ghp_" + "Aa1Bb2Cc3Dd4Ee5Ff6Gg7Hh8Ii9Jj0Kk1Ll2M"
	repoID   = "01JD0000000000000000000000"
)

// fixture is a server repository (bare, as the cache's are) and a client
// clone of it. push turns the client's commits into a pack, as git push
// does (thin, against what the server has), and indexes it into a fresh
// quarantine as a receive path does: the pushed objects are visible only
// with the quarantine's environment.
type fixture struct {
	t           testing.TB
	env         []string
	srv, client string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{t: t, env: gittest.Env(t.TempDir()), srv: filepath.Join(t.TempDir(), "srv.git"), client: filepath.Join(t.TempDir(), "client")}
	gittest.Git(t, f.env, "", "init", "-q", "--bare", "-b", "main", f.srv)
	gittest.Git(t, f.env, "", "init", "-q", "-b", "main", f.client)
	// History holds a secret already: pushes on top must not report it.
	f.commit("base", map[string]string{"old.txt": "old " + fakePAT2 + "\n", "README": "hello\n"})
	gittest.Git(t, f.env, f.client, "push", "-q", f.srv, "main")
	return f
}

// commit writes files (content "" deletes) and commits them in the client.
func (f *fixture) commit(msg string, files map[string]string) string {
	f.t.Helper()
	for p, c := range files {
		full := filepath.Join(f.client, p)
		if c == "" {
			os.Remove(full)
			continue
		}
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	gittest.Git(f.t, f.env, f.client, "add", "-A")
	gittest.Git(f.t, f.env, f.client, "commit", "-q", "--allow-empty", "-m", msg)
	return f.rev("HEAD")
}

func (f *fixture) rev(r string) string {
	f.t.Helper()
	return strings.TrimSpace(gittest.Git(f.t, f.env, f.client, "rev-parse", r))
}

// push builds the pack for updating the server's refs to tips and indexes
// it into a new quarantine, returning the repository to check.
func (f *fixture) push(tips ...string) secretscan.Repo {
	f.t.Helper()
	var in strings.Builder
	for _, tip := range tips {
		in.WriteString(tip + "\n")
	}
	for _, have := range strings.Fields(gittest.Git(f.t, f.env, f.srv, "for-each-ref", "--format=%(objectname)")) {
		in.WriteString("^" + have + "\n")
	}
	pack, err := gittest.Run(f.env, f.client, strings.NewReader(in.String()), "pack-objects", "--revs", "--thin", "--stdout", "-q")
	if err != nil {
		f.t.Fatal(err)
	}
	q := filepath.Join(f.t.TempDir(), "quarantine")
	if err := os.MkdirAll(filepath.Join(q, "pack"), 0o755); err != nil {
		f.t.Fatal(err)
	}
	qenv := []string{"GIT_OBJECT_DIRECTORY=" + q, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(f.srv, "objects"), "GIT_QUARANTINE_PATH=" + q}
	if _, err := gittest.Run(append(append([]string(nil), f.env...), qenv...), f.srv, strings.NewReader(pack), "index-pack", "--stdin", "--fix-thin", "--strict"); err != nil {
		f.t.Fatal(err)
	}
	return secretscan.Repo{Dir: f.srv, Env: qenv}
}

func newChecker(t testing.TB, a Alerts, opts Options) *Checker {
	t.Helper()
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	s, err := New(nil, a, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func listAlerts(t *testing.T, st *alerts.Store) []alerts.Alert {
	t.Helper()
	p, err := st.List(context.Background(), alerts.Filter{Tenant: "alice", RepoID: repoID}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return p.Alerts
}

// TestBlocked: a push adding a secret is blocked, with the commit and
// path:line in the message and the bypass explained; nothing is recorded.
func TestBlocked(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	old := f.rev("main")
	tip := f.commit("add key", map[string]string{"cfg/new.txt": "line one\nkey " + fakePAT + "\n"})
	st := alerts.New(memstore.New())
	s := newChecker(t, st, Options{})
	v, err := s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
		Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Blocked || len(v.Findings) != 1 {
		t.Fatalf("verdict %+v: want blocked with one finding", v)
	}
	fd := v.Findings[0]
	if fd.Commit != tip || fd.Path != "cfg/new.txt" || fd.StartLine != 2 || fd.RuleID != "github-pat" {
		t.Errorf("finding %+v", fd)
	}
	msg := strings.Join(v.Message, "\n")
	for _, want := range []string{"github-pat", "commit: " + tip, "path: cfg/new.txt:2", "git push -o secret-scanning.bypass=<reason>", "false_positive, used_in_tests, will_fix_later"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, fakePAT) {
		t.Error("the message shows the secret")
	}
	if v.Stats.BlobsScanned != 1 {
		t.Errorf("scanned %d blobs, want only the pushed one", v.Stats.BlobsScanned)
	}
	if as := listAlerts(t, st); len(as) != 0 {
		t.Errorf("a blocked push recorded alerts: %+v", as)
	}
}

// TestOnlyPushedObjects: secrets already in the repository's history are
// not the push's business; a secret added and removed again within the
// push still is.
func TestOnlyPushedObjects(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	old := f.rev("main")
	s := newChecker(t, alerts.New(memstore.New()), Options{})
	check := func(u ...Update) *Verdict {
		t.Helper()
		var tips []string
		for _, x := range u {
			if x.New != zeroID {
				tips = append(tips, x.New)
			}
		}
		v, err := s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tips...), Updates: u})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	// A clean commit on top of history with a secret; it also edits the
	// file holding that secret.
	clean := f.commit("clean", map[string]string{"README": "hello again\n", "old.txt": "old " + fakePAT2 + "\nmore\n"})
	if v := check(Update{"refs/heads/main", old, clean}); v.Blocked || len(v.Findings) != 0 {
		t.Fatalf("clean push: %+v", v)
	}
	// A new branch at an existing commit adds nothing.
	if v := check(Update{"refs/heads/copy", zeroID, old}); v.Blocked || v.Stats.Blobs != 0 {
		t.Fatalf("new branch at an old commit: %+v", v)
	}
	// A delete adds nothing.
	if v := check(Update{"refs/heads/gone", old, zeroID}); v.Blocked {
		t.Fatalf("delete: %+v", v)
	}
	// Added, then removed within the same push: it is in the pushed
	// history all the same.
	add := f.commit("add", map[string]string{"k.txt": "key " + fakePAT + "\n"})
	rm := f.commit("remove", map[string]string{"k.txt": ""})
	v := check(Update{"refs/heads/main", old, rm})
	if !v.Blocked || len(v.Findings) != 1 || v.Findings[0].Commit != add {
		t.Fatalf("added and removed: %+v", v)
	}
}

// TestPathOnlyRule: rules that match a file's name alone (a PKCS #12
// bundle) block too, also when the push edits a file with an old secret
// (the second, previous-versions pass keeps the paths).
func TestPathOnlyRule(t *testing.T) {
	f := newFixture(t)
	old := f.rev("main")
	tip := f.commit("cert", map[string]string{"certs/client.p12": "\x30\x82\x00binary", "old.txt": "old " + fakePAT2 + "\nedited\n"})
	s := newChecker(t, alerts.New(memstore.New()), Options{})
	v, err := s.Check(context.Background(), Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
		Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Blocked || len(v.Findings) != 1 || v.Findings[0].RuleID != "pkcs12-file" || v.Findings[0].Path != "certs/client.p12" {
		t.Fatalf("verdict %+v: want blocked by pkcs12-file alone", v)
	}
}

// TestBypass: a bypassed push is let through, and each secret is recorded
// as an alert with who, why and where, filed under the tenant's
// fingerprint of the secret.
func TestBypass(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		reason alerts.BypassReason
		state  alerts.State
		pusher string
		by     string
	}{
		{alerts.BypassUsedInTests, alerts.StateResolved, "alice (token 7)", "alice (token 7)"},
		// A bypass always names someone, even with no pusher known.
		{alerts.BypassWillFixLater, alerts.StateOpen, "", "anonymous"},
	} {
		t.Run(string(tt.reason), func(t *testing.T) {
			f := newFixture(t)
			old := f.rev("main")
			tip := f.commit("add key", map[string]string{"new.txt": "key " + fakePAT + "\n"})
			st := alerts.New(memstore.New())
			s := newChecker(t, st, Options{})
			v, err := s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: tt.pusher, Repo: f.push(tip),
				Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}},
				Options: []string{"ci.skip", BypassOption + "=" + string(tt.reason)}})
			if err != nil {
				t.Fatal(err)
			}
			if v.Blocked || v.Bypass != tt.reason || len(v.Findings) != 1 {
				t.Fatalf("verdict %+v: want bypassed", v)
			}
			if msg := strings.Join(v.Message, "\n"); !strings.Contains(msg, "bypassed ("+string(tt.reason)+")") || !strings.Contains(msg, "path: new.txt:1") {
				t.Errorf("message:\n%s", msg)
			}
			as := listAlerts(t, st)
			if len(as) != 1 {
				t.Fatalf("alerts %+v: want one", as)
			}
			a := as[0]
			want, _ := st.Fingerprint(ctx, "alice", fakePAT)
			if a.Fingerprint != want {
				t.Errorf("alert filed under %s, want the tenant's fingerprint %s", a.Fingerprint, want)
			}
			if a.State != tt.state || len(a.Bypasses) != 1 || a.Bypasses[0].By != tt.by || a.Bypasses[0].Reason != tt.reason ||
				a.Bypasses[0].Commit != tip || a.Bypasses[0].Path != "new.txt" || a.Bypasses[0].Line != 1 || a.Bypasses[0].At.IsZero() {
				t.Errorf("alert %+v", a)
			}
			if len(a.Locations) != 1 || a.Locations[0].Commit != tip || a.Locations[0].RuleID != "github-pat" {
				t.Errorf("locations %+v", a.Locations)
			}
			// The secret is kept, as any alert's is, so reveal works
			// (issue 21 §2).
			if secret, err := st.Reveal(ctx, "alice", repoID, a.Fingerprint); err != nil || secret != fakePAT {
				t.Errorf("reveal: %q, %v", secret, err)
			}
		})
	}
}

// TestBypassSecrets: the secret of a bypassed finding is read back from
// its object, picked out of the match by the rule, and kept only when its
// fingerprint checks: in a file, over several lines of a file, in a
// commit message; a finding in base64 text (its place holds the encoded
// form) is recorded without one, never refused.
func TestBypassSecrets(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	old := f.rev("main")
	pk := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW/VDL5AaWTg0nLVkjRo9z+40RQzuVaE8AkAFmxZzow3x+VJYKdjykkJ0iT9wCS0DRTXu269V264Vf/3jvredZiKRkgwlL9xNAwxXFg0x/XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC+9aGVd+Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmwIDAQABAoIBAQCyEtEK6cZZVAW8XLcRH3U+k+q0eyjwN2RBd1i1dOVEvfKkJWtz4w/xMQ9fZm0VSQ/FmlWxz6rnLfJ7GgK4yhW3dwm7bEd6brmYj5f7l3DmmWVvmXpWhTRqJk3pw==\n-----END RSA PRIVATE KEY-----\n"
	tip := f.commit("add keys "+fakePAT2[:4]+"x "+"ghp_"+"Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8", map[string]string{
		"new.txt": "key " + fakePAT + "\n",
		"id_rsa":  pk,
		"b64.txt": "data " + base64Of("token = "+"ghp_"+"Qq1Ww2Ee3Rr4Tt5Yy6Uu7Ii8Oo9Pp0Aa1Ss2D") + "\n",
	})
	st := alerts.New(memstore.New())
	s := newChecker(t, st, Options{})
	v, err := s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
		Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}, Options: []string{BypassOption + "=used_in_tests"}})
	if err != nil || v.Blocked {
		t.Fatalf("check: %+v %v", v, err)
	}
	revealed := map[string]string{}
	for _, a := range listAlerts(t, st) {
		secret, err := st.Reveal(ctx, "alice", repoID, a.Fingerprint)
		if err != nil && !errors.Is(err, alerts.ErrNoSecret) {
			t.Fatal(err)
		}
		revealed[a.Locations[0].Path+"|"+a.Locations[0].Source] = secret
	}
	if revealed["new.txt|"] != fakePAT {
		t.Errorf("file secret: %q (%v)", revealed["new.txt|"], revealed)
	}
	if got := revealed["|commit-message"]; got != "ghp_"+"Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0Pp9Oo8" {
		t.Errorf("message secret: %q (%v)", got, revealed)
	}
	if got := revealed["id_rsa|"]; !strings.HasPrefix(got, "-----BEGIN RSA PRIVATE KEY-----") || !strings.Contains(got, "END RSA PRIVATE KEY") {
		t.Errorf("a secret over several lines: %q", got)
	}
	if got, ok := revealed["b64.txt|"]; ok && got != "" {
		t.Errorf("a decoded finding revealed %q", got)
	}
}

func base64Of(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// failingAlerts fails the bypass writes.
type failingAlerts struct{ *alerts.Store }

func (failingAlerts) RecordBypass(context.Context, string, string, alerts.Finding, string, alerts.BypassReason) (alerts.Alert, error) {
	return alerts.Alert{}, errors.New("store down")
}

// TestBypassNotRecorded: a bypass that cannot be recorded fails the check,
// so the push is refused rather than let through unrecorded.
func TestBypassNotRecorded(t *testing.T) {
	f := newFixture(t)
	old := f.rev("main")
	tip := f.commit("add key", map[string]string{"new.txt": "key " + fakePAT + "\n"})
	s := newChecker(t, failingAlerts{alerts.New(memstore.New())}, Options{})
	_, err := s.Check(context.Background(), Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
		Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}, Options: []string{BypassOption + "=false_positive"}})
	if !errors.Is(err, ErrBypassNotRecorded) {
		t.Fatalf("Check = %v, want ErrBypassNotRecorded", err)
	}
}

// TestTooManyToBypass: beyond MaxBypass secrets a bypass does not apply,
// and nothing is recorded.
func TestTooManyToBypass(t *testing.T) {
	f := newFixture(t)
	old := f.rev("main")
	tip := f.commit("keys", map[string]string{"a.txt": "key " + fakePAT + "\n", "b.txt": "key " + fakePAT2 + "\n"})
	st := alerts.New(memstore.New())
	s := newChecker(t, st, Options{MaxBypass: 1})
	v, err := s.Check(context.Background(), Push{Tenant: "alice", RepoID: repoID, Pusher: "alice", Repo: f.push(tip),
		Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}, Options: []string{BypassOption + "=false_positive"}})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Blocked || len(v.Findings) != 2 || !strings.Contains(strings.Join(v.Message, "\n"), "may bypass at most 1") {
		t.Fatalf("verdict %+v", v)
	}
	if as := listAlerts(t, st); len(as) != 0 {
		t.Errorf("recorded %d alerts for a refused bypass", len(as))
	}
}

// TestBadOptionBeforeScan: an invalid option is refused before any git
// runs (the repository here does not even exist).
func TestBadOptionBeforeScan(t *testing.T) {
	s := newChecker(t, alerts.New(memstore.New()), Options{})
	_, err := s.Check(context.Background(), Push{Tenant: "alice", RepoID: repoID, Repo: secretscan.Repo{Dir: "/nonexistent"},
		Updates: []Update{{Ref: "refs/heads/main", Old: zeroID, New: strings.Repeat("a", 40)}}, Options: []string{BypassOption + "=because"}})
	var oe *OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("Check = %v, want *OptionError", err)
	}
}

func TestParseOptions(t *testing.T) {
	for _, tt := range []struct {
		opts []string
		want alerts.BypassReason
		err  string
	}{
		{nil, "", ""},
		{[]string{"ci.skip", "merge_request.create", "Secret-Scanning"}, "", ""},
		{[]string{BypassOption + "=false_positive"}, alerts.BypassFalsePositive, ""},
		{[]string{BypassOption + "=used_in_tests", BypassOption + "=used_in_tests"}, alerts.BypassUsedInTests, ""},
		{[]string{BypassOption + "=will_fix_later"}, alerts.BypassWillFixLater, ""},
		{[]string{BypassOption + "=wont_fix"}, "", `reason "wont_fix"`},
		{[]string{BypassOption + "="}, "", `reason ""`},
		{[]string{BypassOption}, "", "needs a reason"},
		{[]string{BypassOption + "=FALSE_POSITIVE"}, "", "want false_positive"},
		{[]string{"secret-scanning.bypas=false_positive"}, "", "unknown option"},
		{[]string{"SECRET-SCANNING.BYPASS=false_positive"}, "", "unknown option"},
		{[]string{BypassOption + "=false_positive", BypassOption + "=used_in_tests"}, "", "conflicts with the earlier reason false_positive"},
		{make([]string, MaxOptions+1), "", "at most 100"},
		{[]string{strings.Repeat("x", MaxOptionBytes+1)}, "", "longer than 1024 bytes"},
	} {
		po, err := ParseOptions(tt.opts)
		if tt.err == "" {
			if err != nil || po.Bypass != tt.want {
				t.Errorf("ParseOptions(%q) = %+v, %v; want %q", tt.opts, po, err, tt.want)
			}
			continue
		}
		var oe *OptionError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("ParseOptions(%.80q) = %v; want an OptionError with %q", tt.opts, err, tt.err)
		}
	}
}

// TestMessageLimit: at most MaxListed locations, grouped by type in order
// of appearance, then "and N more".
func TestMessageLimit(t *testing.T) {
	s := newChecker(t, alerts.New(memstore.New()), Options{})
	var fs []secretscan.Finding
	for i := range 7 {
		rule := "github-pat"
		if i%2 == 1 {
			rule = "aws-access-token"
		}
		fs = append(fs, secretscan.Finding{RuleID: rule, Commit: fmt.Sprintf("c%d", i), Path: "f.txt", StartLine: i + 1})
	}
	msg := strings.Join(s.blockedMessage(fs), "\n")
	if n := strings.Count(msg, "- commit: "); n != 5 {
		t.Errorf("%d locations listed, want 5:\n%s", n, msg)
	}
	if !strings.Contains(msg, "and 2 more (7 in all)") {
		t.Errorf("no \"and 2 more\":\n%s", msg)
	}
	gh, aws := strings.Index(msg, "—— github-pat"), strings.Index(msg, "—— aws-access-token")
	if gh < 0 || aws < gh || strings.Count(msg, "—— github-pat") != 1 {
		t.Errorf("not grouped by type in order:\n%s", msg)
	}
	if msg := strings.Join(s.blockedMessage(fs[:5]), "\n"); strings.Contains(msg, "more") {
		t.Errorf("five findings and an \"and more\":\n%s", msg)
	}
}

// TestQuarantineNeeded: the scan reads the pushed objects only through the
// quarantine's environment (a guard that the caller's Env is used).
func TestQuarantineNeeded(t *testing.T) {
	f := newFixture(t)
	old := f.rev("main")
	tip := f.commit("add key", map[string]string{"new.txt": "key " + fakePAT + "\n"})
	repo := f.push(tip)
	s := newChecker(t, alerts.New(memstore.New()), Options{})
	_, err := s.Check(context.Background(), Push{Tenant: "alice", RepoID: repoID, Repo: secretscan.Repo{Dir: repo.Dir},
		Updates: []Update{{Ref: "refs/heads/main", Old: old, New: tip}}})
	var ge *secretscan.GitError
	if !errors.As(err, &ge) {
		t.Fatalf("Check without the quarantine env = %v, want a git error", err)
	}
	if !bytes.Contains([]byte(ge.Stderr), []byte("bad object")) && !strings.Contains(ge.Stderr, "fatal") {
		t.Errorf("stderr %q", ge.Stderr)
	}
}

func repoOf(dir string, env []string) secretscan.Repo { return secretscan.Repo{Dir: dir, Env: env} }

func TestNewNeedsAlerts(t *testing.T) {
	if _, err := New(nil, nil, Options{}); err == nil {
		t.Fatal("New without an alert store succeeded")
	}
}

// TestBlockedLocations: every kind of location is named in the message:
// a commit message, a tag message, a blob reached only through a pushed
// tag (no commit adds it), and a path that holds a terminal escape comes
// out quoted. A bypass records each with its source and ref.
func TestBlockedLocations(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	old := f.rev("main")
	tip := f.commit("deploy\n\ntoken "+fakePAT, map[string]string{"evil\x1b[2J.txt": "key " + fakePAT3 + "\n"})
	blob := strings.TrimSpace(gittestIn(t, f, "key "+fakePAT4+"\n", "hash-object", "-w", "--stdin"))
	gittest.Git(t, f.env, f.client, "tag", "-a", "-m", "release "+fakePAT5, "t1", blob)
	tag := f.rev("t1")
	st := alerts.New(memstore.New())
	s := newChecker(t, st, Options{})
	updates := []Update{{Ref: "refs/heads/main", Old: old, New: tip}, {Ref: "refs/tags/t1", Old: zeroID, New: tag}}
	v, err := s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice (token t)", Repo: f.push(tip, tag), Updates: updates})
	if err != nil {
		t.Fatal(err)
	}
	msg := strings.Join(v.Message, "\n")
	if !v.Blocked || len(v.Findings) != 4 {
		t.Fatalf("verdict: blocked %v, %d findings:\n%s", v.Blocked, len(v.Findings), msg)
	}
	for _, want := range []string{
		"- commit: " + tip, "commit message, line 8",
		"- tag: " + tag, "tag message, line 6",
		"- ref: refs/tags/t1 (no commit adds it)", "blob " + blob + ", line 1",
		`path: "evil\x1b[2J.txt":1`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "\x1b") {
		t.Error("the message carries a raw escape character")
	}
	v, err = s.Check(ctx, Push{Tenant: "alice", RepoID: repoID, Pusher: "alice (token t)", Repo: f.push(tip, tag), Updates: updates,
		Options: []string{"secret-scanning.bypass=will_fix_later"}})
	if err != nil || v.Blocked {
		t.Fatalf("bypass: %+v %v", v, err)
	}
	sources := map[string]int{}
	for _, a := range listAlerts(t, st) {
		for _, b := range a.Bypasses {
			sources[b.Source+" "+b.Ref]++
			if b.By != "alice (token t)" {
				t.Errorf("bypass by %q", b.By)
			}
		}
	}
	want := map[string]int{"commit-message ": 1, "tag-message ": 1, " refs/tags/t1": 1, " ": 1}
	if fmt.Sprint(sources) != fmt.Sprint(want) {
		t.Errorf("bypasses by source and ref %v, want %v", sources, want)
	}
}

func gittestIn(t *testing.T, f *fixture, stdin string, args ...string) string {
	t.Helper()
	out, err := gittest.Run(f.env, f.client, strings.NewReader(stdin), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// More fake credentials, split so that no scanner flags this file.
const (
	fakePAT3 = "ghp_" + "Qw3Er5Ty7Ui9Op1As2Df4Gh6Jk8Lz0Xc2Vb4N"
	fakePAT4 = "ghp_" + "Mn8Bv6Cx4Za2Lk9Jh7Gf5Ds3Ap1Oi0Uy2Tr4E"
	fakePAT5 = "ghp_" + "Zx9Cv8Bn7Ml6Kj5Hg4Fd3Sa2Qw1Er0Ty9Ui8O"
)
