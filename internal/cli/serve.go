package cli

import (
	"context"
	"errors"
)

// runServe is a placeholder until the server lands (issue 5).
func runServe(ctx context.Context, env *Env, args []string) error {
	return errors.New("serve: not built yet")
}
