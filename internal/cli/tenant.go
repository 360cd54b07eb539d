package cli

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/meta"
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
	a := newAdmin(env, cmd)
	cmd.Flags().BoolVar(&org, "org", false, "create an organization instead of a user")
	cmd.RunE = a.runE(true, func(ctx context.Context, s *meta.Store, args []string) error {
		kind := meta.KindUser
		if org {
			kind = meta.KindOrg
		}
		t, err := s.CreateTenant(ctx, args[0], kind)
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "created %s %s\n", t.Kind, t.Name)
		return nil
	})
	return cmd
}

func newTenantListCmd(env *Env) *cobra.Command {
	var (
		after string
		limit int
	)
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list tenants, in name order",
		Args:  exactArgs(0),
	}
	cmd.Flags().StringVar(&after, "after", "", "start after this tenant name")
	cmd.Flags().IntVar(&limit, "limit", 0, "list at most this many (0: all)")
	a := newAdmin(env, cmd)
	cmd.RunE = a.runE(false, func(ctx context.Context, s *meta.Store, args []string) error {
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tKIND\tCREATED")
		err := pages(after, limit, func(after string, n int) (int, string, error) {
			ts, next, err := s.ListTenantPage(ctx, after, n)
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Kind, t.CreatedAt.Format(time.RFC3339))
			}
			return len(ts), next, err
		})
		if err != nil {
			return err
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
	a := newAdmin(env, cmd)
	cmd.RunE = a.runE(true, func(ctx context.Context, s *meta.Store, args []string) error {
		if err := s.AddMember(ctx, args[0], args[1]); err != nil {
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
	a := newAdmin(env, cmd)
	cmd.RunE = a.runE(true, func(ctx context.Context, s *meta.Store, args []string) error {
		if err := s.RemoveMember(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s is no longer a member of %s\n", args[1], args[0])
		return nil
	})
	return cmd
}

func newTenantDeleteCmd(env *Env) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "delete <name>",
		Short: "delete a tenant and its tokens; --force also deletes its repositories",
		Args:  exactArgs(1),
	}
	a := newAdmin(env, cmd)
	cmd.Flags().BoolVar(&force, "force", false, "also delete the tenant's repositories (otherwise a tenant that owns any is refused)")
	cmd.RunE = a.runE(true, func(ctx context.Context, s *meta.Store, args []string) error {
		if err := s.DeleteTenant(ctx, args[0], force); err != nil {
			if errors.Is(err, meta.ErrNotEmpty) {
				return fmt.Errorf("%w\nrerun with --force to delete its repositories too", err)
			}
			return err
		}
		fmt.Fprintf(env.Stdout, "deleted tenant %s\n", args[0])
		return nil
	})
	return cmd
}
