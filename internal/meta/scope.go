package meta

import (
	"fmt"
	"strings"
)

// Scope is what an access token may do. Scopes are ordered: each includes
// the ones below it, so checks are "scope >= needed".
type Scope int

// The scopes, lowest first.
const (
	// ScopeRead may clone and fetch the repositories its tenant can see.
	ScopeRead Scope = iota + 1
	// ScopeWrite may also push, create, fork, delete and change visibility
	// of its tenant's (and its orgs') repositories.
	ScopeWrite
	// ScopeAdmin is operator authority over the whole installation:
	// tenants, anyone's tokens, every repository.
	ScopeAdmin
)

// String returns the scope's wire and CLI name.
func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// Valid reports whether s is one of the defined scopes.
func (s Scope) Valid() bool { return s >= ScopeRead && s <= ScopeAdmin }

// ParseScope parses "read", "write" or "admin" (any case).
func ParseScope(str string) (Scope, error) {
	switch strings.ToLower(strings.TrimSpace(str)) {
	case "read":
		return ScopeRead, nil
	case "write":
		return ScopeWrite, nil
	case "admin":
		return ScopeAdmin, nil
	}
	return 0, fmt.Errorf("%w: scope %q: want read, write or admin", ErrInvalidArgument, str)
}

// MarshalText makes a Scope encode as its name in JSON, so stored records
// and API bodies stay readable and survive renumbering.
func (s Scope) MarshalText() ([]byte, error) {
	if !s.Valid() {
		return nil, fmt.Errorf("%w: scope %d", ErrInvalidArgument, int(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText is the inverse of MarshalText.
func (s *Scope) UnmarshalText(b []byte) error {
	v, err := ParseScope(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}
