package objstore

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidateKey: an accepted key is 1..1024 bytes of non-empty segments,
// none "." or "..", with no control byte or backslash, so that joining it
// under a directory neither escapes nor gets rewritten by path cleaning.
func FuzzValidateKey(f *testing.F) {
	for _, s := range []string{"repos/a/index", "meta/tenants/alice", "a", "a..b/c", "../x", "a//b", "/a", "a/", "a/./b", "a\\b", "a\x00b", "a\x7fb", strings.Repeat("k", 1025)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := ValidateKey(key)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error %v does not wrap ErrInvalidKey", err)
			}
			return
		}
		if key == "" || len(key) > 1024 || strings.HasPrefix(key, "/") || strings.HasSuffix(key, "/") || strings.Contains(key, "//") {
			t.Fatalf("%q accepted", key)
		}
		for _, seg := range strings.Split(key, "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("%q accepted with segment %q", key, seg)
			}
		}
		for i := 0; i < len(key); i++ {
			if c := key[i]; c < 0x20 || c == 0x7f || c == '\\' {
				t.Fatalf("%q accepted with byte %#x", key, c)
			}
		}
		const root = "/srv/ghost/objects"
		p := filepath.Join(root, filepath.FromSlash(key))
		if p != root+"/"+key || !strings.HasPrefix(p, root+"/") {
			t.Fatalf("%q maps to %q", key, p)
		}
	})
}
