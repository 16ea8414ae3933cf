// Command herald runs a Herald fleet in one process (herald dev) and sends
// notifications through a butler (herald notify).
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
	code := herald.Main(ctx, os.Args[1:], herald.IO{Getenv: os.Getenv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
