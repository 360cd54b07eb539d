package meta

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/ids"
)

// BranchRule protects the branches whose names match its pattern
// (access.BranchRule, where the push path reads it).
type BranchRule = access.BranchRule

// Bounds of a repository's branch rules.
const (
	MaxBranchRules = 50
	MaxRulePushers = 100
	// MaxRequiredApprovals bounds a rule's required approvals (GitHub's
	// bound is 6; ghost's is a little more generous).
	MaxRequiredApprovals = 10
	maxPatternLength     = 255
)

// CheckBranchRules checks a repository's rules: each pattern a valid
// branch name or glob of one, once; each pusher a valid tenant name;
// within the bounds. ErrInvalidArgument otherwise.
func CheckBranchRules(rules []BranchRule) error {
	if len(rules) > MaxBranchRules {
		return invalidArgument(fmt.Sprintf("%d branch rules: at most %d", len(rules), MaxBranchRules))
	}
	seen := map[string]bool{}
	for _, r := range rules {
		p := r.Pattern
		if p == "" || len(p) > maxPatternLength {
			return invalidArgument(fmt.Sprintf("branch rule pattern %q: 1 to %d bytes", p, maxPatternLength))
		}
		if _, err := path.Match(p, ""); err != nil {
			return invalidArgument(fmt.Sprintf("branch rule pattern %q is not a valid pattern", p))
		}
		// A pattern is a branch name but for its wildcards.
		plain := strings.NewReplacer("*", "x", "?", "x", "[", "x", "]", "x", "\\", "x").Replace(p)
		if ids.CheckRefName("refs/heads/"+plain) != nil {
			return invalidArgument(fmt.Sprintf("branch rule pattern %q matches no valid branch name", p))
		}
		if seen[p] {
			return invalidArgument(fmt.Sprintf("branch rule pattern %q appears twice", p))
		}
		seen[p] = true
		if len(r.Pushers) > MaxRulePushers {
			return invalidArgument(fmt.Sprintf("branch rule %q: at most %d pushers", p, MaxRulePushers))
		}
		if r.RequiredApprovals < 0 || r.RequiredApprovals > MaxRequiredApprovals {
			return invalidArgument(fmt.Sprintf("branch rule %q: required approvals %d: 0 to %d", p, r.RequiredApprovals, MaxRequiredApprovals))
		}
		for _, t := range r.Pushers {
			if ids.ValidateName(t) != nil {
				return invalidArgument(fmt.Sprintf("branch rule %q: pusher %q is not a valid tenant name", p, t))
			}
		}
	}
	return nil
}

func cloneRules(rules []BranchRule) []BranchRule {
	if rules == nil {
		return nil
	}
	out := make([]BranchRule, len(rules))
	for i, r := range rules {
		out[i] = r
		out[i].Pushers = slices.Clone(r.Pushers)
		if v := r.RequireLastPushApproval; v != nil {
			out[i].RequireLastPushApproval = new(bool)
			*out[i].RequireLastPushApproval = *v
		}
	}
	return out
}

// SetBranchRules replaces owner/name's branch rules with rules (none:
// every branch unprotected), by compare-and-swap on its record (setFlag's
// outcomes; setting the same rules again is idempotent).
func (s *Store) SetBranchRules(ctx context.Context, owner, name string, rules []BranchRule) error {
	if err := CheckBranchRules(rules); err != nil {
		return fmt.Errorf("set branch rules: %w", err)
	}
	key, err := repoRef(owner, name)
	if err != nil {
		return fmt.Errorf("set branch rules: %w", err)
	}
	if _, _, err := s.readRepo(ctx, owner, name); err != nil {
		return fmt.Errorf("set branch rules: %w", err)
	}
	rules = cloneRules(rules)
	if len(rules) == 0 {
		rules = nil
	}
	_, err = s.updateListedRepo(ctx, key, func(cur *repoRecord) (*repoRecord, error) {
		if cur == nil || cur.Deleted {
			return nil, fmt.Errorf("repository %s/%s: %w", owner, name, ErrNotFound)
		}
		if slices.EqualFunc(cur.BranchRules, rules, BranchRule.Equal) {
			return nil, nil
		}
		next := *cur
		next.BranchRules = rules
		return &next, nil
	})
	if err != nil {
		return fmt.Errorf("set branch rules of %s/%s: %w", owner, name, err)
	}
	return nil
}
