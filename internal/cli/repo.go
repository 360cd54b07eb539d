package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
)

// newRepoCmd returns "ghost repo" and its subcommands.
func newRepoCmd(env *Env) *cobra.Command {
	return newGroupCmd("repo", "manage repositories: create, list, delete, fork, visibility, settings, alerts, scans, compact",
		newRepoCreateCmd(env),
		newRepoListCmd(env),
		newRepoDeleteCmd(env),
		newRepoForkCmd(env),
		newRepoVisibilityCmd(env),
		newRepoCompactCmd(env),
		newRepoAlertsCmd(env),
		newRepoScanCmd(env),
		newRepoScansCmd(env),
		newRepoSetCmd(env),
	)
}

func newRepoCreateCmd(env *Env) *cobra.Command {
	var public bool
	cmd := &cobra.Command{
		Use:   "create <owner>/<name>",
		Short: "create an empty repository",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().BoolVar(&public, "public", false, "anyone may clone it")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			r, err := c.CreateRepo(ctx, owner, name, public)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "created %s %s (id %s)\n", visibility(r.Public), r.FullName, r.ID)
			return nil
		})(cmd, args)
	}
	return cmd
}

func visibility(public bool) string {
	if public {
		return "public"
	}
	return "private"
}

func newRepoListCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list <owner>",
		Short: "list an owner's repositories",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		rs, err := c.ListRepos(ctx, args[0])
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPOSITORY\tVISIBILITY\tID\tCREATED\tFORKED FROM")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.FullName, visibility(r.Public), r.ID, r.CreatedAt.Format(time.RFC3339), r.ForkedFrom)
		}
		return tw.Flush()
	})
	return cmd
}

func newRepoDeleteCmd(env *Env) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete <owner>/<name>",
		Short: "delete a repository (its log is tombstoned; the name becomes free)",
		Long: `Delete a repository, for good: its history is tombstoned and its
objects go, and the name becomes free for a new, empty repository. On a
terminal it asks for the repository's name first; --yes skips that, and
without a terminal --yes is required.`,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			r, err := c.Repo(ctx, owner, name)
			if err != nil {
				return err
			}
			if err := confirm(cmd, env, yes, fmt.Sprintf("This deletes %s and its whole history, for good.", r.FullName), r.FullName); err != nil {
				return err
			}
			if err := c.DeleteRepo(ctx, owner, name); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "deleted %s/%s\n", owner, name)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newRepoForkCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fork <src-owner>/<name> <dst-owner>[/<name>]",
		Short: "fork a repository",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		srcOwner, srcName, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		dstOwner, dstName := args[1], ""
		if strings.Contains(args[1], "/") {
			if dstOwner, dstName, err = splitRepo(args[1]); err != nil {
				return err
			}
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			r, err := c.ForkRepo(ctx, srcOwner, srcName, dstOwner, dstName)
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "forked %s to %s (id %s)\n", r.ForkedFrom, r.FullName, r.ID)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newRepoVisibilityCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "visibility <owner>/<name> public|private",
		Short: "make a repository public or private",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		var public bool
		switch args[1] {
		case "public":
			public = true
		case "private":
		default:
			return usageErrorf("%q: want public or private", args[1])
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			if _, err := c.UpdateRepo(ctx, owner, name, client.RepoSettings{Public: &public}); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s/%s is %s\n", owner, name, args[1])
			return nil
		})(cmd, args)
	}
	return cmd
}
