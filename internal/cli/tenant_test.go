package cli

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
)

// TestAdminRemoveMemberAndDeleteTenant covers "ghost tenant
// remove-member" and "ghost tenant delete [--force]" (issue 8 §6).
func TestAdminRemoveMemberAndDeleteTenant(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()
	mustGhost(t, dir, "tenant", "create", "acme", "--org")
	mustGhost(t, dir, "tenant", "create", "bob")
	mustGhost(t, dir, "tenant", "add-member", "acme", "bob")
	mustGhost(t, dir, "repo", "create", "acme/secret")
	bobTok, _, _ := strings.Cut(mustGhost(t, dir, "token", "create", "bob", "--scope", "write"), "\n")

	s := metaStore(t, dir)
	secret, err := s.Repo(ctx, "acme", "secret")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := s.Authenticate(ctx, bobTok)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CanRead(ctx, &bob, secret); !ok || err != nil {
		t.Fatalf("member cannot read: %v, %v", ok, err)
	}

	if out := mustGhost(t, dir, "tenant", "remove-member", "acme", "bob"); !strings.Contains(out, "no longer a member") {
		t.Errorf("remove-member said %q", out)
	}
	if ok, err := s.CanRead(ctx, &bob, secret); ok || err != nil {
		t.Errorf("removed member can still read: %v, %v", ok, err)
	}
	if r := ghost(t, dir, "tenant", "remove-member", "acme", "bob"); r.code != 1 || !strings.Contains(r.stderr, "not a member") {
		t.Errorf("removing twice: exit %d, %q", r.code, r.stderr)
	}
	if r := ghost(t, dir, "tenant", "remove-member", "acme"); r.code != 2 || !strings.Contains(r.stderr, "usage") {
		t.Errorf("remove-member without user: exit %d, %q", r.code, r.stderr)
	}

	// acme owns a repository: refused without --force, and nothing changes.
	if r := ghost(t, dir, "tenant", "delete", "acme"); r.code != 1 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("deleting an owner: exit %d, %q; want 1 and a hint at --force", r.code, r.stderr)
	}
	if _, err := s.Repo(ctx, "acme", "secret"); err != nil {
		t.Fatalf("refused delete removed the repository: %v", err)
	}
	if r := ghost(t, dir, "tenant", "delete", "acme", "--force"); r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("--force without --yes: %+v", r)
	}
	if _, err := s.Repo(ctx, "acme", "secret"); err != nil {
		t.Fatalf("an unconfirmed forced delete removed the repository: %v", err)
	}
	mustGhost(t, dir, "tenant", "delete", "acme", "--force", "--yes")
	if _, err := s.Repo(ctx, "acme", "secret"); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("repository after a forced delete: %v", err)
	}
	if _, err := s.Tenant(ctx, "acme"); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("tenant after delete: %v", err)
	}

	mustGhost(t, dir, "tenant", "delete", "bob")
	if _, err := s.Authenticate(ctx, bobTok); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Errorf("token of a deleted tenant: %v", err)
	}
	if r := ghost(t, dir, "tenant", "delete", "bob"); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("deleting twice: exit %d, %q", r.code, r.stderr)
	}
	if r := ghost(t, dir, "tenant", "create", ".hidden"); r.code != 1 || !strings.Contains(r.stderr, "invalid name") {
		t.Errorf("leading dot: exit %d, %q", r.code, r.stderr)
	}
	mustGhost(t, dir, "tenant", "create", "alice")
	if r := ghost(t, dir, "repo", "create", "alice/.github"); r.code != 1 || !strings.Contains(r.stderr, "invalid name") {
		t.Errorf("leading dot repository: exit %d, %q", r.code, r.stderr)
	}
}
