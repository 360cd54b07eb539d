package gitsvc_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/gitsvc"
	"github.com/ghost-scm/ghost/internal/wal"
)

// A server push commits through the push path, may update refs/pull/*,
// and reports a ref that moved under it; a client may not update
// refs/pull/*, and the receive-pack advertisement does not show them
// (docs/adr/0117-pull-request-refs.md).
func TestServerPushAndPullRefs(t *testing.T) {
	e := newStageEnvMin(t, -1)
	ctx := context.Background()
	if rep := e.push(t, e.commit); !strings.Contains(rep, "ok refs/heads/main") {
		t.Fatalf("push: %q", rep)
	}
	// A client's update of refs/pull/* is refused.
	rep := e.pushRef(t, e.commit, "refs/pull/1/head")
	if !strings.Contains(rep, "ng refs/pull/1/head refs/pull/* is kept by the server") {
		t.Fatalf("client push of refs/pull: %q", rep)
	}
	// The server's own is committed; the objects are already there, so
	// no pack.
	req := gitsvc.Request{Repo: "r1", Principal: "ghost"}
	res, err := e.svc.Push(ctx, gitsvc.ServerPush{Request: req, Updates: []gitsvc.RefUpdate{{Ref: "refs/pull/1/head", Old: wal.ZeroID, New: e.commit}}})
	if err != nil || !res.Committed() {
		t.Fatalf("server push: %+v, %v", res, err)
	}
	x, _, err := e.log.ReadIndex(ctx, "r1")
	if err != nil || x.Ref("refs/pull/1/head") != e.commit {
		t.Fatalf("refs/pull/1/head %q, %v", x.Ref("refs/pull/1/head"), err)
	}
	// A stale old id: refused, and the ref named.
	res, err = e.svc.Push(ctx, gitsvc.ServerPush{Request: req, Updates: []gitsvc.RefUpdate{{Ref: "refs/heads/main", Old: strings.Repeat("1", 40), New: e.commit}}})
	if err != nil || res.Committed() || res.Moved != "refs/heads/main" {
		t.Fatalf("stale server push: %+v, %v", res, err)
	}
	// An object the repository lacks and no pack: refused.
	res, err = e.svc.Push(ctx, gitsvc.ServerPush{Request: req, Updates: []gitsvc.RefUpdate{{Ref: "refs/heads/x", Old: wal.ZeroID, New: strings.Repeat("2", 40)}}})
	if err == nil && res.Committed() {
		t.Fatalf("a push of a missing object committed: %+v", res)
	}
	// Clients fetch refs/pull/* but are not shown them to push.
	var adv bytes.Buffer
	if err := e.svc.AdvertiseRefs(ctx, gitsvc.ReceivePackService, gitsvc.Request{Repo: "r1", Out: &adv}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(adv.String(), "refs/pull/") || !strings.Contains(adv.String(), "refs/heads/main") {
		t.Fatalf("receive-pack advertisement %q", adv.String())
	}
	adv.Reset()
	if err := e.svc.AdvertiseRefs(ctx, gitsvc.UploadPackService, gitsvc.Request{Repo: "r1", Out: &adv}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(adv.String(), "refs/pull/1/head") {
		t.Fatalf("upload-pack advertisement %q", adv.String())
	}
	// A server push with a pack: a new branch at a commit of its own.
	pack := filepath.Join(t.TempDir(), "p.pack")
	if err := os.WriteFile(pack, e.pack, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = e.svc.Push(ctx, gitsvc.ServerPush{Request: req, Pack: pack, Updates: []gitsvc.RefUpdate{{Ref: "refs/heads/copy", Old: wal.ZeroID, New: e.commit}}})
	if err != nil || !res.Committed() {
		t.Fatalf("server push with a pack: %+v, %v", res, err)
	}
}
