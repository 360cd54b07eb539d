package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// newRepoSetCmd returns "ghost repo set": a repository's settings, one
// flag each, so that more can join without new subcommands. Only the
// flags given are changed.
func newRepoSetCmd(env *Env) *cobra.Command {
	var pushProtection string
	cmd := &cobra.Command{
		Use:   "set <owner>/<name> --push-protection on|off",
		Short: "change a repository's settings",
		Long: `Change a repository's settings. Only the settings named by flags change.

--push-protection on makes the server refuse pushes that add secrets (found
with gitleaks' default rules) unless the pusher bypasses it with
git push -o secret-scanning.bypass=false_positive|used_in_tests|will_fix_later;
bypasses are recorded as alerts (ghost repo alerts). It is off by default.`,
		Args: exactArgs(1),
	}
	a := newAdmin(env, cmd)
	cmd.Flags().StringVar(&pushProtection, "push-protection", "", "refuse pushes that add secrets: on or off")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		owner, name, err := splitRepo(args[0])
		if err != nil {
			return err
		}
		var on bool
		switch pushProtection {
		case "on":
			on = true
		case "off":
		case "":
			return usageErrorf("nothing to change: want --push-protection on|off")
		default:
			return usageErrorf("--push-protection %q: want on or off", pushProtection)
		}
		s, err := a.open(cmd.Context())
		if err != nil {
			return err
		}
		if err := s.SetPushProtection(cmd.Context(), owner, name, on); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "%s/%s: push protection %s\n", owner, name, pushProtection)
		a.wrote()
		return nil
	}
	return cmd
}
