// Package pointer reads Git LFS pointer files: the small text file git
// holds in place of a file tracked by LFS, naming the object's sha256
// and size (the git-lfs specification, v1). The push path reads them to
// refuse pointers to objects never uploaded, the scanners to scan the
// objects they name, and the web UI to show the object instead of the
// pointer (docs/design.md §7.10).
package pointer

import (
	"bytes"
	"strconv"
	"strings"
)

// MaxSize is the largest blob read as a possible pointer: the
// specification keeps pointer files under 1024 bytes.
const MaxSize = 1023

// Parse returns the sha256 oid of a Git LFS pointer file, and false for
// anything else. A pointer is "key value" lines, each ending in a
// newline, starting with the spec's version line and holding
// "oid sha256:<64 lower-case hex>" and "size <decimal>".
func Parse(b []byte) (string, bool) {
	if len(b) > MaxSize || !bytes.HasSuffix(b, []byte("\n")) || !bytes.HasPrefix(b, []byte("version ")) {
		return "", false
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) < 3 || (lines[0] != "version https://git-lfs.github.com/spec/v1" && lines[0] != "version https://hawser.github.com/spec/v1") {
		return "", false
	}
	oid, size := "", false
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, " ")
		if !ok || k == "" {
			return "", false
		}
		switch k {
		case "oid":
			h, ok := strings.CutPrefix(v, "sha256:")
			if !ok || !IsOID(h) || oid != "" {
				return "", false
			}
			oid = h
		case "size":
			if _, err := strconv.ParseUint(v, 10, 63); err != nil || size {
				return "", false
			}
			size = true
		}
	}
	if oid == "" || !size {
		return "", false
	}
	return oid, true
}

// IsOID reports whether s is a sha256 in lower-case hex, as LFS names
// its objects.
func IsOID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
