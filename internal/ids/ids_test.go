package ids

import (
	"errors"
	"strings"
	"testing"
)

func TestIdentifiers(t *testing.T) {
	for _, tc := range []struct {
		check func(string) error
		in    string
		ok    bool
	}{
		{ValidateName, "alice", true},
		{ValidateName, "a.b_c-9", true},
		{ValidateName, "", false},
		{ValidateName, strings.Repeat("a", MaxNameLen+1), false},
		{ValidateName, "..", false},
		{ValidateName, "-flag", false},
		{ValidateName, "x.GIT", false},
		{ValidateName, "a/b", false},
		{ValidateName, "caf\u00e9", false},
		{CheckRepoID, "01HZ-repo_id.1", true},
		{CheckRepoID, "-x", true},
		{CheckRepoID, ".x", false},
		{CheckRepoID, "a..b", false},
		{CheckRepoID, "a/b", false},
		{CheckRepoID, strings.Repeat("r", MaxRepoIDLen+1), false},
		{CheckObjectID, strings.Repeat("a", 40), true},
		{CheckObjectID, strings.Repeat("0", 64), true},
		{CheckObjectID, strings.Repeat("A", 40), false},
		{CheckObjectID, strings.Repeat("a", 41), false},
		{CheckRefName, "refs/heads/main", true},
		{CheckRefName, "refs/heads", false},
		{CheckRefName, "HEAD", false},
		{CheckRefName, "refs/heads/a..b", false},
		{CheckRefName, "refs/heads/x.lock", false},
		{CheckRefName, "refs/heads/a b", false},
		{CheckRefName, "refs/heads/" + strings.Repeat("x", MaxRefNameLen), false},
	} {
		err := tc.check(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%.40q: %v, want ok %v", tc.in, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%.40q: %v does not match ErrInvalid", tc.in, err)
		}
	}
}

// FuzzIdentifiers checks the promises the keys and URLs rely on: an
// accepted name or repository id is one key segment (no separator, never
// hidden, "." or ".."), a repository id has no ".." at all, and an
// accepted ref name is below refs/ with no "..".
func FuzzIdentifiers(f *testing.F) {
	for _, s := range []string{"alice", "..", "refs/heads/main", "a/../b", "x.git", strings.Repeat("f", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, check := range []func(string) error{ValidateName, CheckRepoID} {
			if check(s) == nil && (s == "" || strings.ContainsAny(s, "/\\\x00 ") || s[0] == '.') {
				t.Fatalf("accepted %q", s)
			}
		}
		if CheckRepoID(s) == nil && strings.Contains(s, "..") {
			t.Fatalf("accepted repository id %q", s)
		}
		if CheckRefName(s) == nil && (!strings.HasPrefix(s, "refs/") || strings.Contains(s, "..") || strings.Contains(s, "//")) {
			t.Fatalf("accepted ref %q", s)
		}
		if IsObjectID(s) && len(s) != 40 && len(s) != 64 {
			t.Fatalf("accepted object id %q", s)
		}
	})
}
