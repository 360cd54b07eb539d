package wal

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/ghost-scm/ghost/internal/objstore"
)

var refNameSeeds = []string{
	"refs/heads/main", "refs/tags/v1.0", "refs/heads/feature/x-y_z", "refs/heads/caf\xc3\xa9", "refs/heads/\xff",
	"refs/heads/a.b", "refs/heads/@", "refs/heads/a@b", "refs/notes/commits", "refs/heads/-dash",
	"refs/heads", "refs/heads/", "refs/heads//a", "refs/heads/a..b", "refs/heads/.a", "refs/heads/a.lock",
	"refs/heads/a.lock/b", "refs/heads/a.", "refs/heads/a@{1}", "refs/heads/a b", "refs/heads/a~1", "refs/heads/a^",
	"refs/heads/a:b", "refs/heads/a?", "refs/heads/a*", "refs/heads/a[", "refs/heads/a\\b", "refs/heads/a\x7f",
	"refs/heads/a\x00", "HEAD", "@", "refs/heads/a/.", "refs/heads/./a", "refs/heads/a/..", "refs/heads/{",
}

// FuzzCheckRefName: the check is deterministic and refuses with ErrInvalid;
// an accepted name keeps the rules the log relies on and can be stored in
// an index, which decodes back to it.
func FuzzCheckRefName(f *testing.F) {
	for _, s := range refNameSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckRefName(name)
		if (CheckRefName(name) == nil) != (err == nil) {
			t.Fatalf("%q: not deterministic", name)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", name, err)
			}
			return
		}
		if !strings.HasPrefix(name, "refs/") || len(name) > maxRefName || strings.Contains(name, "..") || strings.Contains(name, "//") ||
			strings.Contains(name, "@{") || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.HasSuffix(name, ".lock") ||
			strings.Contains(name, "/.") || strings.ContainsAny(name, " ~^:?*[\\\x7f") {
			t.Fatalf("%q accepted", name)
		}
		for i := 0; i < len(name); i++ {
			if name[i] < 0x20 {
				t.Fatalf("%q accepted with a control byte", name)
			}
		}
		x := &Index{Seq: 1, Refs: []Ref{{Name: name, ID: strings.Repeat("1", 40)}}, Layers: []Layer{{Size: 1}}}
		b, err := x.MarshalBinary()
		if err != nil {
			t.Fatalf("%q accepted but not encodable: %v", name, err)
		}
		got, err := DecodeIndex(b, "fuzz")
		if err != nil || len(got.Refs) != 1 || got.Refs[0].Name != name {
			t.Fatalf("%q does not survive the index: %v", name, err)
		}
		if b2, _ := got.MarshalBinary(); !bytes.Equal(b, b2) {
			t.Fatalf("%q: index re-encodes differently", name)
		}
	})
}

// TestCheckRefNameAgreesWithGit checks, on the seeds and on random names
// built from the characters the rules care about, that every name ghost
// accepts is one git accepts too (ghost may be stricter: "refs/heads"
// alone, or names over 1024 bytes).
func TestCheckRefNameAgreesWithGit(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git a few hundred times")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("the git binary is not on PATH (exec.LookPath(\"git\") failed)")
	}
	pieces := []string{"a", "Z", "9", ".", "/", "-", "_", "@", "{", "}", "lock", ".lock", "..", "\xc3\xa9", "\xff", "#", "%", "+", "=", "!", ","}
	rng := rand.New(rand.NewPCG(1, 2))
	names := append([]string(nil), refNameSeeds...)
	for len(names) < len(refNameSeeds)+3000 {
		var b strings.Builder
		b.WriteString([]string{"refs/heads/", "refs/tags/", "refs/", "refs/x/"}[rng.IntN(4)])
		for n := 1 + rng.IntN(6); n > 0; n-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		names = append(names, b.String())
	}
	checked := 0
	for _, name := range names {
		if CheckRefName(name) != nil || checked == 150 {
			continue
		}
		checked++
		if out, err := exec.Command(git, "check-ref-format", name).CombinedOutput(); err != nil {
			t.Errorf("ghost accepts %q, git check-ref-format refuses it: %v %s", name, err, out)
		}
	}
	if checked < 100 {
		t.Fatalf("only %d accepted names checked", checked)
	}
}

// FuzzCheckRepoID: an accepted repository id is one path segment that is
// neither "." nor "..", and every key the log builds from it is valid.
func FuzzCheckRepoID(f *testing.F) {
	for _, s := range []string{"01J0000000000000000000000A", "a", "a.b", "a..b", ".", "..", ".a", "a/b", "-a", "_", strings.Repeat("x", 128), strings.Repeat("x", 129), "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, repo string) {
		err := CheckRepoID(repo)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("%q: error %v is not ErrInvalid", repo, err)
			}
			return
		}
		if repo == "" || len(repo) > 128 || repo[0] == '.' || strings.Contains(repo, "..") || strings.ContainsAny(repo, "/\\\n\x00") {
			t.Fatalf("%q accepted", repo)
		}
		for _, k := range []string{IndexKey(repo), entriesPrefix(repo) + "x.pack"} {
			if err := objstore.ValidateKey(k); err != nil {
				t.Fatalf("%q makes a bad key %q: %v", repo, k, err)
			}
		}
	})
}
