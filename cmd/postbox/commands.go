package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
)

// command is one subcommand: its flags are declared by setup, which returns
// the function that runs it.
type command struct {
	summary string
	setup   func(fs *flag.FlagSet) func(ctx context.Context) error
}

var commands = map[string]command{
	"bench":   {"measure drain rate, webhooks, latency, write overhead and memory against the goals", setupBench},
	"demo":    {"run the whole pipeline in one process, with faults, and reconcile", setupDemo},
	"migrate": {"create or upgrade the outbox and inbox tables (--ordered: and the index ordered relays need)", setupMigrate},
	"relay":   {"deliver outbox events to a webhook endpoint", setupRelay},
	"status":  {"count events by status and show the age of the oldest pending one", setupStatus},
}

// errUsage marks errors whose usage text was already printed.
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(os.Stdout)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(os.Stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	fs := flag.NewFlagSet("postbox "+args[0], flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: postbox %s [flags]\n\n%s.\n\nFlags (each also read from the environment variable shown):\n", args[0], cmd.summary)
		fs.PrintDefaults()
	}
	runCmd := cmd.setup(fs)
	if err := applyEnv(fs); err != nil {
		return err
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return runCmd(ctx)
}

func usage(w *os.File) {
	fmt.Fprintln(w, "usage: postbox <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-8s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun \"postbox <command> --help\" for its flags.")
}

// envNames are the article's variable names; every other flag falls back
// to POSTBOX_<FLAG_NAME>.
var envNames = map[string]string{
	"db":             "DB_DSN",
	"webhook-url":    "WEBHOOK_URL",
	"webhook-secret": "WEBHOOK_SECRET",
}

func envName(flagName string) string {
	if n, ok := envNames[flagName]; ok {
		return n
	}
	return "POSTBOX_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets each flag from its environment variable, before the command
// line overrides it, and names the variable in the flag's help.
func applyEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := envName(f.Name)
		f.Usage += " ($" + name + ")"
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if setErr := fs.Set(f.Name, v); setErr != nil {
				err = fmt.Errorf("%w: $%s: %v", errUsage, name, setErr)
			}
		}
	})
	return err
}

func required(name, value string) error {
	if value == "" {
		return fmt.Errorf("%w: --%s is required (or $%s)", errUsage, name, envName(name))
	}
	return nil
}
