package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/meta"
)

// newRepoSetCmd returns "ghost repo set": a repository's settings, one
// flag each, so that more can join without new subcommands. Only the
// flags given are changed.
func newRepoSetCmd(env *Env) *cobra.Command {
	var pushProtection, replaceRefs, defaultBranch, mergeCommit, squashMerge, rebaseMerge, missingLFS, lfsLater string
	cmd := &cobra.Command{
		Use:   "set <owner>/<name> [--push-protection on|off] [--allow-replace-refs on|off] [--default-branch <branch>] [--allow-merge-commit|--allow-squash-merge|--allow-rebase-merge on|off] [--allow-missing-lfs on|off] [--lfs-scan-after-push on|off]",
		Short: "change a repository's settings",
		Long: `Change a repository's settings. Only the settings named by flags change.

--push-protection on makes the server refuse pushes that add secrets (found
with gitleaks' default rules) unless the pusher bypasses it with
git push -o secret-scanning.bypass=false_positive|used_in_tests|will_fix_later;
bypasses are recorded as alerts (ghost repo alerts). It is off by default.

--allow-replace-refs on lets pushes create and move refs/replace/* refs,
which are refused by default: a replace ref makes the clients that honour
it show another object in place of one in history. The server's own git
(scanning, push protection, the web UI) never honours them either way.

--default-branch <branch> makes an existing branch the default: the one
HEAD names, which a clone checks out and the web UI shows first. A push may
not delete it; make another branch the default first. Unset, the server
picks main, then master, then the first branch by name.

--allow-merge-commit, --allow-squash-merge and --allow-rebase-merge say
which strategies may merge pull requests (ghost pr merge --method); all
three are allowed by default, and at least one must stay allowed.

--allow-missing-lfs on lets pushes name Git LFS objects never uploaded to
the repository, as a mirror's do (its objects live elsewhere); by default
such a push is refused with the missing objects named.

--lfs-scan-after-push on lets a push with push protection on land when Git
LFS objects it adds are too large for what push protection reads before a
push lands (256 MiB a push); the push's scan run reads them, of any size,
and alerts on their secrets. By default such a push is refused, naming the
objects it could not scan.`,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().StringVar(&pushProtection, "push-protection", "", "refuse pushes that add secrets: on or off")
	cmd.Flags().StringVar(&replaceRefs, "allow-replace-refs", "", "let pushes update refs/replace/*: on or off")
	cmd.Flags().StringVar(&defaultBranch, "default-branch", "", "the branch clones check out (an existing branch, without refs/heads/)")
	cmd.Flags().StringVar(&mergeCommit, "allow-merge-commit", "", "let pull requests merge with a merge commit: on or off")
	cmd.Flags().StringVar(&squashMerge, "allow-squash-merge", "", "let pull requests merge squashed: on or off")
	cmd.Flags().StringVar(&rebaseMerge, "allow-rebase-merge", "", "let pull requests merge rebased: on or off")
	cmd.Flags().StringVar(&missingLFS, "allow-missing-lfs", "", "let pushes name Git LFS objects the repository does not hold (a mirror): on or off")
	cmd.Flags().StringVar(&lfsLater, "lfs-scan-after-push", "", "let pushes land with Git LFS objects too large for push protection, scanned after the push: on or off")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		var s client.RepoSettings
		var said []string
		for _, st := range []struct {
			flag, name, value string
			set               **bool
		}{
			{"--push-protection", "push protection", pushProtection, &s.PushProtection},
			{"--allow-replace-refs", "replace refs allowed", replaceRefs, &s.AllowReplaceRefs},
			{"--allow-merge-commit", "merge commits allowed", mergeCommit, &s.AllowMergeCommit},
			{"--allow-squash-merge", "squash merges allowed", squashMerge, &s.AllowSquashMerge},
			{"--allow-rebase-merge", "rebase merges allowed", rebaseMerge, &s.AllowRebaseMerge},
			{"--allow-missing-lfs", "missing LFS objects allowed", missingLFS, &s.AllowMissingLFS},
			{"--lfs-scan-after-push", "LFS objects scanned after the push", lfsLater, &s.LFSScanAfterPush},
		} {
			switch st.value {
			case "":
			case "on", "off":
				on := st.value == "on"
				*st.set = &on
				said = append(said, st.name+" "+st.value)
			default:
				return usageErrorf("%s %q: want on or off", st.flag, st.value)
			}
		}
		if cmd.Flags().Changed("default-branch") {
			if err := meta.CheckBranchName(defaultBranch); err != nil {
				return usageErrorf("--default-branch %q: not a valid branch name", defaultBranch)
			}
			s.DefaultBranch = &defaultBranch
			said = append(said, "default branch "+defaultBranch)
		}
		if len(said) == 0 {
			return usageErrorf("nothing to change: want --push-protection, --allow-replace-refs, --allow-merge-commit, --allow-squash-merge, --allow-rebase-merge, --allow-missing-lfs or --lfs-scan-after-push, on or off, or --default-branch <branch>")
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			if _, err := c.UpdateRepo(ctx, owner, name, s); err != nil {
				return err
			}
			for _, line := range said {
				fmt.Fprintf(env.Stdout, "%s/%s: %s\n", owner, name, line)
			}
			return nil
		})(cmd, args)
	}
	return cmd
}
