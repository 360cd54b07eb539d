package scaletest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gittest"
	"github.com/ghost-scm/ghost/internal/meta"
)

// signIn returns a client signed in to the web UI at base with tok, as a
// browser is: the sign-in form's CSRF field, then its POST.
func signIn(t testing.TB, base, tok string) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar}
	res, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("GET /login: no csrf field (%d)", res.StatusCode)
	}
	res, err = c.PostForm(base+"/login", url.Values{"csrf": {html.UnescapeString(string(m[1]))}, "token": {tok}})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("POST /login: %d", res.StatusCode)
	}
	return c
}

// op is what one operation asked for.
type op struct {
	name string
	c    counts
	// per divides the counts, for an operation measured over a quantity
	// (a full scan, per MiB scanned); 0 means 1.
	per float64
}

// demoBytes is the size of the files the measured repository holds (the
// full scan's MiB).
const demoBytes = 2 << 20

// ops measures each user operation once, on two serving nodes: n0, which
// takes the pushes and so has the repository in its cache (warm), and n1,
// which has never seen it (cold). Page views are anonymous, of a public
// repository, and of the first populated tenant's repository list.
func (c *cluster) ops(t testing.TB, demoAlerts int) []op {
	ctx := context.Background()
	n0 := c.newNode(workersPerNode, true)
	n1 := c.newNode(0, true)
	m := c.metaOf()
	if _, err := m.CreateTenant(ctx, "bench", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "bench", meta.ScopeWrite, "bench")
	if err != nil {
		t.Fatal(err)
	}
	demo, err := m.CreateRepo(ctx, "bench", "demo", true)
	if err != nil {
		t.Fatal(err)
	}
	env := gittest.Env(t.TempDir())
	url := func(n *node) string {
		return strings.Replace(n.http.URL, "http://", "http://x:"+tok+"@", 1) + "/bench/demo.git"
	}
	work := filepath.Join(t.TempDir(), "work")
	gittest.Git(t, env, "", "init", "-q", "--initial-branch=main", work)
	for i := range 64 {
		b := make([]byte, demoBytes/64/2)
		rand.Read(b)
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("f%02d.txt", i)), []byte(hex.EncodeToString(b)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(msg string) {
		f := filepath.Join(work, "changes.txt")
		old, _ := os.ReadFile(f)
		if err := os.WriteFile(f, append(old, msg+"\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		gittest.Git(t, env, work, "add", "-A")
		gittest.Git(t, env, work, "commit", "-q", "-m", msg)
	}
	// measure runs fn and returns what every node asked for meanwhile,
	// once their background work is done.
	measure := func(fn func()) counts {
		quiesce(n0.m, n1.m)
		b0, b1 := n0.m.read(), n1.m.read()
		fn()
		quiesce(n0.m, n1.m)
		return n0.m.read().sub(b0).add(n1.m.read().sub(b1))
	}
	// scan runs n0's workers until a round of them finds nothing to do.
	scan := func() {
		for idle := 0; idle < 1; {
			did := false
			for _, w := range n0.workers {
				d, err := w.Step(ctx)
				if err != nil {
					t.Fatal(err)
				}
				did = did || d
			}
			if did {
				idle = 0
			} else {
				idle++
			}
		}
	}
	var out []op
	commit("first")
	gittest.Git(t, env, work, "push", "-q", url(n0), "main")
	quiesce(n0.m)
	scan()

	commit("second")
	out = append(out, op{name: "push (one commit)", c: measure(func() { gittest.Git(t, env, work, "push", "-q", url(n0), "main") })})
	out = append(out, op{name: "push scan (its run, to done)", c: measure(scan)})
	clones := t.TempDir()
	out = append(out, op{name: "clone, warm node", c: measure(func() { gittest.Git(t, env, "", "clone", "-q", url(n0), filepath.Join(clones, "warm")) })})
	out = append(out, op{name: "clone, cold node", c: measure(func() { gittest.Git(t, env, "", "clone", "-q", url(n1), filepath.Join(clones, "cold")) })})
	commit("third")
	gittest.Git(t, env, work, "push", "-q", url(n0), "main")
	quiesce(n0.m)
	scan()
	out = append(out, op{name: "fetch (one new commit)", c: measure(func() { gittest.Git(t, env, filepath.Join(clones, "warm"), "fetch", "-q", "origin") })})
	out = append(out, op{name: "full scan, per MiB", per: float64(demoBytes) / (1 << 20), c: measure(func() {
		if _, _, err := n0.srv.Scanner().StartFull(ctx, "bench", demo.ID); err != nil {
			t.Fatal(err)
		}
		scan()
	})})
	if demoAlerts > 0 {
		if err := recordAlerts(ctx, n0.srv.Alerts(), "bench", demo.ID, demoAlerts); err != nil {
			t.Fatal(err)
		}
	}
	// Alerts and scan runs are shown to those who may write the
	// repository: those pages are viewed signed in (the sign-in itself is
	// not counted).
	writer := signIn(t, n0.http.URL, tok)
	view := func(c *http.Client, path string) counts {
		return measure(func() {
			res, err := c.Get(n0.http.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("GET %s: %d", path, res.StatusCode)
			}
		})
	}
	owner := tenantName(0)
	for _, v := range []struct {
		name, path string
		c          *http.Client
	}{
		{"page: repository home", "/bench/demo", http.DefaultClient},
		{"page: log", "/bench/demo/-/commits/main", http.DefaultClient},
		{"page: alerts (signed in)", "/bench/demo/-/alerts", writer},
		{"page: scans (signed in)", "/bench/demo/-/scans", writer},
		{"page: owner's repositories", "/" + owner, http.DefaultClient},
		{"API: owner's repositories", "/api/repos/" + owner, http.DefaultClient},
	} {
		out = append(out, op{name: v.name, c: view(v.c, v.path)})
	}
	return out
}
