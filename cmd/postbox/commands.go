package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
)

// command is one subcommand: its flags are declared by setup, which returns
// the function that runs it (it reads its positional arguments, if any,
// with fs.Args()). A command with subcommands (sub) has no setup of its
// own: "postbox failed list" runs the sub command "list" of "failed".
type command struct {
	summary string
	setup   func(fs *flag.FlagSet) func(ctx context.Context) error
	// args names the positional arguments in the usage line ("ID...");
	// empty: the command takes none.
	args string
	// sub are the subcommands, when the command has some.
	sub map[string]command
}

var commands = map[string]command{
	"bench":     {summary: "measure drain rate, webhooks, latency, write overhead and memory against the goals", setup: setupBench},
	"chaos":     {summary: "run producers, relay processes and an inbox consumer under injected faults on PostgreSQL (one schema, or --sources N over many, in scratch databases), and reconcile", setup: setupChaos},
	"console":   {summary: "serve the web console: the outbox and the inbox, failed events to retry or purge (--addr, --token, --read-only; --sources: one console over many, with a source switcher)", setup: setupConsole},
	"demo":      {summary: "run the whole pipeline in one process, with faults, and reconcile", setup: setupDemo},
	"endpoints": {summary: "the endpoints of postbox relay --endpoints, webhooks or brokers' (NATS, RabbitMQ, Kafka), their secrets sealed with the secrets key: add, update, list, show, enable, disable, remove, retry, rotate-secret, rekey, test, attempts", sub: endpointsCommands},
	"failed":    {summary: "the dead letters: list, show, retry or purge failed events", sub: failedCommands},
	"keys":      {summary: "generate keys: a signing ed25519 pair (whsk_/whpk_, v1a), a whsec_ secret, or the secrets key that seals endpoints' secrets (pbkey_)", sub: keysCommands},
	"migrate":   {summary: "create or upgrade the outbox and inbox tables (--ordered: and the index ordered relays need)", setup: setupMigrate},
	"relay":     {summary: "deliver outbox events to a webhook endpoint or a broker (NATS JetStream, RabbitMQ, Kafka)", setup: setupRelay},
	"replay":    {summary: "deliver again events already delivered, chosen by time, type and aggregate, from the table (--retention kept them) and the archive: to the outbox's queue or one endpoint (--to-endpoint); prints the plan and its count, replays with --yes; each keeps its event id, marked " + postbox.HeaderReplay, setup: setupReplay},
	"version":   {summary: "print the version of postbox and the commit it was built from (also --version)", setup: setupVersion},
	"--version": {summary: "the same as version", setup: setupVersion},
	"sink":      {summary: "the broker a relay publishes to: setup creates what --sink needs (a stream, an exchange and queue, topics)", sub: sinkCommands},
	"status":    {summary: "count events by status and by type, show the age of the oldest pending one and the relays running, and whether they find the sink down (--watch: again and again; --check: exit 3 when the sink is down)", setup: setupStatus, args: "[WATCH-INTERVAL]"},
}

// errUsage marks errors whose usage text was already printed.
var errUsage = errors.New("usage")

func exitCode(err error) int {
	switch {
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errSinkDown):
		return exitSinkDown
	}
	return 1
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 || isHelp(args[0]) {
		usage(os.Stdout, "postbox", commands)
		if len(args) == 0 {
			return errUsage
		}
		return nil
	}
	cmd, ok := commands[args[0]]
	if !ok {
		usage(os.Stderr, "postbox", commands)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	name := "postbox " + args[0]
	args = args[1:]
	if cmd.sub != nil {
		if len(args) == 0 || isHelp(args[0]) {
			fmt.Fprintf(os.Stdout, "%s.\n\n", cmd.summary)
			usage(os.Stdout, name, cmd.sub)
			if len(args) == 0 {
				return errUsage
			}
			return nil
		}
		sub, ok := cmd.sub[args[0]]
		if !ok {
			usage(os.Stderr, name, cmd.sub)
			return fmt.Errorf("%w: unknown command %q", errUsage, name+" "+args[0])
		}
		name, cmd, args = name+" "+args[0], sub, args[1:]
	}
	return runCommand(ctx, name, cmd, args)
}

func isHelp(arg string) bool { return arg == "help" || arg == "-h" || arg == "--help" }

// runCommand parses the flags of cmd, called name, and runs it. Flags and
// positional arguments may come in any order.
func runCommand(ctx context.Context, name string, cmd command, args []string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// A parse error is returned on one line (see flagError); --help prints
	// the usage, to stdout.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	runCmd := cmd.setup(fs)
	if err := applyEnv(fs); err != nil {
		return err
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				commandUsage(os.Stdout, fs, name, cmd)
				return nil
			}
			return flagError(name, err)
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(positional) > 0 && cmd.args == "" {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, positional[0])
	}
	// fs.Args() is what runCmd reads: the positional arguments.
	if err := fs.Parse(append([]string{"--"}, positional...)); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return scrubFlags(fs, runCmd(ctx))
}

// secretFlags are the flags whose values may hold a password: err's text
// is scrubbed of it, whatever quoted it (a driver, a server, a broker
// client).
var secretFlags = []string{"db", "sink", "webhook-url"}

// scrubFlags hides in err the passwords of the URLs that fs's secretFlags
// hold (see dburl.Scrub).
func scrubFlags(fs *flag.FlagSet, err error) error {
	for _, name := range secretFlags {
		if f := fs.Lookup(name); f != nil && err != nil {
			err = dburl.Scrub(err, f.Value.String())
		}
	}
	return err
}

// commandUsage prints the usage of cmd, called name, with its flags.
func commandUsage(w io.Writer, fs *flag.FlagSet, name string, cmd command) {
	line := name + " [flags]"
	if cmd.args != "" {
		line += " " + cmd.args
	}
	fmt.Fprintf(w, "usage: %s\n\n%s.\n\nFlags (each also read from the environment variable shown):\n", line, cmd.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// flagError is a usage error for the parse error err of command name: one
// line, flags written with two dashes as in the help, and where the help
// is.
func flagError(name string, err error) error {
	msg := err.Error()
	for _, prefix := range []string{"flag -", "for -", "not defined: -", "argument: -"} {
		msg = strings.Replace(msg, prefix, prefix+"-", 1)
	}
	return fmt.Errorf("%w: %s (see %s --help)", errUsage, msg, name)
}

// usage lists the commands of prefix ("postbox", "postbox failed").
func usage(w *os.File, prefix string, commands map[string]command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prefix)
	names := make([]string, 0, len(commands))
	width := 8
	for name := range commands {
		if strings.HasPrefix(name, "-") { // --version: a flag's spelling of a command
			continue
		}
		names = append(names, name)
		width = max(width, len(name))
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-*s %s\n", width, name, commands[name].summary)
	}
	fmt.Fprintf(w, "\nRun \"%s <command> --help\" for its flags.\n", prefix)
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

// commandLineOnly marks a flag that applyEnv leaves alone: an endpoint's
// settings (postbox endpoints add, update), whose names (--concurrency,
// --rate, --url...) the environment of a relay may set for the relay.
// Mark flags with setCommandLineOnly.
type commandLineOnly struct{ flag.Value }

// String is the flag's value; "" for the zero commandLineOnly, which the
// help text makes to tell a default from no default.
func (c commandLineOnly) String() string {
	if c.Value == nil {
		return ""
	}
	return c.Value.String()
}

// commandLineOnlyBool is commandLineOnly for a boolean flag: it may be
// given without a value, and its zero value is "false", so that the help
// shows no default for it.
type commandLineOnlyBool struct{ commandLineOnly }

func (c commandLineOnlyBool) IsBoolFlag() bool { return true }

func (c commandLineOnlyBool) String() string {
	if c.Value == nil {
		return "false"
	}
	return c.Value.String()
}

// setCommandLineOnly marks the flags names of fs as read from the command
// line only (see commandLineOnly). Without keepDefaults their help shows
// no default: a command that changes only the flags given (endpoints
// update) has none.
func setCommandLineOnly(fs *flag.FlagSet, keepDefaults bool, names ...string) {
	for _, name := range names {
		fl := fs.Lookup(name)
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			fl.Value = commandLineOnlyBool{commandLineOnly{fl.Value}}
		} else {
			fl.Value = commandLineOnly{fl.Value}
		}
		if !keepDefaults {
			fl.DefValue = reflect.Zero(reflect.TypeOf(fl.Value)).Interface().(flag.Value).String()
		}
	}
}

// isCommandLineOnly reports whether setCommandLineOnly marked v's flag.
func isCommandLineOnly(v flag.Value) bool {
	switch v.(type) {
	case commandLineOnly, commandLineOnlyBool:
		return true
	}
	return false
}

// applyEnv sets each flag from its environment variable, before the command
// line overrides it, and names the variable in the flag's help; flags
// marked commandLineOnly are not read from the environment.
func applyEnv(fs *flag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if isCommandLineOnly(f.Value) {
			return
		}
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
