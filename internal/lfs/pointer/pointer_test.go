package pointer

import (
	"strings"
	"testing"
)

const testOID = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"

func TestParse(t *testing.T) {
	good := "version https://git-lfs.github.com/spec/v1\noid sha256:" + testOID + "\nsize 12345\n"
	if oid, ok := Parse([]byte(good)); !ok || oid != testOID {
		t.Fatalf("Parse(a pointer) = %q, %v", oid, ok)
	}
	withExt := "version https://git-lfs.github.com/spec/v1\next-0-foo sha256:" + testOID + "\noid sha256:" + testOID + "\nsize 1\n"
	if _, ok := Parse([]byte(withExt)); !ok {
		t.Errorf("a pointer with an extension line was not read")
	}
	for name, s := range map[string]string{
		"no final newline": strings.TrimSuffix(good, "\n"),
		"other version":    strings.Replace(good, "spec/v1", "spec/v2", 1),
		"upper-case hex":   strings.Replace(good, testOID, strings.ToUpper(testOID), 1),
		"short oid":        strings.Replace(good, testOID, testOID[:63], 1),
		"sha1 oid":         strings.Replace(good, "sha256:", "sha1:", 1),
		"no size":          strings.Replace(good, "size 12345\n", "", 1),
		"bad size":         strings.Replace(good, "12345", "-1", 1),
		"two oids":         strings.Replace(good, "size", "oid sha256:"+testOID+"\nsize", 1),
		"text":             "hello\n",
		"empty":            "",
		"too long":         good + strings.Repeat("x", 1024) + "\n",
	} {
		if oid, ok := Parse([]byte(s)); ok {
			t.Errorf("%s: Parse = %q, true", name, oid)
		}
	}
}

// FuzzParse: never panics, and an accepted pointer's oid is a
// sha256 in lower-case hex that the input names.
func FuzzParse(f *testing.F) {
	f.Add("version https://git-lfs.github.com/spec/v1\noid sha256:" + testOID + "\nsize 12345\n")
	f.Add("version https://git-lfs.github.com/spec/v1\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		oid, ok := Parse([]byte(s))
		if !ok {
			return
		}
		if !IsOID(oid) || !strings.Contains(s, "\noid sha256:"+oid+"\n") {
			t.Fatalf("Parse(%q) = %q", s, oid)
		}
	})
}
