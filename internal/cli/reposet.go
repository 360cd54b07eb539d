package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/ghost-scm/ghost/internal/meta"
)

// newRepoSetCmd returns "ghost repo set": a repository's settings, one
// flag each, so that more can join without new subcommands. Only the
// flags given are changed.
func newRepoSetCmd(env *Env) *cobra.Command {
	var pushProtection, replaceRefs string
	cmd := &cobra.Command{
		Use:   "set <owner>/<name> [--push-protection on|off] [--allow-replace-refs on|off]",
		Short: "change a repository's settings",
		Long: `Change a repository's settings. Only the settings named by flags change.

--push-protection on makes the server refuse pushes that add secrets (found
with gitleaks' default rules) unless the pusher bypasses it with
git push -o secret-scanning.bypass=false_positive|used_in_tests|will_fix_later;
bypasses are recorded as alerts (ghost repo alerts). It is off by default.

--allow-replace-refs on lets pushes create and move refs/replace/* refs,
which are refused by default: a replace ref makes the clients that honour
it show another object in place of one in history. The server's own git
(scanning, push protection, the web UI) never honours them either way.`,
		Args: exactArgs(1),
	}
	a := newAdmin(env, cmd)
	cmd.Flags().StringVar(&pushProtection, "push-protection", "", "refuse pushes that add secrets: on or off")
	cmd.Flags().StringVar(&replaceRefs, "allow-replace-refs", "", "let pushes update refs/replace/*: on or off")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		type setting struct {
			flag, name, value string
			set               func(s *meta.Store, ctx context.Context, owner, name string, on bool) error
		}
		var todo []setting
		for _, st := range []setting{
			{"--push-protection", "push protection", pushProtection, (*meta.Store).SetPushProtection},
			{"--allow-replace-refs", "replace refs allowed", replaceRefs, (*meta.Store).SetAllowReplaceRefs},
		} {
			switch st.value {
			case "":
			case "on", "off":
				todo = append(todo, st)
			default:
				return usageErrorf("%s %q: want on or off", st.flag, st.value)
			}
		}
		if len(todo) == 0 {
			return usageErrorf("nothing to change: want --push-protection on|off or --allow-replace-refs on|off")
		}
		s, err := a.open(cmd.Context())
		if err != nil {
			return err
		}
		for _, st := range todo {
			if err := st.set(s, cmd.Context(), owner, name, st.value == "on"); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "%s/%s: %s %s\n", owner, name, st.name, st.value)
		}
		a.wrote()
		return nil
	}
	return cmd
}
