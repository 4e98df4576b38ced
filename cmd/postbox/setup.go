package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/postbox-go/postbox/sink"
)

// sinkCommands are the subcommands of "postbox sink".
var sinkCommands = map[string]command{
	"setup": {summary: "create what --sink needs, once: a NATS JetStream stream, a RabbitMQ exchange (and --queue), Kafka topics; prints the settings, changes nothing that exists", setup: setupSinkSetup},
}

func setupSinkSetup(fs *flag.FlagSet) func(context.Context) error {
	sinkURL := fs.String("sink", "", "the sink, as postbox relay --sink takes it: nats://HOST:PORT?subject=TEMPLATE[&stream=NAME], amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME, kafka://BROKER,...?topic=TEMPLATE; credentials may come from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD")
	timeout := fs.Duration("timeout", setupTimeout, "bound on connecting and each call to the broker")
	dryRun := fs.Bool("dry-run", false, "say what would be created, and create nothing")
	setups, owners := registerSetups(fs)
	return func(ctx context.Context) error {
		if err := required("sink", *sinkURL); err != nil {
			return err
		}
		kind, u, err := sink.Lookup(sinkKinds, *sinkURL)
		if err != nil {
			_, _, err = sink.Lookup(setupKinds(), *sinkURL) // its message names the kinds sink setup takes
			return sinkUsageError(err)
		}
		u = withEnvCredentials(u)
		if err := checkSetupFlags(fs, owners, kind.Name, u.Scheme); err != nil {
			return err
		}
		setup := setups[kind.Name]
		if setup == nil {
			var names []string
			for _, k := range setupKinds() {
				names = append(names, k.Name)
			}
			list := strings.Join(names, ", ")
			if n := len(names); n > 1 {
				list = strings.Join(names[:n-1], ", ") + " and " + names[n-1]
			}
			return fmt.Errorf("%w: --sink: a %s sink needs no setup (sink setup is for %s)", errUsage, kind.Name, list)
		}
		steps, err := setup(ctx, u, sink.SetupOptions{Timeout: *timeout, DryRun: *dryRun})
		if err != nil {
			return sinkUsageError(err)
		}
		printSetup(os.Stdout, sink.Redact(u.String()), steps, *dryRun)
		return nil
	}
}

// setupTimeout bounds connecting and each call to the broker in sink setup
// (its --timeout) and in the dry run of withSetupHint.
const setupTimeout = 10 * time.Second

// setupKinds are the kinds of sinkKinds whose sinks need a setup.
func setupKinds() []sink.URLKind {
	var kinds []sink.URLKind
	for _, k := range sinkKinds {
		if k.Setup != nil {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// registerSetups registers on fs the flags of each kind's setup, and
// returns each kind's setup by its name and the kind's name of each flag
// it registered.
func registerSetups(fs *flag.FlagSet) (setups map[string]sink.SetupFunc, owners map[string]string) {
	setups, owners = map[string]sink.SetupFunc{}, map[string]string{}
	for _, k := range setupKinds() {
		before := map[string]bool{}
		fs.VisitAll(func(f *flag.Flag) { before[f.Name] = true })
		setups[k.Name] = k.Setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			if !before[f.Name] {
				owners[f.Name] = k.Name
			}
		})
	}
	return setups, owners
}

// checkSetupFlags refuses a flag of a kind's setup given for a sink of
// another kind (kind, its URL's scheme), which would be silently ignored.
func checkSetupFlags(fs *flag.FlagSet, owners map[string]string, kind, scheme string) error {
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if owner, ok := owners[fl.Name]; ok && owner != kind && err == nil {
			err = fmt.Errorf("%w: --%s applies to a %s sink, not to %s", errUsage, fl.Name, owner, scheme)
		}
	})
	return err
}

// printSetup writes one line per resource, and a last line saying whether
// anything changed.
func printSetup(w io.Writer, sinkURL string, steps []sink.SetupStep, dryRun bool) {
	created := 0
	for _, s := range steps {
		state := "exists, unchanged"
		switch {
		case s.Created && dryRun:
			state = "would be created"
		case s.Created:
			state = "created"
		}
		if s.Created {
			created++
		}
		fmt.Fprintf(w, "%s: %s (%s)\n", s.Resource, state, s.Settings)
	}
	switch {
	case created == 0:
		fmt.Fprintf(w, "nothing to do: %s has what it needs\n", sinkURL)
	case dryRun:
		fmt.Fprintf(w, "dry run: nothing was created; run again without --dry-run to create it\n")
	default:
		fmt.Fprintf(w, "%s is ready: postbox relay --sink can start\n", sinkURL)
	}
}

// withSetupHint replaces err, the start error of a sink of kind at u, by
// one that points to "postbox sink setup" when a dry run of the kind's
// setup, with its defaults, finds the sink's resources missing; otherwise
// it returns err.
func withSetupHint(ctx context.Context, kind sink.URLKind, u *url.URL, err error) error {
	if kind.Setup == nil {
		return err
	}
	setup := kind.Setup(flag.NewFlagSet(kind.Name, flag.ContinueOnError)) // its flags' defaults
	steps, setupErr := setup(ctx, u, sink.SetupOptions{Timeout: setupTimeout, DryRun: true})
	if setupErr != nil {
		return err
	}
	var missing []string
	for _, s := range steps {
		if s.Created {
			missing = append(missing, s.Resource+" ("+s.Settings+")")
		}
	}
	if len(missing) == 0 {
		return err
	}
	also := ""
	if kind.SetupAlternative != "" {
		also = ", or " + kind.SetupAlternative
	}
	return fmt.Errorf("--sink %s: %s does not exist; create it with: postbox sink setup --sink URL (the same URL; it prints what it creates)%s", sink.Redact(u.String()), strings.Join(missing, " and "), also)
}
