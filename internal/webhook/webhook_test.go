package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v68/github"
)

// loopbackOnly is a Dialer that fails the test if asked to connect
// anywhere but 127.0.0.1: no test here may send a packet elsewhere.
type loopbackOnly struct {
	t     *testing.T
	calls []string
}

func (d *loopbackOnly) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.t.Helper()
	d.calls = append(d.calls, address)
	host, _, err := net.SplitHostPort(address)
	if err != nil || host != "127.0.0.1" {
		d.t.Errorf("asked to dial %s: only 127.0.0.1 may be dialled", address)
		return nil, errors.New("refused by the test dialer")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// fakeResolver is a fake (it injects DNS answers): names map to
// addresses without asking any DNS server.
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

var testRepo = Repository{ID: "01JABCDEFGHJKMNPQRSTVWXYZ0", Owner: "ann", Name: "web", DefaultBranch: "main", BaseURL: "https://git.example.com"}

func testPush(n int) Push {
	p := Push{Ref: "refs/heads/main", Before: strings.Repeat("0", 40), After: fmt.Sprintf("%040x", n), Pusher: "ann", Repo: testRepo, At: time.Unix(1700000000, 0)}
	for i := 1; i <= n; i++ {
		p.Commits = append(p.Commits, Commit{ID: fmt.Sprintf("%040x", i), TreeID: strings.Repeat("e", 40), Message: fmt.Sprint("commit ", i),
			Timestamp: time.Unix(1700000000+int64(i), 0), AuthorName: "Ann", AuthorEmail: "ann@example.com", CommitterName: "Ann", CommitterEmail: "ann@example.com"})
	}
	return p
}

// receiver is a real HTTP server on 127.0.0.1 that checks each delivery
// as a GitHub receiver does, with go-github.
type receiver struct {
	srv    *httptest.Server
	secret []byte
	got    chan any
	ids    chan string
}

func newReceiver(t *testing.T, secret []byte, handler http.HandlerFunc) *receiver {
	rc := &receiver{secret: secret, got: make(chan any, 16), ids: make(chan string, 16)}
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			payload, err := github.ValidatePayload(r, rc.secret)
			if err != nil {
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			}
			ev, err := github.ParseWebHook(github.WebHookType(r), payload)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			rc.ids <- github.DeliveryID(r)
			rc.got <- ev
			fmt.Fprintln(w, "ok")
		}
	}
	rc.srv = httptest.NewServer(handler)
	t.Cleanup(rc.srv.Close)
	return rc
}

func TestDeliveriesParseAsGitHubs(t *testing.T) {
	secret := []byte("s3cr3t-hook-key")
	rc := newReceiver(t, secret, nil)
	d := &loopbackOnly{t: t}
	s := NewSender(Options{Policy: Policy{AllowPrivate: true}, Dialer: d})
	ctx := context.Background()

	body, err := PushPayload(testPush(25))
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Send(ctx, rc.srv.URL, secret, Delivery{ID: "d-1", Event: "push", Body: body})
	if err != nil {
		t.Fatalf("send: %v (%d %s)", err, res.Status, res.Excerpt)
	}
	pe, ok := (<-rc.got).(*github.PushEvent)
	if !ok {
		t.Fatal("not a push event")
	}
	if id := <-rc.ids; id != "d-1" {
		t.Errorf("delivery id %q", id)
	}
	if pe.GetRef() != "refs/heads/main" || !pe.GetCreated() || pe.GetDeleted() || len(pe.Commits) != MaxPushCommits || pe.GetSize() != 25 {
		t.Errorf("push event: ref %q created %v deleted %v commits %d size %d", pe.GetRef(), pe.GetCreated(), pe.GetDeleted(), len(pe.Commits), pe.GetSize())
	}
	if pe.GetHeadCommit().GetID() != fmt.Sprintf("%040x", 25) || pe.Commits[0].GetID() != fmt.Sprintf("%040x", 6) {
		t.Errorf("head %s, first listed %s: want the newest 20, oldest first", pe.GetHeadCommit().GetID(), pe.Commits[0].GetID())
	}
	if r := pe.GetRepo(); r.GetFullName() != "ann/web" || r.GetID() != NumericID(testRepo.ID) || r.GetNodeID() != testRepo.ID || r.GetCloneURL() != "https://git.example.com/ann/web.git" {
		t.Errorf("repository %+v", r)
	}
	if pe.GetPusher().GetName() != "ann" || pe.GetSender().GetLogin() != "ann" {
		t.Errorf("pusher %v sender %v", pe.GetPusher(), pe.GetSender())
	}

	ev, body, ok, err := RefEvent(testPush(1))
	if err != nil || !ok || ev != "create" {
		t.Fatalf("RefEvent = %q, %v, %v", ev, ok, err)
	}
	if _, err := s.Send(ctx, rc.srv.URL, secret, Delivery{ID: "d-2", Event: ev, Body: body}); err != nil {
		t.Fatal(err)
	}
	if ce, ok := (<-rc.got).(*github.CreateEvent); !ok || ce.GetRef() != "main" || ce.GetRefType() != "branch" {
		t.Errorf("create event %+v", ce)
	}
	<-rc.ids

	body, err = PingPayload(Hook{ID: 7, URL: rc.srv.URL, Events: []string{"push"}, Active: true}, testRepo, "ann", "Keep it logically awesome.")
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Send(ctx, rc.srv.URL, secret, Delivery{ID: "d-3", Event: "ping", Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if pe, ok := (<-rc.got).(*github.PingEvent); !ok || pe.GetHookID() != 7 || pe.GetHook().Config.GetURL() != rc.srv.URL {
		t.Errorf("ping event %+v", pe)
	}
	<-rc.ids
	// The secret is in no payload and no header kept for the log.
	for _, b := range [][]byte{body, []byte(fmt.Sprint(res.RequestHeaders)), res.Excerpt} {
		if bytes.Contains(b, secret) {
			t.Errorf("the hook's secret appears in %q", b)
		}
	}
	for _, a := range d.calls {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("dialled %s", a)
		}
	}
}

func TestWrongSecretIsRejectedByTheReceiver(t *testing.T) {
	rc := newReceiver(t, []byte("right"), nil)
	s := NewSender(Options{Policy: Policy{AllowPrivate: true}, Dialer: &loopbackOnly{t: t}})
	body, _ := PushPayload(testPush(1))
	res, err := s.Send(context.Background(), rc.srv.URL, []byte("wrong"), Delivery{ID: "x", Event: "push", Body: body})
	if !errors.Is(err, ErrFailed) || res.Status != http.StatusUnauthorized {
		t.Fatalf("got %v (%d), want ErrFailed with 401: the signature must depend on the secret", err, res.Status)
	}
}

func TestPolicyRefusesInternalAddresses(t *testing.T) {
	rc := newReceiver(t, nil, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	_, port, _ := net.SplitHostPort(rc.srv.Listener.Addr().String())
	res := fakeResolver{
		"loopback.example": addrs("127.0.0.1"),
		"meta.example":     addrs("169.254.169.254"),
		"mixed.example":    addrs("10.0.0.1", "fd00:ec2::254"),
		"6to4.example":     addrs("2002:a9fe:a9fe::1"),
		"compat.example":   addrs("::7f00:1"),
	}
	body := []byte(`{}`)
	cases := []struct {
		url       string
		loopback  bool // reaches the receiver when private addresses are allowed
		wantBlock bool
	}{
		{"http://127.0.0.1:" + port + "/", true, true},
		{"http://loopback.example:" + port + "/", true, true},
		{"http://[::ffff:127.0.0.1]:" + port + "/", true, true},
		{"http://169.254.169.254/latest/meta-data/", false, true},
		{"http://meta.example/", false, true},
		{"http://10.0.0.1/", false, true},
		{"http://mixed.example/", false, true},
		{"http://[::1]:" + port + "/", false, true},
		{"http://100.64.0.1/", false, true},
		{"http://0.0.0.0:" + port + "/", false, true},
		{"http://[2002:7f00:1::1]:" + port + "/", false, true},
		{"http://6to4.example/", false, true},
		{"http://[::7f00:1]:" + port + "/", false, true},
		{"http://compat.example:" + port + "/", false, true},
		{"http://[64:ff9b::7f00:1]:" + port + "/", false, true},
		{"http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", false, true},
	}
	for _, tc := range cases {
		t.Run(tc.url, func(t *testing.T) {
			d := &loopbackOnly{t: t}
			s := NewSender(Options{Dialer: d, Resolver: res})
			_, err := s.Send(context.Background(), tc.url, nil, Delivery{ID: "x", Event: "ping", Body: body})
			if !errors.Is(err, ErrBlockedAddress) {
				t.Errorf("default policy: %v, want ErrBlockedAddress", err)
			}
			if len(d.calls) != 0 {
				t.Errorf("dialled %v for a refused address", d.calls)
			}
			if !tc.loopback {
				return
			}
			s = NewSender(Options{Policy: Policy{AllowPrivate: true}, Dialer: d, Resolver: res})
			if _, err := s.Send(context.Background(), tc.url, nil, Delivery{ID: "x", Event: "ping", Body: body}); err != nil {
				t.Errorf("with private addresses allowed: %v", err)
			}
		})
	}
}

func TestRedirects(t *testing.T) {
	target := newReceiver(t, nil, func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "reached") })
	_, port, _ := net.SplitHostPort(target.srv.Listener.Addr().String())
	redirect := newReceiver(t, nil, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://[::1]:"+port+"/", http.StatusTemporaryRedirect)
	})
	allow := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	d := &loopbackOnly{t: t}

	// Not followed by default: a 3xx is a failed delivery.
	s := NewSender(Options{Policy: allow, Dialer: d})
	res, err := s.Send(context.Background(), redirect.srv.URL, nil, Delivery{ID: "x", Event: "ping", Body: []byte(`{}`)})
	if !errors.Is(err, ErrFailed) || res.Status != http.StatusTemporaryRedirect {
		t.Errorf("default: %v (%d), want a failed delivery with the 307", err, res.Status)
	}
	// Followed, the redirect's target is checked again and refused.
	s = NewSender(Options{Policy: allow, Dialer: d, FollowRedirects: true})
	_, err = s.Send(context.Background(), redirect.srv.URL, nil, Delivery{ID: "x", Event: "ping", Body: []byte(`{}`)})
	if !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("followed to ::1: %v, want ErrBlockedAddress", err)
	}
}

func TestResponsesAreBounded(t *testing.T) {
	rc := newReceiver(t, nil, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, io.LimitReader(zeros{}, 8<<20))
	})
	s := NewSender(Options{Policy: Policy{AllowPrivate: true}, Dialer: &loopbackOnly{t: t}})
	res, err := s.Send(context.Background(), rc.srv.URL, nil, Delivery{ID: "x", Event: "ping", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Excerpt) != DefaultExcerptSize {
		t.Errorf("excerpt of %d bytes, want %d", len(res.Excerpt), DefaultExcerptSize)
	}

	slow := newReceiver(t, nil, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	})
	s = NewSender(Options{Policy: Policy{AllowPrivate: true}, Dialer: &loopbackOnly{t: t}, Timeout: 100 * time.Millisecond})
	if _, err := s.Send(context.Background(), slow.srv.URL, nil, Delivery{ID: "x", Event: "ping", Body: []byte(`{}`)}); err == nil {
		t.Error("a receiver that never answers: no error")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		addr    string
		refused bool
	}{
		{"93.184.216.34", false}, {"2606:2800:220:1::", false}, {"8.8.8.8", false},
		{"127.0.0.1", true}, {"127.9.9.9", true}, {"::1", true}, {"10.1.2.3", true}, {"172.16.0.1", true},
		{"192.168.1.1", true}, {"169.254.169.254", true}, {"fe80::1", true}, {"fd00:ec2::254", true},
		{"100.64.0.1", true}, {"0.0.0.0", true}, {"::", true}, {"224.0.0.1", true}, {"255.255.255.255", true},
		{"::ffff:10.0.0.1", true}, {"::ffff:100.64.0.1", true}, {"64:ff9b::a00:1", true}, {"198.18.0.1", true},
		// IPv6 forms that carry an IPv4 address (issue 44): 6to4 of
		// 10.0.0.1, 127.0.0.1, 169.254.169.254 and a public address;
		// NAT64 local; IPv4-compatible; IPv4-translated; Teredo.
		{"2002:a00:1::1", true}, {"2002:7f00:1::", true}, {"2002:a9fe:a9fe::1", true}, {"2002:5db8:d822::1", true},
		{"64:ff9b:1::a00:1", true}, {"::a00:1", true}, {"::7f00:1", true}, {"::a9fe:a9fe", true},
		{"::ffff:0:a00:1", true}, {"2001:0:4136:e378:8000:63bf:3fff:fdd2", true},
		{"::ffff:93.184.216.34", false}, {"2003::1", false}, {"2001:4860:4860::8888", false},
	} {
		err := Policy{}.Check(netip.MustParseAddr(tc.addr))
		if (err != nil) != tc.refused {
			t.Errorf("Check(%s) = %v, want refused %v", tc.addr, err, tc.refused)
		}
		if err := (Policy{AllowPrivate: true}).Check(netip.MustParseAddr(tc.addr)); err != nil {
			t.Errorf("AllowPrivate: Check(%s) = %v", tc.addr, err)
		}
	}
	allow := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}}
	if allow.Check(netip.MustParseAddr("10.0.0.7")) != nil || allow.Check(netip.MustParseAddr("10.0.1.7")) == nil {
		t.Error("the allow-list admits exactly its networks")
	}
}

func TestSignMatchesGitHubs(t *testing.T) {
	body := []byte(`{"zen":"x"}`)
	sig := Sign([]byte("k"), body)
	if err := github.ValidateSignature(sig, body, []byte("k")); err != nil {
		t.Fatal(err)
	}
	if err := github.ValidateSignature(sig, body, []byte("other")); err == nil {
		t.Fatal("a signature under another key validated")
	}
}

// TestPullRequestPayloadParsesAsGitHubs: each action's payload is a
// go-github PullRequestEvent with GitHub's fields; a merge is "closed"
// with merged true, a close without merging is not merged.
func TestPullRequestPayloadParsesAsGitHubs(t *testing.T) {
	fork := Repository{ID: "01FORK", Owner: "bob", Name: "web", BaseURL: testRepo.BaseURL}
	at := time.Unix(1700000000, 0).UTC()
	pr := PullRequest{
		Number: 7, Title: "Add a thing", Body: "Because.", Author: "bob", State: "open", CreatedAt: at, UpdatedAt: at,
		Head: PullBranch{Ref: "topic", SHA: strings.Repeat("a", 40), Repo: fork},
		Base: PullBranch{Ref: "main", SHA: strings.Repeat("b", 40), Repo: testRepo},
	}
	parse := func(action string, pr PullRequest) *github.PullRequestEvent {
		t.Helper()
		body, err := PullRequestPayload(action, pr)
		if err != nil {
			t.Fatal(err)
		}
		ev, err := github.ParseWebHook("pull_request", body)
		if err != nil {
			t.Fatal(err)
		}
		pe, ok := ev.(*github.PullRequestEvent)
		if !ok {
			t.Fatalf("%T", ev)
		}
		return pe
	}
	pe := parse("opened", pr)
	p := pe.GetPullRequest()
	if pe.GetAction() != "opened" || pe.GetNumber() != 7 || p.GetNumber() != 7 || p.GetState() != "open" || p.GetMerged() || p.GetTitle() != "Add a thing" || p.GetBody() != "Because." || p.GetUser().GetLogin() != "bob" {
		t.Errorf("opened: %+v", p)
	}
	if p.GetHead().GetRef() != "topic" || p.GetHead().GetLabel() != "bob:topic" || p.GetHead().GetRepo().GetFullName() != "bob/web" || p.GetBase().GetSHA() != strings.Repeat("b", 40) || p.GetBase().GetRepo().GetFullName() != "ann/web" {
		t.Errorf("branches: head %+v base %+v", p.GetHead(), p.GetBase())
	}
	if p.GetURL() != "https://git.example.com/api/repos/ann/web/pulls/7" || p.ClosedAt != nil || p.MergedAt != nil {
		t.Errorf("url %q closed %v merged %v", p.GetURL(), p.ClosedAt, p.MergedAt)
	}

	closed := pr
	closed.State, closed.ClosedAt = "closed", at.Add(time.Hour)
	if p := parse("closed", closed).GetPullRequest(); p.GetState() != "closed" || p.GetMerged() || p.GetClosedAt().Time != closed.ClosedAt || p.MergedAt != nil {
		t.Errorf("closed: state %q merged %v closed %v", p.GetState(), p.GetMerged(), p.GetClosedAt())
	}
	merged := closed
	merged.State, merged.MergedAt, merged.MergedBy, merged.MergeCommit = "merged", closed.ClosedAt, "ann", strings.Repeat("c", 40)
	if p := parse("closed", merged).GetPullRequest(); p.GetState() != "closed" || !p.GetMerged() || p.GetMergedBy().GetLogin() != "ann" || p.GetMergeCommitSHA() != strings.Repeat("c", 40) {
		t.Errorf("merged: state %q merged %v by %v commit %q", p.GetState(), p.GetMerged(), p.GetMergedBy(), p.GetMergeCommitSHA())
	}
}
