// Package pointer reads Git LFS pointer files: the small text file git
// holds in place of a file tracked by LFS, naming the object's sha256
// and size. Every part of ghost that asks "is this blob a pointer, and to
// what" asks this package: the push path's check for objects never
// uploaded, push protection, scan runs, the web UI, and through the push
// check the references GC and forks keep (docs/adr/0130-lfs-push-protection.md).
//
// A pointer is what the stock git-lfs client (3.x) reads as one, not what
// the specification says a writer must write: the client is what turns a
// blob into a file on a user's disk, so a blob it smudges is a pointer
// whether or not it is well formed. The grammar, read from git-lfs 3.3.0
// and checked against the binary by a differential test:
//
//   - Only the first PrefixSize bytes are read, whatever the blob's size:
//     git-lfs's smudge and "pointer --check" decide on one 1024-byte read
//     and ignore the rest.
//   - Those bytes are trimmed of leading and trailing white space (Go's
//     unicode.IsSpace), and must then hold "git-lfs", "hawser" or
//     "git-media" somewhere.
//   - They are split into lines at "\n", one trailing "\r" dropped from
//     each; empty lines are skipped.
//   - Every line is "<key> <value>", split at the first space.
//   - The keys are version, oid and size, once each and in that order.
//     Extension lines ("ext-<digit>-<word>..." keys) may come anywhere
//     before size; nothing may follow size.
//   - version is one of the three v1 URLs git-lfs knows, compared as
//     strings; oid is "sha256:" and 64 lower-case hex digits; size is a
//     decimal int64 (a sign allowed) that is not negative; an
//     extension's value is an oid, and no two extensions share a digit.
//   - An empty blob is git-lfs's empty pointer (no object).
package pointer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// PrefixSize is how much of a blob git-lfs reads to tell whether it is a
// pointer: one read of 1024 bytes, whatever the blob's size. A blob
// longer than that whose first 1024 bytes are a pointer is smudged as
// the pointer's object, so callers must hand Decode at least this much
// of every blob, not only of small ones.
const PrefixSize = 1024

// MaxSize is the largest blob git-lfs's own scans (pre-push, ls-files,
// fsck) take for a possible pointer: under 1024 bytes. Larger blobs can
// still be pointers to the smudge filter (PrefixSize); MaxSize bounds
// only which blobs are reported as malformed pointers (Shaped).
const MaxSize = PrefixSize - 1

// EmptyOID is the sha256 of no bytes: the object git-lfs's empty pointer
// (an empty blob) names.
const EmptyOID = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Pointer is what a pointer file names.
type Pointer struct {
	// OID is the object's sha256, in lower-case hex.
	OID string
	// Size is the object's size as the pointer states it.
	Size int64
}

// Empty reports whether p is the empty pointer: an empty blob, which
// names no object to fetch.
func (p Pointer) Empty() bool { return p.OID == EmptyOID && p.Size == 0 }

// ErrNotPointer is what Decode's errors wrap: the bytes are not a pointer
// git-lfs would read.
var ErrNotPointer = errors.New("not a Git LFS pointer")

// versions are the version lines git-lfs 3.x accepts: the alpha's, the
// pre-release's and the spec's.
var versions = [...]string{
	"http://git-media.io/v/2",
	"https://hawser.github.com/spec/v1",
	"https://git-lfs.github.com/spec/v1",
}

// markers are the words git-lfs requires somewhere in a pointer before
// it reads its lines.
var markers = [...][]byte{[]byte("git-media"), []byte("hawser"), []byte("git-lfs")}

// keys are the required keys in their required order.
var keys = [...]string{"version", "oid", "size"}

// Decode reads b, a blob or at least its first PrefixSize bytes, as
// git-lfs does (the package doc gives the grammar). Its error wraps
// ErrNotPointer and says what is wrong.
func Decode(b []byte) (Pointer, error) {
	if len(b) > PrefixSize {
		b = b[:PrefixSize]
	}
	if len(b) == 0 {
		return Pointer{OID: EmptyOID}, nil
	}
	data := bytes.TrimSpace(b)
	if !hasMarker(data) {
		return Pointer{}, notPointer("no git-lfs, hawser or git-media")
	}
	var (
		vals [len(keys)]string
		line int
		exts map[string]string
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		text := sc.Text()
		if text == "" {
			continue
		}
		k, v, ok := strings.Cut(text, " ")
		if !ok {
			return Pointer{}, notPointer("line %q has no space", text)
		}
		if line == len(keys) {
			return Pointer{}, notPointer("line %q after size", text)
		}
		if k != keys[line] {
			if !isExtensionKey(k) {
				return Pointer{}, notPointer("key %q where %s belongs", k, keys[line])
			}
			if exts == nil {
				exts = map[string]string{}
			}
			exts[k] = v // a repeated key: the last one counts, as in git-lfs
			continue
		}
		vals[line] = v
		line++
	}
	if err := sc.Err(); err != nil {
		return Pointer{}, notPointer("%v", err)
	}
	if vals[0] == "" {
		return Pointer{}, notPointer("no version")
	}
	if !knownVersion(vals[0]) {
		return Pointer{}, notPointer("version %q", vals[0])
	}
	if line < 2 {
		return Pointer{}, notPointer("no oid")
	}
	oid, err := parseOID(vals[1])
	if err != nil {
		return Pointer{}, err
	}
	size, err := strconv.ParseInt(vals[2], 10, 64)
	if err != nil || size < 0 {
		return Pointer{}, notPointer("size %q", vals[2])
	}
	var prio [10]bool
	for k, v := range exts {
		d := k[len("ext-")] - '0'
		if prio[d] {
			return Pointer{}, notPointer("two extensions of priority %d", d)
		}
		prio[d] = true
		if _, err := parseOID(v); err != nil {
			return Pointer{}, fmt.Errorf("extension %s: %w", k, err)
		}
	}
	return Pointer{OID: oid, Size: size}, nil
}

// Parse returns the oid of the object b (a blob or its first PrefixSize
// bytes) points to, and false when b is no pointer or the empty one,
// which names no object.
func Parse(b []byte) (string, bool) {
	p, err := Decode(b)
	if err != nil || len(b) == 0 {
		return "", false
	}
	return p.OID, true
}

// Shaped reports whether blob, which is not a pointer, looks like one
// gone wrong: under MaxSize bytes, naming "oid sha256:" and a "size".
// Such a blob is scanned as the file it is and pointed out to the
// pusher (docs/adr/0130-lfs-push-protection.md): whoever wrote it meant
// it for LFS, and something other than the stock client may read it.
func Shaped(blob []byte) bool {
	return len(blob) <= MaxSize && bytes.Contains(blob, []byte("sha256:")) &&
		bytes.Contains(blob, []byte("oid")) && bytes.Contains(blob, []byte("size"))
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

func notPointer(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotPointer, fmt.Sprintf(format, args...))
}

func hasMarker(b []byte) bool {
	for _, m := range markers {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

func knownVersion(v string) bool {
	for _, known := range versions {
		if v == known {
			return true
		}
	}
	return false
}

// parseOID reads "sha256:<64 lower-case hex>".
func parseOID(v string) (string, error) {
	typ, h, ok := strings.Cut(v, ":")
	if !ok || typ != "sha256" || !IsOID(h) {
		return "", notPointer("oid %q", v)
	}
	return h, nil
}

// isExtensionKey matches git-lfs's extension keys: "ext-", one digit,
// "-" and a word character, then anything.
func isExtensionKey(k string) bool {
	if len(k) < len("ext-0-a") || !strings.HasPrefix(k, "ext-") {
		return false
	}
	d, dash, w := k[4], k[5], k[6]
	return d >= '0' && d <= '9' && dash == '-' &&
		(w >= '0' && w <= '9' || w >= 'a' && w <= 'z' || w >= 'A' && w <= 'Z' || w == '_')
}
