package hooks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ghost-scm/ghost/internal/webhook"
)

// askedDialer dials 127.0.0.1 and refuses every other address without
// sending a packet, remembering what it was asked for: a test sees that
// the guard let an address through without anything leaving the machine.
type askedDialer struct {
	mu    sync.Mutex
	asked []string
}

func (d *askedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d.mu.Lock()
	d.asked = append(d.asked, address)
	d.mu.Unlock()
	if host, _, _ := net.SplitHostPort(address); host != "127.0.0.1" {
		return nil, errors.New("the test dialer reaches 127.0.0.1 only")
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func (d *askedDialer) wasAsked(host string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.asked {
		if h, _, _ := net.SplitHostPort(a); h == host {
			return true
		}
	}
	return false
}

// fakeResolver is a fake (it injects DNS answers without a DNS server).
type fakeResolver map[string][]netip.Addr

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// TestDeliveriesRefuseInternalAddresses: hooks aimed at 127.0.0.1, the
// cloud metadata address, a private address, a name that resolves to
// loopback and a receiver that redirects to loopback get nothing by
// default: the address is checked after resolution, on the address
// dialled, and redirects are not followed. With private addresses
// allowed (--webhook-allow-private), the same deliveries go out.
func TestDeliveriesRefuseInternalAddresses(t *testing.T) {
	rc := newReceiver(t, "k")
	port := rc.srv.Listener.Addr().(*net.TCPAddr).Port
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, rc.srv.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	res := fakeResolver{"loopback.test": {netip.MustParseAddr("127.0.0.1")}}
	loop := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	urls := map[string]string{
		"loopback":       loop,
		"metadata":       "http://169.254.169.254/latest/meta-data/",
		"private":        "http://10.0.0.1/hook",
		"name->loopback": "http://loopback.test:" + strconv.Itoa(port) + "/",
		"redirect":       redirect.URL,
	}
	for _, allow := range []bool{false, true} {
		e := newEnv(t, nil)
		dial := &askedDialer{}
		o := e.dispatchOptions(e.board(nil, 5*time.Second))
		o.Sender = webhook.Options{Policy: webhook.Policy{AllowPrivate: allow}, Dialer: dial, Resolver: res, Timeout: 2 * time.Second}
		o.RetryFor, o.DisableAfter = time.Millisecond, 100
		d := NewDispatcher(e.hooks, o)
		e.hooks.SetWake(d.Notify)
		run(t, d)
		ids := map[string]int64{}
		for name, u := range urls {
			ids[name] = e.addHook(t, e.scope(), u, "k", "push").ID
		}
		outcome := func(name string) Delivery {
			deadline := time.Now().Add(10 * time.Second)
			for {
				ds, err := e.hooks.Deliveries(context.Background(), e.scope(), ids[name], 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(ds) > 0 {
					return ds[0]
				}
				if time.Now().After(deadline) {
					t.Fatalf("allow=%v %s: no delivery attempted", allow, name)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		for name := range urls {
			dl := outcome(name)
			switch {
			case name == "redirect":
				// Not followed: the 3xx is the receiver's answer, a failure.
				want := !allow
				if refused := strings.Contains(dl.Status, "refused"); refused != want {
					t.Errorf("allow=%v redirect: %q", allow, dl.Status)
				}
				if allow && dl.StatusCode != http.StatusTemporaryRedirect {
					t.Errorf("allow=%v redirect: status %d, want the 307, not followed", allow, dl.StatusCode)
				}
			case !allow:
				if dl.Outcome == "delivered" || !strings.Contains(dl.Status, "refused") {
					t.Errorf("default policy, %s: %s %q, want refused", name, dl.Outcome, dl.Status)
				}
			case name == "loopback" || name == "name->loopback":
				if dl.Outcome != "delivered" {
					t.Errorf("allowed, %s: %s %q", name, dl.Outcome, dl.Status)
				}
			default:
				// Allowed: the guard let it through to the dialer, which
				// refuses to send anything off this machine.
				host := strings.Split(strings.TrimPrefix(urls[name], "http://"), "/")[0]
				if !dial.wasAsked(host) {
					t.Errorf("allowed, %s: the dialer was never asked for %s", name, host)
				}
			}
		}
		if !allow && len(dial.asked) > 0 {
			t.Errorf("default policy: the dialer was asked for %v, want nothing at all", dial.asked)
		}
	}
}
