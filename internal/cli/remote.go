package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/alerts"
	"github.com/ghost-scm/ghost/internal/api"
	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/hooks"
	"github.com/ghost-scm/ghost/internal/objstore"
	"github.com/ghost-scm/ghost/internal/pulls"
	"github.com/ghost-scm/ghost/internal/server"
	"github.com/ghost-scm/ghost/internal/webhook"
)

// The user and admin commands (tenant, token, key, repo) run in one of
// two modes, with one implementation: every command is a call of the
// REST API through internal/client.
//
//   - Against a server: --server URL or GHOST_SERVER, with the token in
//     GHOST_TOKEN, or what "ghost login" saved. This is the ordinary way,
//     as gh, tea and kubectl work.
//   - On the object store directly, for bootstrap (the first admin token
//     comes from here) and recovery: --data-dir or the --s3-* flags. The
//     API is then served in process over the store, as the operator
//     (api.WithOperator), so both modes answer alike.
//
// Which one: a --server flag or a store flag decides (both is a usage
// error); then GHOST_SERVER, then GHOST_DATA_DIR or GHOST_S3_BUCKET;
// then a saved login; last, the store under ./ghost-data, which must
// exist: no command but "serve" and "init" creates a store
// (docs/adr/0100-cli-modes.md).

// target is where a command sends its calls: the settings of both modes.
type target struct {
	env    *Env
	cfg    config.Config
	server string
	cmd    *cobra.Command
}

// newTarget registers the flags of both modes on cmd.
func newTarget(env *Env, cmd *cobra.Command) *target {
	t := &target{env: env, cmd: cmd}
	f := cmd.Flags()
	t.cfg.RegisterStore(f)
	config.StringVar(f, &t.server, "server", "GHOST_SERVER", "", "URL of a ghost server to work through its API (token: GHOST_TOKEN or ghost login); without it, and without a saved login, the command works on the store")
	return t
}

// conn is an open target: the client and where it leads.
type conn struct {
	*client.Client
	// where names the server or the store, for "wrote to ..." notes.
	where string
	// store is true on the object store directly.
	store bool
	close func()
}

// Close releases what the connection holds.
func (c *conn) Close() {
	if c.close != nil {
		c.close()
	}
}

// storeOptions add parts to the API served over the store.
type storeOptions struct {
	// scans serves the scan-run endpoints, which need the coordination
	// store; opened only by the commands that use them.
	scans *scanFlags
	// logger receives the scanner's warnings.
	logger *slog.Logger
	// pulls serves the pull-request endpoints, which need a repository
	// cache (a temporary one) and the push path.
	pulls bool
}

// errModes is the usage error of a command told both ways to go.
var errModes = errors.New("--server and the store flags (--data-dir, --s3-*) exclude each other: use one")

// mode decides between the server and the store, as the comment at the
// top of this file says; server is the URL to use, or "" for the store.
func (t *target) mode() (server string, err error) {
	f := t.cmd.Flags()
	flagServer := f.Changed("server")
	flagStore := false
	for _, n := range []string{"data-dir", "s3-bucket", "s3-prefix", "s3-endpoint"} {
		flagStore = flagStore || f.Changed(n)
	}
	switch {
	case flagServer && flagStore:
		return "", &usageError{errModes.Error()}
	case flagServer:
		if t.server == "" {
			return "", usageErrorf("--server: empty URL")
		}
		return t.server, nil
	case flagStore:
		return "", nil
	case t.server != "": // GHOST_SERVER
		return t.server, nil
	case config.Env("GHOST_DATA_DIR", "") != "" || config.Env("GHOST_S3_BUCKET", "") != "":
		return "", nil
	}
	l, err := loadLogin()
	if err != nil {
		return "", err
	}
	return l.Server, nil
}

// open connects as the settings say.
func (t *target) open(ctx context.Context, so storeOptions) (*conn, error) {
	server, err := t.mode()
	if err != nil {
		return nil, err
	}
	if server != "" {
		return t.openServer(server)
	}
	return t.openStore(ctx, so)
}

// openServer returns a client of server with the token from GHOST_TOKEN,
// else the one saved for that server by ghost login.
func (t *target) openServer(server string) (*conn, error) {
	token := config.Env("GHOST_TOKEN", "")
	if token == "" {
		l, err := loadLogin()
		if err != nil {
			return nil, err
		}
		if sameServer(l.Server, server) {
			token = l.Token
		}
	}
	c, err := client.New(server, token, client.WithUserAgent("ghost-cli"))
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return &conn{Client: c, where: c.Server()}, nil
}

// openStore serves the API over the configured object store, in process,
// as the operator.
func (t *target) openStore(ctx context.Context, so storeOptions) (*conn, error) {
	st, err := openStores(ctx, &t.cfg)
	if err != nil {
		return nil, err
	}
	as := alerts.New(st.objects)
	// Hooks are records in the store: the CLI manages them and queues
	// their events; a running serve delivers them.
	// Addresses are checked when a serve delivers, under its own policy.
	hs := hooks.New(hooks.Options{Store: st.objects, Log: st.log, Meta: st.meta, Policy: webhook.Policy{AllowPrivate: true}})
	opts := []api.Option{api.WithOperator(operatorName()), api.WithAlerts(as), api.WithHooks(hs)}
	closeFn := func() {}
	if so.scans != nil {
		so.scans.cfg = t.cfg
		s, err := so.scans.openOn(ctx, so.logger, st, as)
		if err != nil {
			return nil, err
		}
		opts = append(opts, api.WithScans(s.sc))
		closeFn = s.close
	}
	if so.pulls {
		ps, closePulls, err := openStorePulls(st.objects, so.logger)
		if err != nil {
			closeFn()
			return nil, err
		}
		opts = append(opts, api.WithPulls(ps))
		closeScans := closeFn
		closeFn = func() { closePulls(); closeScans() }
	}
	c, err := client.New("http://store.invalid", "", client.WithHandler(api.NewHandler(st.meta, nil, opts...)))
	if err != nil {
		closeFn()
		return nil, err
	}
	return &conn{Client: c, where: t.cfg.Location(), store: true, close: closeFn}, nil
}

// operatorName is who the CLI on the store acts as, in what the API
// records (an alert's resolver): the OS user and host. It is never a
// valid tenant name (it holds '@' and a space), so it never passes for
// one.
func operatorName() string {
	name := "operator"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host + " (store)"
}

// runAPI makes a command's RunE that opens the target, runs fn and says
// on stderr where it wrote (writes) or read from.
func (t *target) runAPI(writes bool, so storeOptions, fn func(ctx context.Context, c *conn, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := t.open(cmd.Context(), so)
		if err != nil {
			return err
		}
		defer c.Close()
		if err := fn(cmd.Context(), c, args); err != nil {
			return explain(err, c)
		}
		t.note(c, writes)
		return nil
	}
}

// note says on stderr which server or store a command changed or read:
// stdout stays for what scripts capture.
func (t *target) note(c *conn, writes bool) {
	if writes {
		fmt.Fprintf(t.env.Stderr, "wrote to %s\n", c.where)
	} else {
		fmt.Fprintf(t.env.Stderr, "read from %s\n", c.where)
	}
}

// explain adds to an API error what the user can do about it.
func explain(err error, c *conn) error {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return err
	}
	switch {
	case errors.Is(err, client.ErrUnauthenticated) && !c.store:
		return fmt.Errorf("%w\n(%s wants a token: set GHOST_TOKEN, or run ghost login %s)", err, c.where, c.where)
	case errors.Is(err, client.ErrForbidden) && !c.store && strings.Contains(ce.Message, "admin"):
		return fmt.Errorf("%w\n(on the server's machine, --data-dir or the --s3-* flags work on the store directly, as the operator)", err)
	case errors.Is(err, client.ErrUnavailable) && ce.Status == 0:
		return fmt.Errorf("%w\n(is ghost serve running there? --server, GHOST_SERVER or ghost login choose the server)", err)
	}
	return err
}

// hintNoStore is what Main adds to a *config.NoStoreError.
func hintNoStore(w io.Writer) {
	fmt.Fprint(w, `  Run this where "ghost serve" keeps its data, or say where the store is:
  --data-dir DIR (GHOST_DATA_DIR), or --s3-bucket and friends for S3;
  or work through a running server: ghost login URL, or --server URL with GHOST_TOKEN.
  "ghost init" creates a new store.
`)
}

// openStorePulls serves pull requests over the store with a repository
// cache of its own in a temporary directory, removed at close: the CLI
// must not leave files where it runs (docs/adr/0100-cli-modes.md).
func openStorePulls(objects objstore.Store, logger *slog.Logger) (*pulls.Service, func(), error) {
	dir, err := os.MkdirTemp("", "ghost-cli-cache-")
	if err != nil {
		return nil, nil, err
	}
	ps, closeCache, err := server.OpenPulls(objects, dir, "", logger)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return ps, func() { closeCache(); os.RemoveAll(dir) }, nil
}
