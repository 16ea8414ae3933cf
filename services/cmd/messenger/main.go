// Command messenger runs Herald's messenger as its own process, for a compose fleet.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/heraldhq/herald/services/messenger"
	"github.com/heraldhq/herald/services/process"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := process.Main(ctx, messenger.Command(), os.Args[1:], process.IO{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
