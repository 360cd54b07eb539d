package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/meta"
	"github.com/ghost-scm/ghost/internal/wal"
)

// The admin commands operate on the object store directly, not through a
// running server: they are how an installation is bootstrapped (the first
// admin token comes from "ghost token create <tenant> --scope admin") and
// how an operator recovers when the server is down. They see exactly what
// the servers see because metadata lives in the same store as the logs.

// subcommand is one verb of an admin command group.
type subcommand struct {
	usage   string // after "ghost "
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

func runTenant(ctx context.Context, env *Env, args []string) error {
	return dispatch(ctx, env, "tenant", map[string]subcommand{
		"create":        {"tenant create <name> [--org]", "create a user (or, with --org, an organization)", tenantCreate},
		"list":          {"tenant list", "list tenants", tenantList},
		"add-member":    {"tenant add-member <org> <user>", "let a user act on an org's repositories", tenantAddMember},
		"remove-member": {"tenant remove-member <org> <user>", "take a user's access to an org's repositories away", tenantRemoveMember},
		"delete":        {"tenant delete <name> [--force]", "delete a tenant and its tokens; --force also deletes its repositories", tenantDelete},
	}, args)
}

func runToken(ctx context.Context, env *Env, args []string) error {
	return dispatch(ctx, env, "token", map[string]subcommand{
		"create": {"token create <tenant> [--scope read|write|admin] [--description text]", "mint an access token; prints it once, alone on the first line", tokenCreate},
		"list":   {"token list <tenant>", "list a tenant's tokens (never their secrets)", tokenList},
		"revoke": {"token revoke <tenant> <id>", "revoke a token", tokenRevoke},
	}, args)
}

func runRepo(ctx context.Context, env *Env, args []string) error {
	return dispatch(ctx, env, "repo", map[string]subcommand{
		"create":     {"repo create <owner>/<name> [--public]", "create an empty repository", repoCreate},
		"list":       {"repo list <owner>", "list an owner's repositories", repoList},
		"delete":     {"repo delete <owner>/<name>", "delete a repository (its log is tombstoned; the name becomes free)", repoDelete},
		"fork":       {"repo fork <src-owner>/<name> <dst-owner>[/<name>]", "fork a repository", repoFork},
		"visibility": {"repo visibility <owner>/<name> public|private", "make a repository public or private", repoVisibility},
		"compact":    {"repo compact <owner>/<name>", "fold the repository's log into a checkpoint now, showing progress", repoCompact},
	}, args)
}

// dispatch runs the verb args[0] of group.
func dispatch(ctx context.Context, env *Env, group string, subs map[string]subcommand, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: ghost %s <command>\n%s", errUsage, group, listSubs(subs))
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(env.Stdout, "usage: ghost %s <command>\n%s", group, listSubs(subs))
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown command %q: ghost %s <command>\n%s", errUsage, args[0], group, listSubs(subs))
	}
	return sub.run(ctx, env, args[1:])
}

func listSubs(subs map[string]subcommand) string {
	names := make([]string, 0, len(subs))
	for n := range subs {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("\ncommands:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  ghost %s\n      %s\n", subs[n].usage, subs[n].summary)
	}
	return b.String()
}

// leaf is the parsing state of one admin verb: its flags (the shared
// store settings plus its own) and its usage line.
type leaf struct {
	env   *Env
	usage string
	fs    *flag.FlagSet
	cfg   config.Config
}

func newLeaf(env *Env, usage string) *leaf {
	l := &leaf{env: env, usage: usage}
	l.fs = flag.NewFlagSet("ghost "+usage, flag.ContinueOnError)
	l.fs.SetOutput(env.Stderr)
	l.cfg.Register(l.fs)
	l.fs.Usage = func() {
		fmt.Fprintf(l.fs.Output(), "usage: ghost %s\n\nflags:\n", l.usage)
		l.fs.PrintDefaults()
	}
	return l
}

// parse parses args, allowing flags after positional arguments ("ghost
// tenant create acme --org" reads naturally, but the flag package stops at
// the first non-flag), and checks the positional count is within
// [min, max].
func (l *leaf) parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := l.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v: ghost %s", errUsage, err, l.usage)
		}
		rest := l.fs.Args()
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < min || len(pos) > max {
		return nil, l.usageErr()
	}
	return pos, nil
}

func (l *leaf) usageErr() error { return fmt.Errorf("%w: ghost %s", errUsage, l.usage) }

// open returns the metadata store on the configured object store.
func (l *leaf) open(ctx context.Context) (*meta.Store, error) {
	objects, err := l.cfg.OpenStore(ctx)
	if err != nil {
		return nil, err
	}
	return meta.New(objects, wal.New(objects, wal.Options{})), nil
}

// splitRepo parses "owner/name".
func (l *leaf) splitRepo(s string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(s, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: %q: want <owner>/<name>: ghost %s", errUsage, s, l.usage)
	}
	return owner, name, nil
}

func tenantCreate(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "tenant create <name> [--org]")
	org := l.fs.Bool("org", false, "create an organization instead of a user")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	kind := meta.KindUser
	if *org {
		kind = meta.KindOrg
	}
	t, err := s.CreateTenant(ctx, pos[0], kind)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "created %s %s\n", t.Kind, t.Name)
	return nil
}

func tenantList(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "tenant list")
	if _, err := l.parse(args, 0, 0); err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	ts, err := s.ListTenants(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tCREATED")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Kind, t.CreatedAt.Format(time.RFC3339))
	}
	return tw.Flush()
}

func tenantAddMember(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "tenant add-member <org> <user>")
	pos, err := l.parse(args, 2, 2)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := s.AddMember(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s is a member of %s\n", pos[1], pos[0])
	return nil
}

func tenantRemoveMember(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "tenant remove-member <org> <user>")
	pos, err := l.parse(args, 2, 2)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := s.RemoveMember(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s is no longer a member of %s\n", pos[1], pos[0])
	return nil
}

func tenantDelete(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "tenant delete <name> [--force]")
	force := l.fs.Bool("force", false, "also delete the tenant's repositories (otherwise a tenant that owns any is refused)")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := s.DeleteTenant(ctx, pos[0], *force); err != nil {
		if errors.Is(err, meta.ErrNotEmpty) {
			return fmt.Errorf("%w\nrerun with --force to delete its repositories too", err)
		}
		return err
	}
	fmt.Fprintf(env.Stdout, "deleted tenant %s\n", pos[0])
	return nil
}

func tokenCreate(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "token create <tenant> [--scope read|write|admin] [--description text]")
	scope := meta.ScopeRead
	l.fs.Func("scope", "token scope: read, write or admin (default read)", func(v string) error {
		sc, err := meta.ParseScope(v)
		if err != nil {
			return err
		}
		scope = sc
		return nil
	})
	desc := l.fs.String("description", "", "what the token is for")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	plain, tok, err := s.CreateToken(ctx, pos[0], scope, *desc)
	if err != nil {
		return err
	}
	// The secret alone on stdout's first line, so scripts can capture it
	// with $(...) or head -1; the rest goes to stderr.
	fmt.Fprintln(env.Stdout, plain)
	fmt.Fprintf(env.Stderr, "token %s (scope %s) for %s; store it now, it cannot be shown again\n", tok.ID, tok.Scope, tok.Tenant)
	return nil
}

func tokenList(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "token list <tenant>")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	toks, err := s.ListTokens(ctx, pos[0])
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCOPE\tCREATED\tDESCRIPTION")
	for _, t := range toks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.ID, t.Scope, t.CreatedAt.Format(time.RFC3339), t.Description)
	}
	return tw.Flush()
}

func tokenRevoke(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "token revoke <tenant> <id>")
	pos, err := l.parse(args, 2, 2)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := s.RevokeToken(ctx, pos[0], pos[1]); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "revoked token %s of %s\n", pos[1], pos[0])
	return nil
}

func repoCreate(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "repo create <owner>/<name> [--public]")
	public := l.fs.Bool("public", false, "anyone may clone it")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	owner, name, err := l.splitRepo(pos[0])
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	r, err := s.CreateRepo(ctx, owner, name, *public)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "created %s %s (id %s)\n", visibility(r.Public), r.FullName(), r.ID)
	return nil
}

func visibility(public bool) string {
	if public {
		return "public"
	}
	return "private"
}

func repoList(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "repo list <owner>")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	rs, err := s.ListRepos(ctx, pos[0])
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPOSITORY\tVISIBILITY\tID\tCREATED\tFORKED FROM")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.FullName(), visibility(r.Public), r.ID, r.CreatedAt.Format(time.RFC3339), r.ForkedFrom)
	}
	return tw.Flush()
}

func repoDelete(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "repo delete <owner>/<name>")
	pos, err := l.parse(args, 1, 1)
	if err != nil {
		return err
	}
	owner, name, err := l.splitRepo(pos[0])
	if err != nil {
		return err
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := s.DeleteRepo(ctx, owner, name); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "deleted %s/%s\n", owner, name)
	return nil
}

func repoFork(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "repo fork <src-owner>/<name> <dst-owner>[/<name>]")
	pos, err := l.parse(args, 2, 2)
	if err != nil {
		return err
	}
	srcOwner, srcName, err := l.splitRepo(pos[0])
	if err != nil {
		return err
	}
	dstOwner, dstName := pos[1], ""
	if strings.Contains(pos[1], "/") {
		if dstOwner, dstName, err = l.splitRepo(pos[1]); err != nil {
			return err
		}
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if dstName == "" {
		src, err := s.Repo(ctx, srcOwner, srcName)
		if err != nil {
			return err
		}
		dstName = src.Name
	}
	r, err := s.ForkRepo(ctx, srcOwner, srcName, dstOwner, dstName)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "forked %s to %s (id %s)\n", r.ForkedFrom, r.FullName(), r.ID)
	return nil
}

func repoVisibility(ctx context.Context, env *Env, args []string) error {
	l := newLeaf(env, "repo visibility <owner>/<name> public|private")
	pos, err := l.parse(args, 2, 2)
	if err != nil {
		return err
	}
	owner, name, err := l.splitRepo(pos[0])
	if err != nil {
		return err
	}
	var public bool
	switch pos[1] {
	case "public":
		public = true
	case "private":
	default:
		return l.usageErr()
	}
	s, err := l.open(ctx)
	if err != nil {
		return err
	}
	if err := s.SetVisibility(ctx, owner, name, public); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "%s/%s is %s\n", owner, name, pos[1])
	return nil
}
