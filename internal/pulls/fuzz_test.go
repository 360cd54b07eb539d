package pulls

import (
	"strings"
	"testing"
)

// The listing-key parsers read keys anyone with write access to the
// store could have put there: they never panic, and what they accept
// is what the formatters write.
func FuzzKeys(f *testing.F) {
	k := stateKey{number: 7, gen: 3, nonce: "ab12", at: 1700000000000}
	f.Add(strings.TrimPrefix(k.listKey("R", "open"), listStatePrefix("R", "open")))
	f.Add(strings.TrimPrefix(k.headKey("H", "topic", "R"), headsRefPrefix("H", "topic")))
	f.Add("9999999999,1,x,1")
	f.Add(",,,,")
	f.Fuzz(func(t *testing.T, s string) {
		if k, ok := parseListKey(s); ok {
			if k.number == 0 || k.number > MaxNumber || k.nonce == "" {
				t.Fatalf("accepted %q as %+v", s, k)
			}
			again := strings.TrimPrefix(k.listKey("R", "open"), listStatePrefix("R", "open"))
			if k2, ok := parseListKey(again); !ok || k2 != k {
				t.Fatalf("%q: %+v does not round-trip (%q)", s, k, again)
			}
		}
		if repo, k, ok := parseHeadKey(s); ok {
			if repo == "" || k.number == 0 || k.number > MaxNumber {
				t.Fatalf("accepted %q as %q %+v", s, repo, k)
			}
		}
	})
}

// git's outputs are parsed without trusting them: no panic on anything.
func FuzzGitOutputs(f *testing.F) {
	f.Add([]byte(":100644 100644 " + strings.Repeat("a", 40) + " " + strings.Repeat("b", 40) + " M\x00f\x001\t2\tf\x00"))
	f.Add([]byte(":100644 100644 " + strings.Repeat("a", 40) + " " + strings.Repeat("b", 40) + " R100\x00a\x00b\x00-\t-\t\x00a\x00b\x00"))
	f.Add([]byte("tree " + strings.Repeat("c", 40) + "\nauthor A <a@b> 1 +0000\ncommitter C <c@d> 2 +0000\n\nmsg\n"))
	f.Add([]byte("diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/y b/y\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if es, err := parseRawNumstat(b); err == nil {
			for _, e := range es {
				_ = statusName(e.status)
			}
		}
		if c, err := parseCommit(strings.Repeat("d", 40), b); err == nil && !isOID(c.tree) {
			t.Fatalf("accepted a commit without a tree id: %+v", c)
		}
		_ = parsePerson(string(b))
		blocks := splitDiff(string(b))
		if strings.Join(blocks, "") != string(b) {
			t.Fatalf("splitDiff lost bytes")
		}
	})
}
