// Command switchboard runs Herald's switchboard as its own process, for a compose fleet.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/heraldhq/herald/services/process"
	"github.com/heraldhq/herald/services/switchboard"

	// The channel types herald.yaml may name, with their settings and
	// checks: the configuration needs them (docs/decisions.md).
	_ "github.com/heraldhq/herald/services/messenger/channels"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := process.Main(ctx, switchboard.Command(), os.Args[1:], process.IO{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
