package pointer

import (
	"strings"
	"testing"
)

const testOID = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"

// good is the pointer git-lfs writes.
const good = "version https://git-lfs.github.com/spec/v1\noid sha256:" + testOID + "\nsize 12345\n"

// Shapes git-lfs 3.3.0 reads as pointers (each is also in the
// differential corpus, so the binary confirms it where it is installed).
var accepted = map[string]string{
	"canonical":              good,
	"no final newline":       strings.TrimSuffix(good, "\n"),
	"leading blank line":     "\n" + good,
	"leading spaces":         "   \t" + good,
	"CRLF":                   strings.ReplaceAll(good, "\n", "\r\n"),
	"blank lines between":    strings.ReplaceAll(good, "\n", "\n\n\n"),
	"CR-only blank lines":    strings.ReplaceAll(good, "\n", "\n\r\n"),
	"trailing white space":   good + " \t\n\v\f\r ",
	"unicode space around":   "\u00a0" + good + "\u2003",
	"hawser version":         strings.Replace(good, "https://git-lfs.github.com/spec/v1", "https://hawser.github.com/spec/v1", 1),
	"git-media version":      strings.Replace(good, "https://git-lfs.github.com/spec/v1", "http://git-media.io/v/2", 1),
	"signed size":            strings.Replace(good, "12345", "+12345", 1),
	"zero-padded size":       strings.Replace(good, "12345", "0012345", 1),
	"size 0":                 strings.Replace(good, "12345", "0", 1),
	"extension":              strings.Replace(good, "oid", "ext-0-foo sha256:"+testOID+"\noid", 1),
	"extension before all":   "ext-1-x sha256:" + testOID + "\n" + good,
	"extension before size":  strings.Replace(good, "size", "ext-9-z_ sha256:"+testOID+"\nsize", 1),
	"extension key suffix":   strings.Replace(good, "oid", "ext-2-a!?# sha256:"+testOID+"\noid", 1),
	"repeated extension key": strings.Replace(good, "oid", "ext-3-a sha256:bad\next-3-a sha256:"+testOID+"\noid", 1),
	"padded past 1024":       good + strings.Repeat(" ", PrefixSize-len(good)) + "anything after the first 1024 bytes",
}

// Shapes git-lfs 3.3.0 refuses.
var refused = map[string]string{
	"other version":         strings.Replace(good, "spec/v1", "spec/v2", 1),
	"version with 2 spaces": strings.Replace(good, "version ", "version  ", 1),
	"upper-case hex":        strings.Replace(good, testOID, strings.ToUpper(testOID), 1),
	"short oid":             strings.Replace(good, testOID, testOID[:63], 1),
	"long oid":              strings.Replace(good, testOID, testOID+"0", 1),
	"sha1 oid":              strings.Replace(good, "sha256:", "sha1:", 1),
	"no size":               strings.Replace(good, "size 12345\n", "", 1),
	"negative size":         strings.Replace(good, "12345", "-1", 1),
	"size overflow":         strings.Replace(good, "12345", "9223372036854775808", 1),
	"hex size":              strings.Replace(good, "12345", "0x10", 1),
	"two oids":              strings.Replace(good, "size", "oid sha256:"+testOID+"\nsize", 1),
	"size before oid":       "version https://git-lfs.github.com/spec/v1\nsize 12345\noid sha256:" + testOID + "\n",
	"version last":          "oid sha256:" + testOID + "\nsize 12345\nversion https://git-lfs.github.com/spec/v1\n",
	"line after size":       good + "x y\n",
	"extension after size":  good + "ext-0-foo sha256:" + testOID + "\n",
	"line without space":    strings.Replace(good, "oid", "junk\noid", 1),
	"unknown key":           strings.Replace(good, "oid", "foo bar\noid", 1),
	"extension, two digits": strings.Replace(good, "oid", "ext-10-foo sha256:"+testOID+"\noid", 1),
	"extension, bad oid":    strings.Replace(good, "oid", "ext-0-foo sha256:xyz\noid", 1),
	"same priority twice":   strings.Replace(good, "oid", "ext-0-a sha256:"+testOID+"\next-0-b sha256:"+testOID+"\noid", 1),
	"tab separator":         strings.Replace(good, "size ", "size\t", 1),
	"CR inside a line":      strings.Replace(good, "size 12345", "size 123\r45", 1),
	"padded, cut at 1024":   strings.Repeat(" ", PrefixSize-len(good)+10) + good,
	"text":                  "hello\n",
	"white space only":      " \n\t\n",
	"version line only":     "version https://git-lfs.github.com/spec/v1\n",
	"version, trailing tab": strings.Replace(good, "spec/v1\n", "spec/v1\t\n", 1),
}

func TestDecode(t *testing.T) {
	for name, s := range accepted {
		p, err := Decode([]byte(s))
		if err != nil || p.OID != testOID {
			t.Errorf("%s: Decode(%q) = %+v, %v; git-lfs reads it as a pointer", name, s, p, err)
		}
		if oid, ok := Parse([]byte(s)); !ok || oid != testOID {
			t.Errorf("%s: Parse = %q, %v", name, oid, ok)
		}
	}
	for name, s := range refused {
		if p, err := Decode([]byte(s)); err == nil {
			t.Errorf("%s: Decode(%q) = %+v; git-lfs refuses it", name, s, p)
		}
		if oid, ok := Parse([]byte(s)); ok {
			t.Errorf("%s: Parse = %q, true", name, oid)
		}
	}
	if p, err := Decode([]byte(good)); err != nil || p.Size != 12345 || p.Empty() {
		t.Errorf("Decode(good) = %+v, %v", p, err)
	}
	// git-lfs reads an empty blob as its empty pointer, which names no
	// object: Parse says there is nothing to fetch.
	if p, err := Decode(nil); err != nil || !p.Empty() {
		t.Errorf("Decode(empty) = %+v, %v", p, err)
	}
	if oid, ok := Parse(nil); ok {
		t.Errorf("Parse(empty) = %q, true", oid)
	}
}

func TestShaped(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{refused["upper-case hex"], true},
		{refused["line after size"], true},
		{"oid sha256:abc\nsize 3\n", true},
		{"hello\n", false},
		{"sha256: checksums of the release, sized", false},
		{strings.Repeat("x", MaxSize) + "oid sha256: size", false},
	} {
		if got := Shaped([]byte(c.s)); got != c.want {
			t.Errorf("Shaped(%.40q) = %v", c.s, got)
		}
	}
}

// FuzzParse: never panics, and an accepted pointer's oid is a sha256 in
// lower-case hex that the first PrefixSize bytes name on an oid line.
func FuzzParse(f *testing.F) {
	for _, s := range accepted {
		f.Add(s)
	}
	for _, s := range refused {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Decode([]byte(s))
		oid, ok := Parse([]byte(s))
		if ok != (err == nil && s != "") || ok && oid != p.OID {
			t.Fatalf("Parse(%q) = %q, %v; Decode = %+v, %v", s, oid, ok, p, err)
		}
		if !ok {
			return
		}
		prefix := s[:min(len(s), PrefixSize)]
		if !IsOID(oid) || !strings.Contains(prefix, "oid sha256:"+oid) || p.Size < 0 {
			t.Fatalf("Parse(%q) = %+v", s, p)
		}
	})
}
