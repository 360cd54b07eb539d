package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/sshd"
)

// TestSSHGitServiceAuthorizes checks that the SSH adapter decides as the
// HTTP path does and then serves the stream: an anonymous push is
// unauthenticated, a private repository is absent to others, and the
// owner gets the upload-pack advertisement.
func TestSSHGitServiceAuthorizes(t *testing.T) {
	s := newServer(t)
	seed(t, s)
	ctx := context.Background()
	if _, err := s.Meta().CreateTenant(ctx, "bob", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	alice := &meta.Principal{Tenant: "alice", TokenID: "k1", Scope: meta.ScopeWrite}
	bob := &meta.Principal{Tenant: "bob", TokenID: "k2", Scope: meta.ScopeWrite}
	git := s.SSHGitService()
	req := func(p *meta.Principal, out *bytes.Buffer) sshd.Request {
		return sshd.Request{Principal: p, Owner: "alice", Repo: "demo", Stdin: strings.NewReader("0000"), Stdout: out, Stderr: &bytes.Buffer{}}
	}
	var out bytes.Buffer
	if err := git.ReceivePack(ctx, req(nil, &out)); !errors.Is(err, meta.ErrUnauthenticated) {
		t.Errorf("anonymous push: %v, want ErrUnauthenticated", err)
	}
	if err := git.UploadPack(ctx, req(bob, &out)); !errors.Is(err, meta.ErrNotFound) {
		t.Errorf("bob reads alice's private repository: %v, want ErrNotFound", err)
	}
	if err := git.UploadArchive(ctx, req(alice, &out)); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("upload-archive: %v, want ErrUnsupported", err)
	}
	if out.Len() != 0 {
		t.Fatalf("refusals wrote %q", out.String())
	}
	if err := git.UploadPack(ctx, req(alice, &out)); err != nil {
		t.Fatalf("alice reads: %v", err)
	}
	if !strings.HasSuffix(out.String(), "0000") {
		t.Errorf("upload-pack over a stream: %q, want the advertisement of an empty repository", out.String())
	}
	out.Reset()
	if err := git.ReceivePack(ctx, req(alice, &out)); err != nil {
		t.Fatalf("alice pushes nothing: %v", err)
	}
	if !strings.Contains(out.String(), "report-status") {
		t.Errorf("receive-pack over a stream: %q, want ghost's advertisement", out.String())
	}
}

// TestSSHAnonymousPushIsNoOracle: an anonymous push answers the same for
// a private repository that exists, a public one, a missing one and a
// missing owner, so the answer tells nobody which private names exist
// (issue 19; docs/design.md §7.4).
func TestSSHAnonymousPushIsNoOracle(t *testing.T) {
	s := newServer(t)
	seed(t, s) // alice/demo, private
	ctx := context.Background()
	if _, err := s.Meta().CreateRepo(ctx, "alice", "open", true); err != nil {
		t.Fatal(err)
	}
	git := s.SSHGitService()
	answer := func(owner, repo string) string {
		var out, errb bytes.Buffer
		err := git.ReceivePack(ctx, sshd.Request{Owner: owner, Repo: repo, Stdin: strings.NewReader("0000"), Stdout: &out, Stderr: &errb})
		if out.Len() != 0 || errb.Len() != 0 {
			t.Errorf("anonymous push to %s/%s wrote %q %q", owner, repo, out.String(), errb.String())
		}
		if !errors.Is(err, meta.ErrUnauthenticated) {
			t.Errorf("anonymous push to %s/%s: %v, want ErrUnauthenticated", owner, repo, err)
		}
		return fmt.Sprint(err)
	}
	private := answer("alice", "demo")
	for _, r := range [][2]string{{"alice", "nope"}, {"nobody", "nope"}, {"alice", "open"}} {
		if got := answer(r[0], r[1]); got != private {
			t.Errorf("anonymous push to %s/%s answers %q, to the private alice/demo %q", r[0], r[1], got, private)
		}
	}
}
