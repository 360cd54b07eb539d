package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// confirm asks before a command destroys something: on a terminal, the
// user types want (the repository's or tenant's name, as GitHub asks);
// --yes (yes) skips the question; without a terminal, --yes is required,
// so that a script never deletes by accident what it did not say it
// would.
func confirm(cmd *cobra.Command, env *Env, yes bool, what, want string) error {
	if yes {
		return nil
	}
	in := cmd.InOrStdin()
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return usageErrorf("%s Refusing without confirmation: not on a terminal; pass --yes", what)
	}
	fmt.Fprintf(env.Stderr, "%s\nType %s to confirm: ", what, want)
	line, err := bufio.NewReader(io.LimitReader(in, 4<<10)).ReadString('\n')
	if err != nil && err != io.EOF {
		return err
	}
	if strings.TrimSpace(line) != want {
		return fmt.Errorf("not confirmed: nothing was deleted")
	}
	return nil
}
