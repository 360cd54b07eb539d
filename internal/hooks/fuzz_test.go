package hooks

import (
	"net/url"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/webhook"
)

// FuzzHookKey: a hook key read back names the set and the id it was
// made of, and no input makes the parser panic or accept a key that
// names no set.
func FuzzHookKey(f *testing.F) {
	for _, s := range []string{"r.01JABCDEFGHJKMNPQRSTVWXYZ0.42", "t.alice.7", "t.my.org.9", "t..1", "x.a.1", "r.a/b.1", "t.Alice.1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		set, id, ok := parseHookKey(k)
		if !ok {
			return
		}
		if id <= 0 || !(strings.HasPrefix(set, setsPrefix+"r/") || strings.HasPrefix(set, setsPrefix+"t/")) || strings.Count(set, "/") != 3 {
			t.Fatalf("parseHookKey(%q) = %q, %d", k, set, id)
		}
		kind, owner := set[len(setsPrefix)], set[len(setsPrefix)+2:]
		var sc Scope
		if kind == 'r' {
			sc = Scope{Tenant: "t", Repo: owner, Name: "n"}
		} else {
			sc = Scope{Tenant: owner}
		}
		if again := hookKey(sc, id); again != k {
			t.Fatalf("%q reads as %q %d, which makes %q", k, set, id, again)
		}
	})
}

// FuzzCheckURL: a URL that passes is http or https with a host, no
// credentials, no fragment, no control character, and within bounds;
// nothing panics.
func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"https://ci.example.com/hook", "http://127.0.0.1:9/", "http://[::1]/", "ftp://x/", "https://u:p@x/", "https://x/#f", "http://x/\n", "//x", "http:///x", "https://[fe80::1%25eth0]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := checkURL(s, webhook.Policy{}); err != nil {
			return
		}
		u, err := url.Parse(s)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.Fragment != "" || len(s) > MaxURLBytes {
			t.Fatalf("checkURL accepted %q", s)
		}
		if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Fatalf("checkURL accepted a control character: %q", s)
		}
	})
}
