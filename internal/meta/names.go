package meta

import (
	"fmt"
	"strings"
)

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
//     unreachable. Lookups strip one ".git" suffix instead (see Store.Repo).
//
// Names are case-insensitive; ValidateName does not change case.
//
// The git router (githttp) accepts a path segment only if ValidateName
// does, so every name that can be created can also be reached over git.
func ValidateName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q: must be 1..%d characters", ErrInvalidName, name, MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %q: only ASCII letters, digits, '.', '_' and '-' are allowed", ErrInvalidName, name)
		}
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%w: %q: must not start with %q", ErrInvalidName, name, name[0])
	}
	if hasGitSuffix(name) {
		return fmt.Errorf("%w: %q: must not end in \".git\"", ErrInvalidName, name)
	}
	return nil
}

func hasGitSuffix(name string) bool {
	return len(name) >= 4 && strings.EqualFold(name[len(name)-4:], ".git")
}

// lookupName turns a repository name as it appears in a URL or command
// ("x" or "x.git") into its validated key form.
func lookupName(name string) (string, error) {
	if hasGitSuffix(name) {
		name = name[:len(name)-4]
	}
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return strings.ToLower(name), nil
}

// canon validates a tenant (or new repository) name and returns its key
// form.
func canon(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return strings.ToLower(name), nil
}

// reservedTenant reports names that would shadow the server's own URL
// space (host/<tenant>/<repo> shares the root with /api/, /metrics, ...).
func reservedTenant(key string) bool {
	switch key {
	case "api", "metrics", "healthz", "readyz", "livez", "debug", "static", "assets", "login", "logout", "settings", "admin":
		return true
	}
	return false
}

// sameName compares two names the way lookups do.
func sameName(a, b string) bool { return strings.EqualFold(a, b) }

func lower(s string) string { return strings.ToLower(s) }
