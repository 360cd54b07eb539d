// Command ghost is a git server whose repositories live in object storage.
// Run "ghost help" for its commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/ghost-scm/ghost/internal/cli"
	"github.com/ghost-scm/ghost/internal/gitexec"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], &cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, LowerPriority: gitexec.LowerProcess})
	stop()
	os.Exit(code)
}
