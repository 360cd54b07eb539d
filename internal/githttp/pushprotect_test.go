package githttp_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/githttp"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/pushprotect"
)

// A fake credential, split so that no scanner flags this file.
const leak = "token = ghp_" + "Xk2Lq9Zr7Tm4Vb8Nc3Wd6Yf1Hg5Js0Pa2Qe7\n"

func withProtection(t *testing.T, st *alerts.Store) func(*githttp.Options) {
	t.Helper()
	s, err := pushprotect.New(nil, st, pushprotect.Options{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *githttp.Options) { o.PushProtect = s }
}

// TestPushProtection: with protection on, a push adding a secret is
// refused on every ref with the reason and the message on git's stderr,
// and the log does not move; a bypass option lets it through and is
// recorded; a repository with protection off is not scanned.
func TestPushProtection(t *testing.T) {
	st := alerts.New(memstore.New())
	e := newEnv(t, withProtection(t, st))
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	commitFile(t, src, "a.txt", "a\n")
	git(t, src, "push", "-q", e.remote("alice/guard", "rw"), "main")
	before, seq := e.logRefs("guard"), e.seq("guard")

	tip := commitFile(t, src, "conf.txt", "x\n"+leak)
	git(t, src, "branch", "side")
	out, err := gitErr(t, src, "push", e.remote("alice/guard", "rw"), "main", "side")
	if err == nil {
		t.Fatalf("push with a secret accepted:\n%s", out)
	}
	for _, want := range []string{
		"remote: - GHOST PUSH PROTECTION", "remote:          - commit: " + tip, "remote:            path: conf.txt:2",
		"git push -o secret-scanning.bypass=<reason>",
		"! [remote rejected] main -> main (secret detected by push protection)",
		"! [remote rejected] side -> side (secret detected by push protection)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("push output lacks %q:\n%s", want, out)
		}
	}
	if e.logRefs("guard") != before || e.seq("guard") != seq {
		t.Fatal("a blocked push moved the log")
	}

	// A bad option is refused, before any scan, and changes nothing.
	out, err = gitErr(t, src, "push", "-o", "secret-scanning.bypass=later", e.remote("alice/guard", "rw"), "main")
	if err == nil || !strings.Contains(out, `invalid push option "secret-scanning.bypass=later"`) || !strings.Contains(out, "(invalid push option)") {
		t.Fatalf("bad option: %v\n%s", err, out)
	}
	if e.seq("guard") != seq {
		t.Fatal("a push with a bad option moved the log")
	}

	// The bypass goes through (push-options is advertised, or git would
	// refuse -o) and is recorded.
	out = git(t, src, "push", "-o", "secret-scanning.bypass=false_positive", e.remote("alice/guard", "rw"), "main")
	if !strings.Contains(out, "Push protection bypassed (false_positive) for 1 secret(s)") {
		t.Errorf("bypass output:\n%s", out)
	}
	if !strings.Contains(e.logRefs("guard"), tip+" refs/heads/main") {
		t.Fatalf("bypassed push not committed: %s", e.logRefs("guard"))
	}
	p, err := st.List(context.Background(), alerts.Filter{Tenant: "alice", RepoID: "guard"}, "", 0)
	if err != nil || len(p.Alerts) != 1 || len(p.Alerts[0].Bypasses) != 1 || p.Alerts[0].Bypasses[0].By != "rw" || p.Alerts[0].Resolution != alerts.ResolutionFalsePositive {
		t.Fatalf("alerts %+v, %v", p.Alerts, err)
	}

	// Off: not scanned at all, options or not.
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "main")
	git(t, src, "push", "-q", "-o", "secret-scanning.nonsense", e.remote("alice/pub", "rw"), "side")
}

// brokenProtector cannot decide.
type brokenProtector struct{}

func (brokenProtector) Check(context.Context, pushprotect.Push) (*pushprotect.Verdict, error) {
	return nil, errors.New("alert store down")
}

// TestPushProtectionUnavailable: a push whose check fails is refused with
// 503 (retry), and the log does not move.
func TestPushProtectionUnavailable(t *testing.T) {
	e := newEnv(t, func(o *githttp.Options) { o.PushProtect = brokenProtector{} })
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	commitFile(t, src, "a.txt", "a\n")
	out, err := gitErr(t, src, "push", e.remote("alice/guard", "rw"), "main")
	if err == nil || !strings.Contains(out, "503") {
		t.Fatalf("push with the check failing: %v\n%s", err, out)
	}
	if refs := e.logRefs("guard"); refs != "" {
		t.Fatalf("log moved: %s", refs)
	}
	// Off, the protector is never asked.
	git(t, src, "push", "-q", e.remote("alice/pub", "rw"), "main")
}

// TestPushProtectionNotConfigured: a server without a protector serves
// repositories whose setting is on as if it were off.
func TestPushProtectionNotConfigured(t *testing.T) {
	e := newEnv(t)
	src := t.TempDir()
	git(t, src, "init", "-q", "--initial-branch=main")
	tip := commitFile(t, src, "conf.txt", leak)
	git(t, src, "push", "-q", e.remote("alice/guard", "rw"), "main")
	if !strings.Contains(e.logRefs("guard"), tip) {
		t.Fatal("push not committed")
	}
}
