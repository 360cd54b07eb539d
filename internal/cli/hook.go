package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/client"
)

// newHookCmd returns "ghost hook" and its subcommands: webhooks of a
// repository or of a tenant (docs/adr/0105-webhook-delivery.md).
func newHookCmd(env *Env) *cobra.Command {
	return newGroupCmd("hook", "manage webhooks: add, list, remove, test",
		newHookAddCmd(env),
		newHookListCmd(env),
		newHookRemoveCmd(env),
		newHookTestCmd(env),
		newHookDeliveriesCmd(env),
	)
}

// hookTarget checks "<owner>/<name>" (a repository's hooks) or "<owner>"
// (a tenant's: every repository of it).
func hookTarget(s string) (string, error) {
	if owner, name, ok := strings.Cut(s, "/"); ok {
		if owner == "" || name == "" || strings.Contains(name, "/") {
			return "", usageErrorf("%q: want <owner>/<name> (a repository's hooks) or <owner> (a tenant's)", s)
		}
		return s, nil
	}
	if s == "" {
		return "", usageErrorf("want <owner>/<name> (a repository's hooks) or <owner> (a tenant's)")
	}
	return s, nil
}

func hookIDArg(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErrorf("%q: want a hook id (a number, as hook list shows)", s)
	}
	return id, nil
}

// maxSecretInput bounds what --secret-file reads.
const maxSecretInput = 4 << 10

// delivered is what a command says about an event it queued: through a
// server, the server sends it; on the store, the next ghost serve does.
func delivered(c *conn) string {
	if c.store {
		return "queued; a running ghost serve on this store delivers it"
	}
	return "queued; the server delivers it"
}

func newHookAddCmd(env *Env) *cobra.Command {
	var url, secretFile, events string
	var insecure, inactive bool
	cmd := &cobra.Command{
		Use:   "add <owner>/<name> | <owner>",
		Short: "add a webhook to a repository, or to every repository of a tenant; prints its id",
		Long: `Add a webhook. Deliveries are POSTs of GitHub-shaped JSON with
X-GitHub-Event, X-GitHub-Delivery and, with a secret, X-Hub-Signature-256
(HMAC-SHA256 of the body), so receivers written for GitHub work. The
secret is read from --secret-file ("-": stdin), never from the command
line, and the API never shows it again. Events: push (the default),
create, delete, repository, secret_scanning_alert, pull_request, scan_run, or "*" for
all; a ping is sent when the hook is added. Adding needs write access to
the repository (or to create repositories under the tenant).`,
		Args: exactArgs(1),
	}
	t := newTarget(env, cmd)
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "where to deliver: an http or https URL")
	f.StringVar(&secretFile, "secret-file", "", `read the secret that signs deliveries from this file ("-": stdin)`)
	f.StringVar(&events, "events", "push", "events to deliver, comma-separated (push, create, delete, repository, secret_scanning_alert, pull_request, scan_run, or *)")
	f.BoolVar(&insecure, "insecure-ssl", false, "do not verify the receiver's TLS certificate")
	f.BoolVar(&inactive, "inactive", false, "add the hook turned off")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		target, err := hookTarget(args[0])
		if err != nil {
			return err
		}
		if url == "" {
			return usageErrorf("--url is required")
		}
		ch := client.HookChange{Config: &client.HookConfigEdit{URL: &url}}
		if secretFile != "" {
			in := cmd.InOrStdin()
			if secretFile != "-" {
				fh, err := os.Open(secretFile)
				if err != nil {
					return err
				}
				defer fh.Close()
				in = fh
			}
			b, err := io.ReadAll(io.LimitReader(in, maxSecretInput+1))
			if err != nil {
				return fmt.Errorf("read the secret: %w", err)
			}
			if len(b) > maxSecretInput {
				return fmt.Errorf("the secret is longer than %d bytes", maxSecretInput)
			}
			s := strings.TrimRight(string(b), "\r\n")
			ch.Config.Secret = &s
		}
		if insecure {
			one := "1"
			ch.Config.InsecureSSL = &one
		}
		for _, e := range strings.Split(events, ",") {
			if e = strings.TrimSpace(e); e != "" {
				ch.Events = append(ch.Events, e)
			}
		}
		if inactive {
			off := false
			ch.Active = &off
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			h, err := c.CreateHook(ctx, target, ch)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, h.ID)
			fmt.Fprintf(env.Stderr, "added hook %d to %s (%s); its ping is %s\n", h.ID, target, strings.Join(h.Events, ","), delivered(c))
			return nil
		})(cmd, args)
	}
	return cmd
}

func newHookListCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list <owner>/<name> | <owner>",
		Short: "list a repository's or a tenant's webhooks",
		Args:  exactArgs(1),
	}
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		target, err := hookTarget(args[0])
		if err != nil {
			return err
		}
		return t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			hs, err := c.ListHooks(ctx, target)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tACTIVE\tEVENTS\tSECRET\tURL\tSTATUS")
			for _, h := range hs {
				secret := "no"
				if h.Config.Secret != "" {
					secret = "set"
				}
				status := "ok"
				switch {
				case h.DisabledReason != "":
					status = h.DisabledReason
				case h.Failures > 0:
					status = fmt.Sprintf("%d events failed in a row", h.Failures)
				}
				fmt.Fprintf(tw, "%d\t%t\t%s\t%s\t%s\t%s\n", h.ID, h.Active, strings.Join(h.Events, ","), secret, oneLine(h.Config.URL), oneLine(status))
			}
			return tw.Flush()
		})(cmd, args)
	}
	return cmd
}

func newHookRemoveCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remove <owner>/<name> | <owner> <id>",
		Short: "remove a webhook; nothing more is delivered to it",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		target, err := hookTarget(args[0])
		if err != nil {
			return err
		}
		id, err := hookIDArg(args[1])
		if err != nil {
			return err
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			if err := c.DeleteHook(ctx, target, id); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "removed hook %d of %s\n", id, target)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newHookTestCmd(env *Env) *cobra.Command {
	var push bool
	cmd := &cobra.Command{
		Use:   "test <owner>/<name> | <owner> <id>",
		Short: "send a webhook a ping (or, with --push, the repository's latest push)",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.Flags().BoolVar(&push, "push", false, "send the push event of the repository's latest push, as GitHub's test does")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		target, err := hookTarget(args[0])
		if err != nil {
			return err
		}
		id, err := hookIDArg(args[1])
		if err != nil {
			return err
		}
		return t.runAPI(true, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			what := "ping"
			if push {
				what = "push"
				err = c.TestHook(ctx, target, id)
			} else {
				err = c.PingHook(ctx, target, id)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s for hook %d %s; see ghost hook deliveries %s %d\n", what, id, delivered(c), target, id)
			return nil
		})(cmd, args)
	}
	return cmd
}

func newHookDeliveriesCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deliveries <owner>/<name> | <owner> <id>",
		Short: "list a webhook's latest deliveries (at most 100), newest first",
		Args:  exactArgs(2),
	}
	t := newTarget(env, cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		target, err := hookTarget(args[0])
		if err != nil {
			return err
		}
		id, err := hookIDArg(args[1])
		if err != nil {
			return err
		}
		return t.runAPI(false, storeOptions{}, func(ctx context.Context, c *conn, _ []string) error {
			ds, err := c.HookDeliveries(ctx, target, id, 0)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tAT\tEVENT\tOUTCOME\tSTATUS\tSECONDS\tGUID")
			for _, d := range ds {
				ev := d.Event
				if d.Action != nil {
					ev += "." + *d.Action
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.3f\t%s\n", d.ID, d.DeliveredAt, ev, d.Outcome, oneLine(d.Status), d.Duration, d.GUID)
			}
			return tw.Flush()
		})(cmd, args)
	}
	return cmd
}
