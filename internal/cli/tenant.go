package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
)

// newTenantCmd returns "ghost tenant" and its subcommands.
func newTenantCmd(env *Env) *cobra.Command {
	return newGroupCmd("tenant", "manage tenants: create, list, add-member, remove-member, delete",
		newTenantCreateCmd(env),
		newTenantListCmd(env),
		newTenantAddMemberCmd(env),
		newTenantRemoveMemberCmd(env),
		newTenantDeleteCmd(env),
	)
}

func newTenantCreateCmd(env *Env) *cobra.Command {
	var org bool
	cmd := &cobra.Command{
		Use:   "create <name>",
		Short: "create a user (or, with --org, an organization)",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().BoolVar(&org, "org", false, "create an organization instead of a user")
	cmd.RunE = t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		kind := "user"
		if org {
			kind = "org"
		}
		tn, err := c.CreateTenant(ctx, args[0], kind)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "created %s %s\n", tn.Kind, tn.Name)
		return nil
	})
	return cmd
}

func newTenantListCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list tenants",
		Args:  exactArgs(0),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		ts, err := c.ListTenants(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tCREATED")
		for _, tn := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", tn.Name, tn.Kind, tn.CreatedAt.Format(time.RFC3339))
		}
		return tw.Flush()
	})
	return cmd
}

func newTenantAddMemberCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add-member <org> <user>",
		Short: "let a user act on an org's repositories",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		if err := c.AddMember(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s is a member of %s\n", args[1], args[0])
		return nil
	})
	return cmd
}

func newTenantRemoveMemberCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove-member <org> <user>",
		Short: "take a user's access to an org's repositories away",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		if err := c.RemoveMember(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s is no longer a member of %s\n", args[1], args[0])
		return nil
	})
	return cmd
}

func newTenantDeleteCmd(env *Env) *cobra.Command {
	var force, yes bool
	cmd := &cobra.Command{
		Use:   "delete <name>",
		Short: "delete a tenant and its tokens; --force also deletes its repositories",
		Long: `Delete a tenant: its tokens and SSH keys stop working at once. A tenant
that owns repositories is refused unless --force is given, which deletes
them too; that asks for the tenant's name on a terminal first, or takes
--yes.`,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().BoolVar(&force, "force", false, "also delete the tenant's repositories (otherwise a tenant that owns any is refused)")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.RunE = t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		if force {
			if err := confirm(cmd, env, yes, fmt.Sprintf("This deletes tenant %s and every repository it owns, for good.", args[0]), args[0]); err != nil {
				return err
			}
		}
		if err := c.DeleteTenant(ctx, args[0], force); err != nil {
			if errors.Is(err, client.ErrConflict) && !force {
				return fmt.Errorf("%w\nrerun with --force to delete its repositories too", err)
			}
			return err
		}
		fmt.Fprintf(env.Stdout, "deleted tenant %s\n", args[0])
		return nil
	})
	return cmd
}
