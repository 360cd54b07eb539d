package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/wal"
	"github.com/ghost-scm/ghost/internal/web"
)

// TestWebhooksPage: a writer adds a hook (the secret typed once, never
// shown), sees its deliveries, opens one, sends it again, pings, turns it
// off and removes it; anyone else gets the page of a missing repository,
// and every form needs the session's CSRF token.
func TestWebhooksPage(t *testing.T) {
	var hs *hooks.Store
	f := newFixture(t, fixtureOpts{opts: func(o *web.Options) {
		m := o.Repos.(*meta.Store)
		hs = hooks.New(hooks.Options{Store: o.Store, Log: wal.New(o.Store, wal.Options{}), Meta: m})
		o.API = api.NewHandler(m, nil, api.WithAlerts(o.Alerts.(*alerts.Store)), api.WithHooks(hs))
	}})
	ctx := context.Background()
	alice := f.signedIn(f.alice)
	res, body := alice.get("/alice/priv/-/hooks")
	if res.StatusCode != 200 || !strings.Contains(body, `id="hook-form"`) || !strings.Contains(body, "No webhooks.") {
		t.Fatalf("hooks page: %d\n%s", res.StatusCode, body)
	}
	if _, body := alice.get("/alice/priv/-/settings"); !strings.Contains(body, `id="hooks-tab"`) {
		t.Error("no Webhooks tab for a writer")
	}
	csrf := csrfOf(t, body)
	const secret = "web-form-secret-77"
	form := url.Values{"csrf": {csrf}, "url": {"https://ci.example.com/x"}, "secret": {secret}, "events": {"push", "create", "bogus"}}
	res = alice.post("/alice/priv/-/hooks", form)
	if res.StatusCode != http.StatusSeeOther || !strings.HasSuffix(res.Header.Get("Location"), "/-/hooks?done=added") {
		t.Fatalf("add: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	sc := hooks.Scope{Tenant: "alice", Repo: f.priv.ID, Name: "priv"}
	list, err := hs.List(ctx, sc)
	if err != nil || len(list) != 1 || strings.Join(list[0].Events, ",") != "create,push" || !list[0].SecretSet {
		t.Fatalf("after add: %+v %v", list, err)
	}
	h := list[0]
	// A bad URL comes back with the API's reason and what was typed.
	res, body = alice.postBody("/alice/priv/-/hooks", url.Values{"csrf": {csrf}, "url": {"ftp://x/"}, "secret": {secret}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "http or https") || !strings.Contains(body, "ftp://x/") || strings.Contains(body, secret) {
		t.Errorf("bad url: %d", res.StatusCode)
	}

	// A delivery in the log (as the dispatcher writes them).
	did := "0000000000000001abcdef01"
	rec := fmt.Sprintf(`{"id":%q,"guid":"11111111-2222-5333-8444-555555555555","event":"push","stream":%q,"delivered_at":%q,"redelivery":false,"duration":0.01,"status_code":503,"status":"503 Service Unavailable","outcome":"retrying","attempt":1,"request_headers":{"X-Github-Event":["push"]},"request_body":{"ref":"refs/heads/main","zen":"<b>hi</b>"},"response_body":"down"}`, did, f.priv.ID, time.Now().UTC().Format(time.RFC3339))
	if _, err := f.store.Put(ctx, "hooks/deliveries/"+h.Key()+"/"+did, strings.NewReader(rec), int64(len(rec))); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("/alice/priv/-/hooks?hook=%d", h.ID)
	if _, body := alice.get(base); !strings.Contains(body, "11111111-2222-5333-8444-555555555555") || !strings.Contains(body, "retrying") || strings.Contains(body, secret) {
		t.Errorf("deliveries list:\n%s", body)
	}
	_, body = alice.get(base + "&delivery=" + did)
	if !strings.Contains(body, "refs/heads/main") || strings.Contains(body, "<b>hi") || !strings.Contains(body, "X-Github-Event") || !strings.Contains(body, "503 Service Unavailable") {
		t.Errorf("one delivery, escaped:\n%s", body)
	}
	redeliver := fmt.Sprintf("/alice/priv/-/hooks/%d/deliveries/%s/redeliver", h.ID, did)
	if res := alice.post(redeliver, url.Values{"csrf": {"forged"}}); res.StatusCode != http.StatusForbidden {
		t.Errorf("redeliver with a forged token: %d", res.StatusCode)
	}
	if res := alice.post(redeliver, url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("redeliver: %d", res.StatusCode)
	}
	queued := 0
	_ = objstore.Walk(ctx, f.store, "hooks/queue/", func(o objstore.Info) error {
		queued++
		return nil
	})
	if queued != 2 { // the new hook's ping, and the redelivery
		t.Errorf("%d events queued, want 2", queued)
	}
	if res := alice.post(fmt.Sprintf("/alice/priv/-/hooks/%d/ping", h.ID), url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("ping: %d", res.StatusCode)
	}
	if res := alice.post(fmt.Sprintf("/alice/priv/-/hooks/%d/active", h.ID), url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("turn off: %d", res.StatusCode)
	}
	if got, _ := hs.Get(ctx, sc, h.ID); got.Active {
		t.Error("the hook is still on")
	}

	// Anyone else: the page of a missing repository, and no change.
	bob := f.signedIn(f.bob)
	for _, p := range []string{"/alice/priv/-/hooks", "/alice/pub/-/hooks", base} {
		if res, _ := bob.get(p); res.StatusCode != http.StatusNotFound {
			t.Errorf("bob GET %s: %d", p, res.StatusCode)
		}
	}
	if res := bob.post(fmt.Sprintf("/alice/priv/-/hooks/%d/remove", h.ID), url.Values{"csrf": {bob.csrfFor("/")}}); res.StatusCode != http.StatusNotFound {
		t.Errorf("bob removing alice's hook: %d", res.StatusCode)
	}
	if _, body := f.client().get("/alice/pub"); strings.Contains(body, `id="hooks-tab"`) {
		t.Error("an anonymous visitor sees the Webhooks tab")
	}
	if res := alice.post(fmt.Sprintf("/alice/priv/-/hooks/%d/remove", h.ID), url.Values{"csrf": {csrf}}); res.StatusCode != http.StatusSeeOther {
		t.Errorf("remove: %d", res.StatusCode)
	}
	if l, _ := hs.List(ctx, sc); len(l) != 0 {
		t.Errorf("after remove: %+v", l)
	}
}

// postBody posts form and returns the answer with its body.
func (c *client) postBody(path string, form url.Values) (*http.Response, string) {
	c.f.t.Helper()
	req, err := http.NewRequest("POST", c.f.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		c.f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res := c.do(req)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}
