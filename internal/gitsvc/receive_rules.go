package gitsvc

import (
	"context"
	"slices"
	"strings"

	"github.com/ghost-scm/ghost/internal/access"
	"github.com/ghost-scm/ghost/internal/gitexec"
)

// Protected branches (docs/adr/0123-protected-branches.md): a push that a
// rule of the repository forbids is refused, whole, on every transport,
// before anything is stored. The server's own pushes (a pull request's
// merge) pass the rules on who may push; force-pushes and deletions are
// refused to them too.

// reasonProtected is the report's reason for a refused update.
const reasonProtected = "protected branch hook declined"

// ruleFor returns the first rule of rules that protects ref, if it is a
// branch one protects.
func ruleFor(rules []access.BranchRule, ref string) (access.BranchRule, bool) {
	branch, ok := strings.CutPrefix(ref, "refs/heads/")
	if !ok {
		return access.BranchRule{}, false
	}
	return access.RuleFor(rules, branch)
}

// checkBranchRules refuses what the rules forbid that the commands say
// alone: direct pushes to a branch that requires pull requests or names
// its pushers, and deletions.
func checkBranchRules(r Request, server bool, cmds []command, rep *report) {
	for i, c := range cmds {
		rule, ok := ruleFor(r.BranchRules, c.Ref)
		if !ok || rep.reasons[i] != "" {
			continue
		}
		branch := strings.TrimPrefix(c.Ref, "refs/heads/")
		var why string
		switch {
		case !server && rule.RequirePullRequest:
			why = "changes must be made through a pull request"
		case !server && len(rule.Pushers) > 0 && !slices.ContainsFunc(rule.Pushers, func(p string) bool { return strings.EqualFold(p, r.Actor) }):
			why = "you are not allowed to push to it"
		case c.isDelete() && !rule.AllowDeletions:
			why = "it cannot be deleted"
		}
		if why != "" {
			refuseProtected(rep, i, branch, rule, why)
		}
	}
}

// checkForcePushes refuses a move of a protected branch to a commit that
// does not descend from where it was, unless its rule allows it. It runs
// once the pack is indexed, in the quarantine (env), where both commits
// are.
func (s *Service) checkForcePushes(ctx context.Context, r Request, dir string, env []string, cmds []command, rep *report) error {
	for i, c := range cmds {
		rule, ok := ruleFor(r.BranchRules, c.Ref)
		if !ok || rule.AllowForcePushes || rep.reasons[i] != "" || c.isDelete() || isZeroID(c.Old) {
			continue
		}
		_, err := s.opts.Git.Run(ctx, dir, env, nil, "merge-base", "--is-ancestor", c.Old, c.New)
		switch gitexec.ExitCode(err) {
		case -1:
			if err != nil {
				return err
			}
		case 1:
			refuseProtected(rep, i, strings.TrimPrefix(c.Ref, "refs/heads/"), rule, "force-pushes are not allowed")
		default:
			return err
		}
	}
	return nil
}

func isZeroID(id string) bool { return strings.Trim(id, "0") == "" }

func refuseProtected(rep *report, i int, branch string, rule access.BranchRule, why string) {
	rep.reasons[i] = reasonProtected
	rep.detail = append(rep.detail,
		"error: protected branch update failed for refs/heads/"+branch+": "+why+".",
		"error: (rule "+rule.Pattern+" of the repository's protected branches: ghost repo protect <owner>/<name>)")
}
