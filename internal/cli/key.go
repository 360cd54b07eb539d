package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// newKeyCmd returns "ghost key" and its subcommands: the SSH public keys
// that let a tenant use git over SSH (docs/design.md §7.7).
func newKeyCmd(env *Env) *cobra.Command {
	return newGroupCmd("key", "manage SSH public keys: add, list, remove",
		newKeyAddCmd(env),
		newKeyListCmd(env),
		newKeyRemoveCmd(env),
	)
}

// maxKeyInput bounds what key add reads: a public key is a line of at
// most a few kilobytes, and a mistaken --file (a pack, a log) must not be
// read whole.
const maxKeyInput = 64 << 10

func newKeyAddCmd(env *Env) *cobra.Command {
	var title, file string
	cmd := &cobra.Command{
		Use:   "add <tenant>",
		Short: "add an SSH public key (authorized_keys form, from --file or stdin); prints its fingerprint",
		Long: `Add an SSH public key to a tenant, as one authorized_keys line
("ssh-ed25519 AAAA... comment", the content of a .pub file), read from
--file or, without it, from stdin. A key belongs to one tenant only and
acts as a write token of it: through a server, the tenant's write token
adds it (or an admin's). The title defaults to the key's comment.`,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.Flags().StringVar(&title, "title", "", "what the key is for (default: the key's comment)")
	cmd.Flags().StringVar(&file, "file", "", `read the key from this file ("-" or none: stdin)`)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in := cmd.InOrStdin()
		if file != "" && file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			defer f.Close()
			in = f
		}
		b, err := io.ReadAll(io.LimitReader(in, maxKeyInput+1))
		if err != nil {
			return fmt.Errorf("read the public key: %w", err)
		}
		if len(b) > maxKeyInput {
			return fmt.Errorf("the public key input is larger than %d bytes: is it really a .pub file?", maxKeyInput)
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
			k, err := c.AddSSHKey(ctx, args[0], title, string(b))
			if err != nil {
				return err
			}
			// The fingerprint alone on stdout, for scripts; the rest to stderr.
			fmt.Fprintln(env.Stdout, k.Fingerprint)
			fmt.Fprintf(env.Stderr, "added %s key %q for %s\n", k.Type, k.Title, k.Tenant)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newKeyListCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list <tenant>",
		Short: "list a tenant's SSH keys",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		keys, err := c.ListSSHKeys(ctx, args[0])
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FINGERPRINT\tTYPE\tCREATED\tTITLE")
		for _, k := range keys {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Fingerprint, k.Type, k.CreatedAt.Format(time.RFC3339), oneLine(k.Title))
		}
		return tw.Flush()
	})
	return cmd
}

func newKeyRemoveCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove <tenant> <fingerprint>",
		Short: "remove an SSH key; it stops working at once on every node",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, args []string) error {
		if err := c.RemoveSSHKey(ctx, args[0], args[1]); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "removed ssh key %s of %s\n", args[1], args[0])
		return nil
	})
	return cmd
}
