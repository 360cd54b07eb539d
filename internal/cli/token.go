package cli

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/meta"
)

// newTokenCmd returns "ghost token" and its subcommands.
func newTokenCmd(env *Env) *cobra.Command {
	return newGroupCmd("token", "manage access tokens: create, list, revoke",
		newTokenCreateCmd(env),
		newTokenListCmd(env),
		newTokenRevokeCmd(env),
	)
}

func newTokenCreateCmd(env *Env) *cobra.Command {
	var scope, desc string
	cmd := &cobra.Command{
		Use:   "create <tenant>",
		Short: "mint an access token; prints it once, alone on the first line",
		Args:  exactArgs(1),
	}
	a := newAdmin(env, cmd)
	cmd.Flags().StringVar(&scope, "scope", "read", "token scope: read, write or admin")
	cmd.Flags().StringVar(&desc, "description", "", "what the token is for")
	cmd.RegisterFlagCompletionFunc("scope", cobra.FixedCompletions([]string{"read", "write", "admin"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		sc, err := meta.ParseScope(scope)
		if err != nil {
			return usageErrorf("--scope: %v", err)
		}
		s, err := a.open(cmd.Context())
		if err != nil {
			return err
		}
		plain, tok, err := s.CreateToken(cmd.Context(), args[0], sc, desc)
		if err != nil {
			return err
		}
		// The secret alone on stdout's first line, so scripts can capture
		// it with $(...) or head -1; the rest goes to stderr.
		fmt.Fprintln(env.Stdout, plain)
		fmt.Fprintf(env.Stderr, "token %s (scope %s) for %s; store it now, it cannot be shown again\n", tok.ID, tok.Scope, tok.Tenant)
		a.wrote()
		return nil
	}
	return cmd
}

func newTokenListCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list <tenant>",
		Short: "list a tenant's tokens (never their secrets)",
		Args:  exactArgs(1),
	}
	a := newAdmin(env, cmd)
	cmd.RunE = a.runE(false, func(ctx context.Context, s *meta.Store, args []string) error {
		toks, err := s.ListTokens(ctx, args[0])
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCOPE\tCREATED\tDESCRIPTION")
		for _, t := range toks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Scope, t.CreatedAt.Format(time.RFC3339), t.Description)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		return nil
	})
	return cmd
}

func newTokenRevokeCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke <tenant> <id>",
		Short: "revoke a token",
		Args:  exactArgs(2),
	}
	a := newAdmin(env, cmd)
	cmd.RunE = a.runE(true, func(ctx context.Context, s *meta.Store, args []string) error {
		if err := s.RevokeToken(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked token %s of %s\n", args[1], args[0])
		return nil
	})
	return cmd
}
