package client

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/memstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

// TestHooksContract runs the hook calls against the real handler with
// strict decoding, a delivery in the log included.
func TestHooksContract(t *testing.T) {
	ctx := context.Background()
	objects := memstore.New()
	m := meta.New(objects, wal.New(objects, wal.Options{}))
	if _, err := m.CreateTenant(ctx, "alice", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	tok, _, err := m.CreateToken(ctx, "alice", meta.ScopeWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := m.CreateRepo(ctx, "alice", "web", false)
	if err != nil {
		t.Fatal(err)
	}
	hs := hooks.New(hooks.Options{Store: objects, Log: wal.New(objects, wal.Options{}), Meta: m})
	srv := httptest.NewServer(api.NewHandler(m, nil, api.WithHooks(hs))) // 127.0.0.1
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, tok)
	if err != nil {
		t.Fatal(err)
	}
	c.strict = true
	u, secret, one := "https://ci.example.com/h", "s", "1"
	for _, target := range []string{"alice/web", "alice"} {
		h, err := c.CreateHook(ctx, target, HookChange{Events: []string{"push", "create"}, Config: &HookConfigEdit{URL: &u, Secret: &secret, InsecureSSL: &one}})
		if err != nil || h.Config.Secret != "********" || h.Config.InsecureSSL != "1" || !h.Active {
			t.Fatalf("%s: create: %+v %v", target, h, err)
		}
		if hs, err := c.ListHooks(ctx, target); err != nil || len(hs) != 1 {
			t.Fatalf("%s: list: %+v %v", target, hs, err)
		}
		off := false
		if h, err = c.UpdateHook(ctx, target, h.ID, HookChange{Active: &off}); err != nil || h.Active {
			t.Fatalf("%s: update: %+v %v", target, h, err)
		}
		if _, err := c.Hook(ctx, target, h.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.PingHook(ctx, target, h.ID); err != nil {
			t.Fatal(err)
		}
		if target == "alice/web" {
			if err := c.TestHook(ctx, target, h.ID); err != nil {
				t.Fatal(err)
			}
			did := "0000000000000001abcdef01"
			rec := fmt.Sprintf(`{"id":%q,"guid":"g","event":"ping","action":"","stream":%q,"delivered_at":%q,"redelivery":false,"duration":0.5,"status_code":200,"status":"OK","outcome":"delivered","attempt":1,"request_headers":{"X-Github-Event":["ping"]},"request_body":{"zen":"x"},"response_headers":{"Content-Type":["text/plain"]},"response_body":"ok"}`, did, repo.ID, time.Now().UTC().Format(time.RFC3339))
			if _, err := objects.Put(ctx, "hooks/deliveries/"+hooksKey(repo.ID, h.ID)+"/"+did, strings.NewReader(rec), int64(len(rec))); err != nil {
				t.Fatal(err)
			}
			ds, err := c.HookDeliveries(ctx, target, h.ID, 10)
			if err != nil || len(ds) != 1 || ds[0].Request != nil {
				t.Fatalf("deliveries: %+v %v", ds, err)
			}
			d, err := c.HookDelivery(ctx, target, h.ID, did)
			if err != nil || d.Request == nil || d.Response == nil || d.Response.Payload != "ok" {
				t.Fatalf("delivery: %+v %v", d, err)
			}
			if err := c.Redeliver(ctx, target, h.ID, did); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.DeleteHook(ctx, target, h.ID); err != nil {
			t.Fatal(err)
		}
	}
}

func hooksKey(repoID string, id int64) string { return fmt.Sprintf("r.%s.%d", repoID, id) }
