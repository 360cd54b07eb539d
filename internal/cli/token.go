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

// scopesHelp says what each scope may do (docs/adr/0021, 0026).
const scopesHelp = `Scopes:
  read   clone and fetch the tenant's repositories (and its orgs'), read
         them in the web UI and the API; nothing that changes anything.
  write  read, plus push, create, change and delete the tenant's
         repositories (and its orgs'), see and resolve their secret alerts,
         start scans, and create the tenant's own read and write tokens
         and SSH keys.
  admin  operator authority over the WHOLE SERVER: every tenant, every
         repository, every token. Give it to operators only.`

func newTokenCreateCmd(env *Env) *cobra.Command {
	var scope, desc string
	cmd := &cobra.Command{
		Use:   "create <tenant>",
		Short: "mint an access token; prints it once, alone on the first line",
		Long: `Mint an access token for a tenant and print it once, alone on stdout's
first line (TOKEN=$(ghost token create alice --scope write | head -1)).
Only its hash is kept: it cannot be shown again.

Through a server, a tenant's write token creates the tenant's own read
and write tokens; an admin token creates any. On the store directly
(--data-dir, --s3-*) the operator creates any, the first admin token
included.

` + scopesHelp,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().StringVar(&scope, "scope", "read", "token scope: read, write or admin (admin: the whole server; see above)")
	cmd.Flags().StringVar(&desc, "description", "", "what the token is for")
	cmd.RegisterFlagCompletionFunc("scope", cobra.FixedCompletions([]string{"read", "write", "admin"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if _, err := meta.ParseScope(scope); err != nil {
			return usageErrorf("--scope: %v", err)
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
			tok, err := c.CreateToken(ctx, args[0], scope, desc)
			if err != nil {
				return err
			}
			// The secret alone on stdout's first line, so scripts can
			// capture it with $(...) or head -1; the rest goes to stderr.
			fmt.Fprintln(env.Stdout, tok.Token)
			fmt.Fprintf(env.Stderr, "token %s (scope %s) for %s; store it now, it cannot be shown again\n", tok.ID, tok.Scope, tok.Tenant)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newTokenListCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list <tenant>",
		Short: "list a tenant's tokens (never their secrets)",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		toks, err := c.ListTokens(ctx, args[0])
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCOPE\tCREATED\tDESCRIPTION")
		for _, tk := range toks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", tk.ID, tk.Scope, tk.CreatedAt.Format(time.RFC3339), oneLine(tk.Description))
		}
		return tw.Flush()
	})
	return cmd
}

func newTokenRevokeCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "revoke <tenant> <id>",
		Short: "revoke a token; it stops working at once on every node",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		if err := c.RevokeToken(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "revoked token %s of %s\n", args[1], args[0])
		return nil
	})
	return cmd
}
