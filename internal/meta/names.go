package meta

import (
	"fmt"
	"strings"

	"github.com/ghost-scm/ghost/internal/ids"
)

// MaxNameLen is the longest tenant or repository name, in bytes.
const MaxNameLen = ids.MaxNameLen

// ValidateName checks a tenant or repository name by ids.ValidateName's
// one rule and answers ErrInvalidName. The git router (githttp) accepts
// a path segment only if that rule does, so every name that can be
// created can also be reached over git; lookups strip one ".git" suffix
// (see Store.Repo).
func ValidateName(name string) error {
	if err := ids.ValidateName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidName, err)
	}
	return nil
}

func hasGitSuffix(name string) bool { return ids.HasGitSuffix(name) }

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
