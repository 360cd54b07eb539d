package cli

import (
	"context"
	"errors"
)

// Placeholders until the admin commands land (issue 5).
func runTenant(ctx context.Context, env *Env, args []string) error {
	return errors.New("tenant: not built yet")
}

func runToken(ctx context.Context, env *Env, args []string) error {
	return errors.New("token: not built yet")
}

func runRepo(ctx context.Context, env *Env, args []string) error {
	return errors.New("repo: not built yet")
}
