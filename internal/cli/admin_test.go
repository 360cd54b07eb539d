package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/objstore/fsstore"
	"github.com/ghost-scm/ghost/internal/wal"
)

type cliRun struct {
	code           int
	stdout, stderr string
}

// ghost runs the CLI in-process against dataDir.
func ghost(t *testing.T, dataDir string, args ...string) cliRun {
	t.Helper()
	// The data dir goes last so it also works after positional arguments.
	args = append(args, "--data-dir", dataDir)
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return cliRun{code, out.String(), errb.String()}
}

func mustGhost(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	r := ghost(t, dataDir, args...)
	if r.code != 0 {
		t.Fatalf("ghost %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// metaStore opens the same store the CLI wrote, as a server would.
func metaStore(t *testing.T, dataDir string) *meta.Store {
	t.Helper()
	objects, err := fsstore.Open(filepath.Join(dataDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	return meta.New(objects, wal.New(objects, wal.Options{}))
}

func TestAdminBootstrapAndTokens(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()

	mustGhost(t, dir, "tenant", "create", "root")
	out := mustGhost(t, dir, "token", "create", "root", "--scope", "admin", "--description", "bootstrap")
	first, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(first, meta.TokenPrefix) || strings.ContainsAny(first, " \t") {
		t.Fatalf("first stdout line %q is not a bare token", first)
	}
	s := metaStore(t, dir)
	p, err := s.Authenticate(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if p.Tenant != "root" || p.Scope != meta.ScopeAdmin {
		t.Errorf("principal %+v", p)
	}

	// Default scope is read; list shows ids, never secrets.
	readTok := strings.TrimSpace(mustGhost(t, dir, "token", "create", "root"))
	rp, err := s.Authenticate(ctx, readTok)
	if err != nil || rp.Scope != meta.ScopeRead {
		t.Fatalf("default-scope token: %+v, %v", rp, err)
	}
	list := mustGhost(t, dir, "token", "list", "root")
	if !strings.Contains(list, p.TokenID) || !strings.Contains(list, "bootstrap") || strings.Contains(list, first) {
		t.Errorf("token list:\n%s", list)
	}

	mustGhost(t, dir, "token", "revoke", "root", rp.TokenID)
	if _, err := s.Authenticate(ctx, readTok); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Errorf("revoked token authenticates: %v", err)
	}
	if r := ghost(t, dir, "token", "revoke", "root", rp.TokenID); r.code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("second revoke: %+v", r)
	}
}

func TestAdminTenantsAndRepos(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	ctx := context.Background()

	mustGhost(t, dir, "tenant", "create", "alice")
	mustGhost(t, dir, "tenant", "create", "bob")
	mustGhost(t, dir, "tenant", "create", "acme", "--org") // flag after the name
	mustGhost(t, dir, "tenant", "create", "--org", "initech")
	mustGhost(t, dir, "tenant", "add-member", "acme", "bob")
	list := mustGhost(t, dir, "tenant", "list")
	for _, want := range []string{"acme", "org", "alice", "user", "initech"} {
		if !strings.Contains(list, want) {
			t.Errorf("tenant list lacks %q:\n%s", want, list)
		}
	}
	// A page of two after "Alice" (any case): bob and initech.
	list = mustGhost(t, dir, "tenant", "list", "--after", "Alice", "--limit", "2")
	if lines := strings.Split(strings.TrimSpace(list), "\n"); len(lines) != 3 || !strings.HasPrefix(lines[1], "bob ") || !strings.HasPrefix(lines[2], "initech ") {
		t.Errorf("tenant list --after Alice --limit 2:\n%s", list)
	}
	if r := ghost(t, dir, "tenant", "list", "--limit", "-1"); r.code != 1 {
		t.Errorf("--limit -1: %+v", r)
	}

	mustGhost(t, dir, "repo", "create", "alice/proj", "--public")
	mustGhost(t, dir, "repo", "create", "acme/secret")
	list = mustGhost(t, dir, "repo", "list", "alice")
	if !strings.Contains(list, "alice/proj") || !strings.Contains(list, "public") {
		t.Errorf("repo list:\n%s", list)
	}
	mustGhost(t, dir, "repo", "fork", "alice/proj", "bob")
	mustGhost(t, dir, "repo", "fork", "alice/proj.git", "acme/copy")
	mustGhost(t, dir, "repo", "visibility", "acme/copy", "private")

	s := metaStore(t, dir)
	orig, err := s.Repo(ctx, "alice", "proj")
	if err != nil {
		t.Fatal(err)
	}
	fork, err := s.Repo(ctx, "bob", "proj")
	if err != nil || fork.ForkedFrom != "alice/proj" || fork.ID == orig.ID {
		t.Errorf("fork %+v, %v", fork, err)
	}
	if c, err := s.Repo(ctx, "acme", "copy"); err != nil || c.Public {
		t.Errorf("acme/copy %+v, %v", c, err)
	}
	if ok, err := s.CanWrite(ctx, &meta.Principal{Tenant: "bob", Scope: meta.ScopeWrite}, orig); ok || err != nil {
		t.Error("bob may write alice/proj")
	}
	secret, err := s.Repo(ctx, "acme", "secret")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.CanWrite(ctx, &meta.Principal{Tenant: "bob", Scope: meta.ScopeWrite}, secret); !ok || err != nil {
		t.Error("add-member did not let bob write acme/secret")
	}

	// Without a terminal, a delete wants --yes and changes nothing.
	if r := ghost(t, dir, "repo", "delete", "alice/proj"); r.code != 2 || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("delete without --yes: %+v", r)
	}
	if _, err := s.Repo(ctx, "alice", "proj"); err != nil {
		t.Fatalf("a refused delete deleted: %v", err)
	}
	mustGhost(t, dir, "repo", "delete", "alice/proj", "--yes")
	if _, err := s.Repo(ctx, "alice", "proj"); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if _, err := s.Log().Head(ctx, orig.ID); !errors.Is(err, wal.ErrRepoDeleted) {
		t.Errorf("deleted log: %v", err)
	}
	mustGhost(t, dir, "repo", "create", "alice/proj")
	again, err := s.Repo(ctx, "alice", "proj")
	if err != nil || again.ID == orig.ID {
		t.Errorf("recreated %+v, %v (old id %s)", again, err, orig.ID)
	}
}

func TestAdminErrors(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	mustGhost(t, dir, "tenant", "create", "alice")
	mustGhost(t, dir, "repo", "create", "alice/proj")

	tests := []struct {
		args   []string
		code   int
		stderr string // substring
	}{
		{[]string{"tenant"}, 2, "ghost tenant <command>"},
		{[]string{"tenant", "frobnicate"}, 2, "unknown command"},
		{[]string{"tenant", "create"}, 2, "usage: ghost tenant create <name>"},
		{[]string{"tenant", "create", "a", "b"}, 2, "usage"},
		{[]string{"tenant", "create", "x", "--bogus"}, 2, "unknown flag: --bogus"},
		{[]string{"tenant", "create", "alice"}, 1, "already exists"},
		{[]string{"tenant", "create", "ALICE"}, 1, "already exists"},
		{[]string{"tenant", "create", "../etc"}, 1, "invalid name"},
		{[]string{"tenant", "create", "api"}, 1, "reserved"},
		{[]string{"tenant", "add-member", "alice", "alice"}, 1, "not an org"},
		{[]string{"tenant", "add-member", "alice"}, 2, "usage"},
		{[]string{"token", "create", "nobody"}, 1, "not found"},
		{[]string{"token", "create", "alice", "--scope", "root"}, 2, "want read, write or admin"},
		{[]string{"token", "revoke", "alice", "01ABC"}, 1, "not found"},
		{[]string{"token", "revoke", "alice"}, 2, "usage"},
		{[]string{"repo", "create", "noslash"}, 2, "want <owner>/<name>"},
		{[]string{"repo", "create", "a/b/c"}, 2, "want <owner>/<name>"},
		{[]string{"repo", "create", "/x"}, 2, "want <owner>/<name>"},
		{[]string{"repo", "create", "alice/x.git"}, 1, "must not end in"},
		{[]string{"repo", "create", "alice/proj"}, 1, "already exists"},
		{[]string{"repo", "create", "nobody/x"}, 1, "not found"},
		{[]string{"repo", "list", "nobody"}, 1, "not found"},
		{[]string{"repo", "delete", "alice/nope"}, 1, "not found"},
		{[]string{"repo", "fork", "alice/nope", "alice/x"}, 1, "not found"},
		{[]string{"repo", "fork", "alice/proj", "alice"}, 1, "already exists"},
		{[]string{"repo", "fork", "alice/proj"}, 2, "usage"},
		{[]string{"repo", "visibility", "alice/proj", "secret"}, 2, "usage"},
	}
	for _, tt := range tests {
		r := ghost(t, dir, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("ghost %v: exit %d, stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderr)
		}
		if r.code != 0 && r.stdout != "" {
			t.Errorf("ghost %v failed but wrote stdout %q", tt.args, r.stdout)
		}
	}

	// Help is not an error.
	for _, args := range [][]string{{"tenant", "-h"}, {"tenant", "help"}, {"repo", "create", "-h"}, {"token", "create", "--help"}, {"repo", "create", "-help"}} {
		if r := ghost(t, dir, args...); r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("ghost %v: exit %d, stdout %q", args, r.code, r.stdout)
		}
	}
}

// TestAdminNamesItsStore checks that admin commands say on stderr which
// store they used, leaving stdout as scripts read it.
func TestAdminNamesItsStore(t *testing.T) {
	t.Setenv("GHOST_S3_BUCKET", "")
	dir := newStore(t)
	r := ghost(t, dir, "tenant", "create", "zed")
	if r.code != 0 || r.stdout != "created user zed\n" || !strings.Contains(r.stderr, "wrote to "+dir+"\n") {
		t.Fatalf("tenant create: %+v", r)
	}
	r = ghost(t, dir, "token", "create", "zed")
	if first, rest, _ := strings.Cut(r.stdout, "\n"); r.code != 0 || !strings.HasPrefix(first, meta.TokenPrefix) || rest != "" || !strings.Contains(r.stderr, "wrote to "+dir) {
		t.Fatalf("token create: %+v", r)
	}
	r = ghost(t, dir, "tenant", "list")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "NAME") || !strings.Contains(r.stderr, "read from "+dir) {
		t.Fatalf("tenant list: %+v", r)
	}
	// A store command (admin.runE) as well.
	r = ghost(t, dir, "repo", "reindex")
	if r.code != 0 || r.stdout != "listed 1 tenants and 0 repositories\n" || !strings.Contains(r.stderr, "wrote to "+dir+"\n") {
		t.Fatalf("repo reindex: %+v", r)
	}
	// A relative data directory is named by its absolute path, so a run
	// in the wrong directory shows.
	t.Chdir(dir)
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"init", "-data-dir", "rel"}, &out, &errb); code != 0 {
		t.Fatalf("init rel: %s", errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := Main(context.Background(), []string{"tenant", "create", "amy", "-data-dir", "rel"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "wrote to "+filepath.Join(dir, "rel")+"\n") {
		t.Fatalf("relative data dir: exit %d, stderr %q", code, errb.String())
	}
}

// TestNoStrayStore replays issue 21 §2: an admin command run where no
// store is, with no flag, neither answers "not found" about a tenant nor
// creates ./ghost-data; it names the place it looked and the ways out.
func TestNoStrayStore(t *testing.T) {
	for _, k := range []string{"GHOST_S3_BUCKET", "GHOST_DATA_DIR", "GHOST_SERVER", "GHOST_TOKEN"} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no saved login
	t.Setenv("HOME", t.TempDir())
	work := t.TempDir()
	t.Chdir(work)
	for _, args := range [][]string{
		{"repo", "alerts", "alice/hello"},
		{"tenant", "create", "bob"},
		{"token", "list", "bob"},
		{"repo", "compact", "alice/hello"},
		{"repo", "reindex"},
		{"gc", "--dry-run"},
		{"repo", "scans", "alice/hello"},
	} {
		var out, errb bytes.Buffer
		code := Main(context.Background(), args, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "no ghost store at "+filepath.Join(work, "ghost-data")) ||
			!strings.Contains(errb.String(), "the default --data-dir") || !strings.Contains(errb.String(), "ghost login") ||
			strings.Contains(errb.String(), "not found") {
			t.Errorf("ghost %v: exit %d\n%s", args, code, errb.String())
		}
		if ents, _ := os.ReadDir(work); len(ents) != 0 {
			t.Fatalf("ghost %v left %v behind", args, ents)
		}
	}
	// Named on purpose, the message says so without the default's note.
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"tenant", "list", "--data-dir", "elsewhere"}, &out, &errb); code != 1 || strings.Contains(errb.String(), "the default") || !strings.Contains(errb.String(), filepath.Join(work, "elsewhere")) {
		t.Errorf("--data-dir elsewhere: %d %s", code, errb.String())
	}
	// init creates it; then the command runs.
	if code := Main(context.Background(), []string{"init"}, &out, &errb); code != 0 {
		t.Fatalf("init: %s", errb.String())
	}
	if code := Main(context.Background(), []string{"tenant", "create", "bob"}, &out, &errb); code != 0 {
		t.Fatalf("after init: %s", errb.String())
	}
}

// newStore returns a data directory holding an empty store, made by
// "ghost init" as an operator would.
func newStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"init", "--data-dir", dir}, &out, &errb); code != 0 {
		t.Fatalf("ghost init: %d %s", code, errb.String())
	}
	return dir
}
