// Command postbox runs the outbox relay and its tools: migrate, relay,
// status, failed (the dead letters), demo and bench, one file each. Run "postbox help" for the list.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/postbox-go/postbox/internal/printable"
)

func main() {
	ctx, stop := signalContext()
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "postbox:", errorLine(err))
		os.Exit(exitCode(err))
	}
}

// errorLine is err on one line, printable: a driver's error of several
// lines (one per address tried) has its lines joined.
func errorLine(err error) string {
	return printable.String(strings.Join(strings.Fields(err.Error()), " "))
}

// signalContext is cancelled by the first SIGINT or SIGTERM, for a graceful
// stop; a second signal exits at once.
func signalContext() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		cancel()
		<-signals
		fmt.Fprintln(os.Stderr, "postbox: second signal, exiting at once")
		leavePresence()
		os.Exit(130)
	}()
	return ctx, func() { signal.Stop(signals); cancel() }
}
