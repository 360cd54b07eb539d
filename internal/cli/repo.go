package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/meta"
)

// newRepoCmd returns "ghost repo" and its subcommands.
func newRepoCmd(env *Env) *cobra.Command {
	return newGroupCmd("repo", "manage repositories: create, list, delete, fork, visibility, settings, protected branches, alerts, scans, compact",
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
		newRepoProtectCmd(env),
		newRepoReindexCmd(env),
	)
}

// newRepoReindexCmd returns "ghost repo reindex": build the listing keys
// of every tenant and repository from their records (serve does it at
// start when they are missing; docs/adr/0027-listing-keys.md).
func newRepoReindexCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reindex",
		Short: "rebuild the listings of tenants and repositories from their records",
		Args:  exactArgs(0),
	}
	a := newAdmin(env, cmd)
	cmd.RunE = a.runE(true, func(ctx context.Context, s stores, _ []string) error {
		tenants, repos, err := s.meta.BuildListings(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "listed %d tenants and %d repositories\n", tenants, repos)
		return nil
	})
	return cmd
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
	var (
		after string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "list <owner>",
		Short: "list an owner's repositories, in name order",
		Args:  exactArgs(1),
	}
	cmd.Flags().StringVar(&after, "after", "", "start after this repository name")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REPOSITORY\tVISIBILITY\tID\tCREATED\tFORKED FROM")
		err := pages(after, limit, func(after string, n int) (int, string, error) {
			rs, next, err := c.ListReposPage(ctx, args[0], after, n)
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.FullName, visibility(r.Public), r.ID, r.CreatedAt.Format(time.RFC3339), r.ForkedFrom)
			}
			return len(rs), next, err
		})
		if err != nil {
			return err
		}
		return tw.Flush()
	})
	return cmd
}

// pages runs page, one LIST page at a time from after (lower-cased), until
// the last page or limit items (0: no limit). page gets the cursor and how
// many it may return, and answers how many it did and the next cursor.
func pages(after string, limit int, page func(after string, n int) (int, string, error)) error {
	if limit < 0 {
		return fmt.Errorf("--limit %d: want 0 (all) or more", limit)
	}
	after = strings.ToLower(after)
	for left := limit; ; {
		n := meta.MaxPageSize
		if limit > 0 {
			n = min(n, left)
		}
		got, next, err := page(after, n)
		if err != nil {
			return err
		}
		left -= got
		if next == "" || limit > 0 && left <= 0 {
			return nil
		}
		after = next
	}
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
