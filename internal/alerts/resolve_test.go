package alerts

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore/memstore"
)

// TestResolvePrefix: an alert is found by any unique prefix of 7 or more
// hex digits of its id, in either case, as git finds commits; a shorter,
// non-hex, shared or unknown prefix is refused with its own error, and
// another repository's alerts are never matched.
func TestResolvePrefix(t *testing.T) {
	ctx := context.Background()
	s := New(memstore.New())
	fps := []string{
		"abcdef0" + strings.Repeat("1", 57),
		"abcdef0" + strings.Repeat("2", 57),
		"1234567" + strings.Repeat("3", 57),
	}
	for i, fp := range fps {
		f := finding(i, i)
		f.Secret, f.Fingerprint = "", fp
		if err := s.Record(ctx, "alice", repo, []Finding{f}, RunRef{ID: "r", Seq: 1}); err != nil {
			t.Fatal(err)
		}
	}
	const other = "01JOTHER000000000000000000"
	f := finding(9, 9)
	f.Secret, f.Fingerprint = "", "fedcba9"+strings.Repeat("4", 57)
	if err := s.Record(ctx, "alice", other, []Finding{f}, RunRef{ID: "r", Seq: 1}); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"1234567":                          fps[2],
		"12345673":                         fps[2],
		"ABCDEF01":                         fps[0],
		" abcdef022 ":                      fps[1],
		fps[1]:                             fps[1],
		strings.ToUpper(fps[2][:20]):       fps[2],
		"abcdef0" + strings.Repeat("2", 9): fps[1],
	} {
		got, err := s.Resolve(ctx, "Alice", repo, in)
		if err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]error{
		"abcdef0":               ErrAmbiguous,
		"123456":                ErrInvalidArgument,
		"1234567z":              ErrInvalidArgument,
		"":                      ErrInvalidArgument,
		strings.Repeat("a", 65): ErrInvalidArgument,
		"7777777":               ErrNotFound,
		"fedcba9":               ErrNotFound, // another repository's
	} {
		if _, err := s.Resolve(ctx, "alice", repo, in); !errors.Is(err, want) {
			t.Errorf("Resolve(%q): %v, want %v", in, err, want)
		}
	}
	if _, err := s.Resolve(ctx, "alice", repo, "abcdef0"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("an ambiguous prefix is not an invalid argument: %v", err)
	}
}
