package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
)

// newRepoProtectCmd returns "ghost repo protect": list, add, change or
// remove a repository's protected branches
// (docs/adr/0123-protected-branches.md).
func newRepoProtectCmd(env *Env) *cobra.Command {
	var rule client.BranchRule
	var pushers string
	var remove bool
	cmd := &cobra.Command{
		Use:   "protect <owner>/<name> [<pattern>]",
		Short: "list, add or remove protected branches",
		Long: `Protect the branches whose names match <pattern> ("main", "release/*";
'*' does not cross a '/'). A protected branch refuses force-pushes and
deletions unless allowed; --require-pull-request lets only the merge of
a pull request change it; --pushers names the only tenants whose pushes
may; --required-approvals N holds a pull request's merge until N
writers other than its author approve it (a change requested by a writer
holds it too), and --dismiss-stale-approvals counts only reviews of the
head being merged. With approvals required, the approval of whoever
pushed the head's last commit does not count (GitHub's "approval of the
most recent reviewable push");
--require-last-push-approval=false lets it count. Every transport enforces the rules. Without <pattern>, list the
rules. Giving a pattern that has a rule replaces it; --remove drops it.
Changing rules needs the repository's owner (a user) or an admin token.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
	}
	t := newTarget(env, cmd)
	f := cmd.Flags()
	f.BoolVar(&rule.RequirePullRequest, "require-pull-request", false, "only the merge of a pull request may change the branch")
	f.BoolVar(&rule.AllowForcePushes, "allow-force-push", false, "let pushes move the branch to a commit that does not descend from it")
	f.BoolVar(&rule.AllowDeletions, "allow-deletion", false, "let pushes delete the branch")
	f.IntVar(&rule.RequiredApprovals, "required-approvals", 0, "approving reviews by writers a pull request into the branch needs before it merges")
	f.BoolVar(&rule.DismissStaleApprovals, "dismiss-stale-approvals", false, "count only reviews given on the head being merged")
	lastPush := f.Bool("require-last-push-approval", true, "with approvals required, count no approval by the head's last pusher")
	f.StringVar(&pushers, "pushers", "", "comma-separated tenants who alone may push to the branch")
	f.BoolVar(&remove, "remove", false, "remove the rule of <pattern>")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		return t.runAPI(len(args) == 2, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			rules, err := c.BranchRules(ctx, owner, name)
			if err != nil {
				return err
			}
			if len(args) == 2 {
				rule.Pattern = args[1]
				if pushers != "" {
					rule.Pushers = strings.Split(pushers, ",")
				}
				if f.Changed("require-last-push-approval") {
					rule.RequireLastPushApproval = lastPush
				}
				i := slices.IndexFunc(rules, func(r client.BranchRule) bool { return r.Pattern == rule.Pattern })
				switch {
				case remove && i < 0:
					return fmt.Errorf("%s/%s has no rule %q", owner, name, rule.Pattern)
				case remove:
					rules = slices.Delete(rules, i, i+1)
				case i < 0:
					rules = append(rules, rule)
				default:
					rules[i] = rule
				}
				if rules, err = c.SetBranchRules(ctx, owner, name, rules); err != nil {
					return err
				}
			}
			if len(rules) == 0 {
				fmt.Fprintf(env.Stdout, "%s/%s has no protected branches\n", owner, name)
			}
			for _, r := range rules {
				fmt.Fprintf(env.Stdout, "%s\t%s\n", r.Pattern, describeRule(r))
			}
			return nil
		})(cmd, args)
	}
	return cmd
}

// describeRule says what a rule refuses and allows.
func describeRule(r client.BranchRule) string {
	var parts []string
	if r.RequirePullRequest {
		parts = append(parts, "pull requests only")
	}
	if r.RequiredApprovals > 0 {
		s := fmt.Sprintf("%d approving review", r.RequiredApprovals)
		if r.RequiredApprovals > 1 {
			s += "s"
		}
		if r.DismissStaleApprovals {
			s += " of the head"
		}
		if r.RequireLastPushApproval == nil || *r.RequireLastPushApproval {
			s += ", not by its last pusher"
		}
		parts = append(parts, s)
	}
	if len(r.Pushers) > 0 {
		parts = append(parts, "pushers: "+strings.Join(r.Pushers, ","))
	}
	if r.AllowForcePushes {
		parts = append(parts, "force-pushes allowed")
	} else {
		parts = append(parts, "no force-pushes")
	}
	if r.AllowDeletions {
		parts = append(parts, "deletion allowed")
	} else {
		parts = append(parts, "no deletion")
	}
	return strings.Join(parts, "; ")
}
