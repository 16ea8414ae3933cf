// Command butler runs Herald's butler as its own process, for a compose fleet.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/heraldhq/herald/services/herald"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := herald.RunService(ctx, "butler", os.Args[1:], herald.IO{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
