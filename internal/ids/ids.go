// Package ids validates the identifiers that become URL path segments,
// object-store key segments and git arguments: tenant and repository
// names, repository ids, git object ids and ref names. It is a leaf, so
// a transport or a store can check an identifier without importing the
// log or the metadata store; those wrap its errors in their own
// sentinels (wal.ErrInvalid, meta.ErrInvalidName).
package ids

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid matches every error of this package.
var ErrInvalid = errors.New("invalid identifier")

// invalidError says what is wrong with one identifier; its message is
// the reason alone, so that wrapping layers read naturally.
type invalidError struct{ reason string }

func (e *invalidError) Error() string        { return e.reason }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{reason: fmt.Sprintf(format, args...)}
}

// MaxNameLen is the longest tenant or repository name, in bytes.
const MaxNameLen = 100

// ValidateName checks a tenant or repository name. One rule serves both,
// because both become a URL path segment and an object-key segment:
//
//   - 1..MaxNameLen bytes of ASCII [A-Za-z0-9._-]; anything else (slashes,
//     backslashes, spaces, control bytes, non-ASCII such as homoglyphs or
//     full-width dots) is refused, so no name can traverse or look like
//     another;
//   - not starting with "." (so never "." or "..", which are path
//     traversal, nor a hidden file or directory name in a cache or a
//     store), and not with "-", so a name can never be taken for a
//     command-line flag by git or the admin CLI;
//   - not ending in ".git" (any case): "owner/x.git" in a URL means the
//     repository "x", so a repository literally named "x.git" would be
//     unreachable. Lookups strip one ".git" suffix instead.
//
// Names are case-insensitive; ValidateName does not change case.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return invalid("%q: must be 1..%d characters", name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return invalid("%q: only ASCII letters, digits, '.', '_' and '-' are allowed", name)
		}
	}
	if name[0] == '.' || name[0] == '-' {
		return invalid("%q: must not start with %q", name, name[0])
	}
	if HasGitSuffix(name) {
		return invalid("%q: must not end in \".git\"", name)
	}
	return nil
}

// HasGitSuffix reports whether name ends in ".git", in any case.
func HasGitSuffix(name string) bool {
	return len(name) >= 4 && strings.EqualFold(name[len(name)-4:], ".git")
}

// MaxRepoIDLen is the longest repository id, in bytes.
const MaxRepoIDLen = 128

// CheckRepoID validates a repository id: it becomes an object-key
// segment, so 1..128 of [A-Za-z0-9._-], not starting with '.', and no
// "..".
func CheckRepoID(repo string) error {
	ok := repo != "" && len(repo) <= MaxRepoIDLen && repo[0] != '.' && !strings.Contains(repo, "..")
	for i := 0; ok && i < len(repo); i++ {
		c := repo[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return invalid("repository id %q: want 1..128 of [A-Za-z0-9._-], no '..'", repo)
	}
	return nil
}

// IsObjectID reports whether id is a git object id: 40 (SHA-1) or 64
// (SHA-256) lowercase hex digits. It is ghost's one object-id validator.
func IsObjectID(id string) bool { return CheckObjectID(id) == nil }

// CheckObjectID is IsObjectID that says what is wrong.
func CheckObjectID(id string) error {
	if len(id) != 40 && len(id) != 64 {
		return invalid("object id %q is not 40 or 64 hex digits", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return invalid("object id %q is not lowercase hex", id)
		}
	}
	return nil
}

// MaxRefNameLen is the longest ref name, in bytes.
const MaxRefNameLen = 1024

// CheckRefName applies git's check-ref-format rules (for full ref names)
// without running git, so a bad name is refused before anything becomes
// real.
func CheckRefName(name string) error {
	bad := func(why string) error { return invalid("ref name %q: %s", name, why) }
	if len(name) == 0 || len(name) > MaxRefNameLen {
		return bad("length must be 1..1024")
	}
	if !strings.HasPrefix(name, "refs/") {
		return bad("must start with refs/")
	}
	if name == "@" || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") || strings.Contains(name, "//") || strings.Contains(name, "..") || strings.Contains(name, "@{") {
		return bad("contains '..', '//', '@{' or ends in '/' or '.'")
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == "" || strings.HasPrefix(comp, ".") || strings.HasSuffix(comp, ".lock") {
			return bad("a component is empty, starts with '.' or ends with .lock")
		}
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return bad("contains a control character or one of ' ~^:?*[\\'")
		}
	}
	if name == "refs/heads" || name == "refs/tags" {
		return bad("needs a name below refs/heads/ or refs/tags/")
	}
	return nil
}
