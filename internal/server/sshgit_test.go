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

// TestSSHLFSTransferAuthorizes: git-lfs-transfer is decided as git over
// SSH (download a read, upload a write; a private repository absent to
// others), then speaks the protocol; a client that breaks it is refused
// in words sshd shows.
func TestSSHLFSTransferAuthorizes(t *testing.T) {
	s := newServer(t)
	seed(t, s) // alice/demo, private
	ctx := context.Background()
	if _, err := s.Meta().CreateTenant(ctx, "bob", meta.KindUser); err != nil {
		t.Fatal(err)
	}
	alice := &meta.Principal{Tenant: "alice", TokenID: "k1", Scope: meta.ScopeWrite}
	aliceRead := &meta.Principal{Tenant: "alice", TokenID: "k3", Scope: meta.ScopeRead}
	bob := &meta.Principal{Tenant: "bob", TokenID: "k2", Scope: meta.ScopeWrite}
	git := s.SSHGitService()
	const session = "000eversion 1\n0000" + "0009quit\n0000"
	run := func(p *meta.Principal, repo, op, in string) (string, error) {
		var out bytes.Buffer
		err := git.LFSTransfer(ctx, sshd.Request{Principal: p, Owner: "alice", Repo: repo, Operation: op, Stdin: strings.NewReader(in), Stdout: &out, Stderr: &bytes.Buffer{}})
		return out.String(), err
	}
	for _, c := range []struct {
		name    string
		p       *meta.Principal
		repo    string
		op      string
		wantErr error
	}{
		{"anonymous upload", nil, "demo", "upload", meta.ErrUnauthenticated},
		{"anonymous download of a private repository", nil, "demo", "download", meta.ErrNotFound},
		{"bob downloads", bob, "demo", "download", meta.ErrNotFound},
		{"bob uploads", bob, "demo", "upload", meta.ErrNotFound},
		{"a missing repository", alice, "nope", "download", meta.ErrNotFound},
		{"a read-only key uploads", aliceRead, "demo", "upload", meta.ErrForbidden},
	} {
		out, err := run(c.p, c.repo, c.op, session)
		if !errors.Is(err, c.wantErr) || out != "" {
			t.Errorf("%s: %v, %q; want %v and nothing written", c.name, err, out, c.wantErr)
		}
	}
	for _, op := range []string{"download", "upload"} {
		out, err := run(alice, "demo", op, session)
		if err != nil || !strings.Contains(out, "version=1") || !strings.HasSuffix(out, "000fstatus 200\n0000") {
			t.Errorf("alice's %s session: %v, %q", op, err, out)
		}
	}
	if out, err := run(aliceRead, "demo", "download", session); err != nil || !strings.Contains(out, "status 200") {
		t.Errorf("a read-only key downloads: %v, %q", err, out)
	}
	if _, err := run(alice, "demo", "upload", "zzzz"); !errors.Is(err, sshd.ErrRefused) {
		t.Errorf("a malformed session: %v, want sshd.ErrRefused", err)
	}
}
