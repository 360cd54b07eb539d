package cli

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/ghost-scm/ghost/internal/client"
	"github.com/ghost-scm/ghost/internal/config"
	"github.com/ghost-scm/ghost/internal/meta"
)

// login is what "ghost login" saves: the server the commands use by
// default and the token they present.
type login struct {
	Server string `json:"server"`
	Token  string `json:"token"`
}

// loginPath is the file of the saved login, in the user's configuration
// directory ($XDG_CONFIG_HOME/ghost on Linux).
func loginPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("the user's configuration directory: %w", err)
	}
	return filepath.Join(dir, "ghost", "login.json"), nil
}

// loadLogin reads the saved login; none saved is the zero login. A file
// that does not read is an error, never silently ignored: commands would
// otherwise go to the store instead of the server the user chose.
func loadLogin() (login, error) {
	p, err := loginPath()
	if err != nil {
		return login{}, nil // no configuration directory: nothing saved
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return login{}, nil
	}
	if err != nil {
		return login{}, fmt.Errorf("read the saved login: %w", err)
	}
	var l login
	if err := json.Unmarshal(b, &l); err != nil || l.Server == "" {
		return login{}, fmt.Errorf("the saved login %s does not read; run ghost login again, or remove it", p)
	}
	return l, nil
}

// saveLogin writes l readable by the user alone: it holds a token.
func saveLogin(l login) (string, error) {
	p, err := loginPath()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return "", err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	return p, os.Rename(tmp, p)
}

// sameServer compares server URLs as ParseServer normalizes them.
func sameServer(a, b string) bool {
	ua, err1 := client.ParseServer(a)
	ub, err2 := client.ParseServer(b)
	return err1 == nil && err2 == nil && strings.EqualFold(ua.Scheme+"://"+ua.Host, ub.Scheme+"://"+ub.Host) && ua.Path == ub.Path
}

// newLoginCmd returns "ghost login URL": check a token against the
// server and save both, so that commands go to that server.
func newLoginCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "login <server-url>",
		Short: "save a server and a token: commands then work through that server",
		Long: `Save a server's URL and an access token in the user's configuration
directory (` + "`ghost login`" + ` prints where), so that tenant, token, key and
repo commands work through that server's API, as gh and kubectl do.

The token is read from GHOST_TOKEN, else asked for on a terminal (not
echoed), else read from the first line of stdin:

  echo "$TOKEN" | ghost login https://git.example.com

It is checked against the server first. --server and GHOST_SERVER still
choose another server for one command, and the store flags (--data-dir,
--s3-*) the store itself. ghost logout forgets the login.`,
		Args: exactArgs(1),
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		u, err := client.ParseServer(args[0])
		if err != nil {
			return usageErrorf("%v", err)
		}
		token := config.Env("GHOST_TOKEN", "")
		if token == "" {
			if token, err = readToken(cmd.InOrStdin(), env.Stderr); err != nil {
				return err
			}
		}
		if !strings.HasPrefix(token, meta.TokenPrefix) {
			return fmt.Errorf("that is not a ghost token (they start with %q)", meta.TokenPrefix)
		}
		c, err := client.New(u.String(), token, client.WithUserAgent("ghost-cli"))
		if err != nil {
			return err
		}
		who, err := c.User(cmd.Context())
		if err != nil {
			return explain(err, &conn{Client: c, where: u.String()})
		}
		p, err := saveLogin(login{Server: u.String(), Token: token})
		if err != nil {
			return fmt.Errorf("save the login: %w", err)
		}
		fmt.Fprintf(env.Stdout, "logged in to %s as %s (%s token %s)\n", u, who.Tenant, who.Scope, who.TokenID)
		fmt.Fprintf(env.Stderr, "saved in %s\n", p)
		return nil
	}
	return cmd
}

// readToken asks for the token on a terminal without echoing it, or
// reads the first line of a pipe.
func readToken(in io.Reader, prompt io.Writer) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, "token: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		if err != nil {
			return "", fmt.Errorf("read the token: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4<<10)).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read the token: %w", err)
	}
	if t := strings.TrimSpace(line); t != "" {
		return t, nil
	}
	return "", usageErrorf("no token: set GHOST_TOKEN, or pipe it in (echo \"$TOKEN\" | ghost login URL)")
}

// newLogoutCmd returns "ghost logout": forget the saved login.
func newLogoutCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "forget the server and token ghost login saved",
		Args:  exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			p, err := loginPath()
			if err != nil {
				return err
			}
			switch err := os.Remove(p); {
			case errors.Is(err, os.ErrNotExist):
				fmt.Fprintln(env.Stdout, "not logged in")
			case err != nil:
				return err
			default:
				fmt.Fprintf(env.Stdout, "logged out (removed %s)\n", p)
			}
			return nil
		},
	}
}

// newInitCmd returns "ghost init": create a store where the settings
// point, the one explicit way besides "ghost serve".
func newInitCmd(env *Env) *cobra.Command {
	var cfg config.Config
	cmd := &cobra.Command{
		Use:   "init",
		Short: "create an empty store (./ghost-data, --data-dir, or an S3 bucket's prefix)",
		Long: `Create an empty ghost store where --data-dir (default ./ghost-data)
or the --s3-* flags point. "ghost serve" creates it too on its first
start; no other command does, so that one run in the wrong directory does
not leave a stray store behind. Running init on an existing store changes
nothing.`,
		Args: exactArgs(0),
	}
	cfg.RegisterStore(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		_, created, err := cfg.CreateStore(cmd.Context())
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(env.Stdout, "created an empty store: %s\n", cfg.Describe())
		} else {
			fmt.Fprintf(env.Stdout, "a store is there already: %s\n", cfg.Describe())
		}
		return nil
	}
	return cmd
}
