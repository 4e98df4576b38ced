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

	"github.com/postbox-go/postbox/sink/amqp"
	"github.com/postbox-go/postbox/sink/kafka"
	"github.com/postbox-go/postbox/sink/nats"
)

// sinkCommands are the subcommands of "postbox sink".
var sinkCommands = map[string]command{
	"setup": {summary: "create what --sink needs, once: a NATS JetStream stream, a RabbitMQ exchange (and --queue), Kafka topics; prints the settings, changes nothing that exists", setup: setupSinkSetup},
}

// setupStep is what sink setup did with one resource, whichever the
// broker.
type setupStep struct {
	resource, settings string
	created            bool
}

// setupFlags are the settings of "postbox sink setup" besides --sink,
// each for one scheme.
type setupFlags struct {
	timeout           time.Duration
	dryRun            bool
	duplicateWindow   time.Duration
	replicas          int
	queue, bindingKey string
	partitions        int
	replicationFactor int
	topics            string
}

// setupFlagSchemes names the scheme each broker's flag applies to.
var setupFlagSchemes = map[string]string{
	"duplicate-window": "nats", "replicas": "nats",
	"queue": "amqp", "binding-key": "amqp",
	"partitions": "kafka", "replication-factor": "kafka", "topics": "kafka",
}

func setupSinkSetup(fs *flag.FlagSet) func(context.Context) error {
	var f setupFlags
	sinkURL := fs.String("sink", "", "the sink, as postbox relay --sink takes it: nats://HOST:PORT?subject=TEMPLATE[&stream=NAME], amqp://USER:PASS@HOST:PORT/VHOST?exchange=NAME, kafka://BROKER,...?topic=TEMPLATE; credentials may come from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "bound on connecting and each call to the broker")
	fs.BoolVar(&f.dryRun, "dry-run", false, "say what would be created, and create nothing")
	fs.DurationVar(&f.duplicateWindow, "duplicate-window", nats.DuplicateWindowDefault, "nats: the stream's duplicate window, in which a retried publish (same Nats-Msg-Id) is stored once; the default covers a default relay's longest wait before a retry (--backoff-max 10m, or --lease 30s) plus a --timeout")
	fs.IntVar(&f.replicas, "replicas", 1, "nats: the stream's replicas (up to the cluster's servers)")
	fs.StringVar(&f.queue, "queue", "", "amqp: also declare this durable quorum queue and bind it to the exchange")
	fs.StringVar(&f.bindingKey, "binding-key", amqp.BindingKeyDefault, "amqp: the binding key of --queue (# is every routing key)")
	fs.IntVar(&f.partitions, "partitions", kafka.PartitionsDefault, "kafka: the partitions of each topic created")
	fs.IntVar(&f.replicationFactor, "replication-factor", kafka.ReplicationFactorDefault, "kafka: the replicas of each topic created (3 keeps an acknowledged record through the loss of a broker; 1 for a single broker)")
	fs.StringVar(&f.topics, "topics", "", "kafka: the topics to create, separated by commas, when the sink's topic is a template (outbox.event.{aggregate_type}: outbox.event.order,outbox.event.payment)")
	return func(ctx context.Context) error {
		if err := required("sink", *sinkURL); err != nil {
			return err
		}
		u, err := url.Parse(*sinkURL)
		if err != nil || u.Scheme == "" {
			return fmt.Errorf("%w: --sink: %q is not a URL (want nats://..., amqp://... or kafka://...)", errUsage, redactSinkURL(*sinkURL))
		}
		u = withEnvCredentials(u)
		scheme := strings.ToLower(u.Scheme)
		if err := checkSetupFlags(fs, scheme); err != nil {
			return err
		}
		steps, err := runSetup(ctx, scheme, u.String(), f)
		if err != nil {
			return err
		}
		printSetup(os.Stdout, redactSinkURL(u.String()), steps, f.dryRun)
		return nil
	}
}

// checkSetupFlags refuses a broker's flag given for another scheme, which
// would be silently ignored.
func checkSetupFlags(fs *flag.FlagSet, scheme string) error {
	family := scheme
	if scheme == "amqps" {
		family = "amqp"
	}
	var err error
	fs.Visit(func(fl *flag.Flag) {
		if want, ok := setupFlagSchemes[fl.Name]; ok && want != family && err == nil {
			err = fmt.Errorf("%w: --%s applies to a %s sink, not to %s", errUsage, fl.Name, want, scheme)
		}
	})
	return err
}

// runSetup runs the Setup of the broker of scheme for the sink URL raw.
func runSetup(ctx context.Context, scheme, raw string, f setupFlags) ([]setupStep, error) {
	switch scheme {
	case "nats":
		cfg, err := nats.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: --sink: %v", errUsage, err)
		}
		cfg.Timeout = f.timeout
		st, err := nats.Setup(ctx, cfg, nats.SetupConfig{DuplicateWindow: f.duplicateWindow, Replicas: f.replicas, DryRun: f.dryRun})
		return []setupStep{{st.Resource, st.Settings, st.Created}}, err
	case "amqp", "amqps":
		cfg, err := amqp.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: --sink: %v", errUsage, err)
		}
		cfg.DialTimeout = f.timeout
		steps, err := amqp.Setup(ctx, cfg, amqp.SetupConfig{Queue: f.queue, BindingKey: f.bindingKey, DryRun: f.dryRun})
		return convertSteps(steps, func(s amqp.SetupStep) setupStep { return setupStep{s.Resource, s.Settings, s.Created} }), err
	case "kafka":
		cfg, err := kafka.ParseURL(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: --sink: %v", errUsage, err)
		}
		if f.partitions < 1 || f.replicationFactor < 1 || f.replicationFactor > 1<<15-1 {
			return nil, fmt.Errorf("%w: --partitions and --replication-factor must be positive", errUsage)
		}
		var topics []string
		for topic := range strings.SplitSeq(f.topics, ",") {
			if topic = strings.TrimSpace(topic); topic != "" {
				topics = append(topics, topic)
			}
		}
		steps, err := kafka.Setup(ctx, cfg, kafka.SetupConfig{
			Topics: topics, Partitions: int32(f.partitions), ReplicationFactor: int16(f.replicationFactor), DryRun: f.dryRun,
		})
		return convertSteps(steps, func(s kafka.SetupStep) setupStep { return setupStep{s.Resource, s.Settings, s.Created} }), err
	case "http", "https":
		return nil, fmt.Errorf("%w: --sink: a webhook endpoint needs no setup (sink setup is for nats, amqp and kafka)", errUsage)
	}
	return nil, fmt.Errorf("%w: --sink: unknown scheme %q (want nats, amqp, amqps or kafka)", errUsage, scheme)
}

func convertSteps[S any](steps []S, convert func(S) setupStep) []setupStep {
	out := make([]setupStep, len(steps))
	for i, s := range steps {
		out[i] = convert(s)
	}
	return out
}

// printSetup writes one line per resource, and a last line saying whether
// anything changed.
func printSetup(w io.Writer, sinkURL string, steps []setupStep, dryRun bool) {
	created := 0
	for _, s := range steps {
		state := "exists, unchanged"
		switch {
		case s.created && dryRun:
			state = "would be created"
		case s.created:
			state = "created"
		}
		if s.created {
			created++
		}
		fmt.Fprintf(w, "%s: %s (%s)\n", s.resource, state, s.settings)
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

// withSetupHint replaces err, a broker sink's start error, by one that
// points to "postbox sink setup" when a dry run of the setup finds the
// sink's resources missing; otherwise it returns err.
func withSetupHint(ctx context.Context, u *url.URL, err error) error {
	f := setupFlags{timeout: 10 * time.Second, dryRun: true, duplicateWindow: nats.DuplicateWindowDefault,
		replicas: 1, partitions: kafka.PartitionsDefault, replicationFactor: kafka.ReplicationFactorDefault}
	steps, setupErr := runSetup(ctx, strings.ToLower(u.Scheme), u.String(), f)
	if setupErr != nil {
		return err
	}
	var missing []string
	for _, s := range steps {
		if s.created {
			missing = append(missing, s.resource+" ("+s.settings+")")
		}
	}
	if len(missing) == 0 {
		return err
	}
	also := ""
	if strings.EqualFold(u.Scheme, "kafka") {
		also = ", or add allow_auto_topic_creation=true to the sink URL"
	}
	return fmt.Errorf("--sink %s: %s does not exist; create it with: postbox sink setup --sink URL (the same URL; it prints what it creates)%s", redactSinkURL(u.String()), strings.Join(missing, " and "), also)
}
