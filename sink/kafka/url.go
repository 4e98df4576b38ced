package kafka

import (
	"context"
	"errors"
	"flag"
	"math"
	"net/url"
	"strings"

	"github.com/postbox-go/postbox/sink"
)

// URL is the sink.URLKind of Kafka: a kafka:// URL as ParseURL reads it,
// kafka://BROKER[,BROKER]?topic=TEMPLATE. Its Open takes the options'
// User and Password for a URL without credentials (the SASL mechanism's),
// and their Timeout and Logger; it checks that the brokers answer and that
// a fixed topic exists. Its sinks are sink.BatchSinks and io.Closers.
var URL = sink.URLKind{
	Name:    "kafka",
	Schemes: []string{"kafka"},
	// A publish waits a few milliseconds for its acknowledgement while
	// the producer batches many more to the same brokers.
	Concurrency: 1024,
	// Batches are produced in a row and their acknowledgements collected
	// together (Sink.PublishBatch): no goroutine, timer and channel per
	// record.
	PublishBatch: 256,
	Open:         openURL,
	Describe: func(u *url.URL) (string, []string) {
		return sink.DescribeQuery(u, "kafka "+u.Scheme+"://"+u.Host, "topic")
	},
	Setup:            setupURL,
	SetupAlternative: "add allow_auto_topic_creation=true to the sink URL",
}

// setupURL is URL's Setup: the sink's topics (Setup), with the partitions
// and replicas the flags ask for, and the topics they name when the
// sink's topic is a template.
func setupURL(fs *flag.FlagSet) sink.SetupFunc {
	partitions := fs.Int("partitions", PartitionsDefault, "kafka: the partitions of each topic created")
	replicationFactor := fs.Int("replication-factor", ReplicationFactorDefault, "kafka: the replicas of each topic created (3 keeps an acknowledged record through the loss of a broker; 1 for a single broker)")
	topics := fs.String("topics", "", "kafka: the topics to create, separated by commas, when the sink's topic is a template (outbox.event.{aggregate_type}: outbox.event.order,outbox.event.payment)")
	return func(ctx context.Context, u *url.URL, o sink.SetupOptions) ([]sink.SetupStep, error) {
		cfg, err := ParseURL(u.String())
		if err != nil {
			return nil, &sink.OptionError{Option: "URL", Err: err}
		}
		if *partitions < 1 || *replicationFactor < 1 || *replicationFactor > math.MaxInt16 {
			return nil, &sink.OptionError{Err: errors.New("--partitions and --replication-factor must be positive")}
		}
		var names []string
		for topic := range strings.SplitSeq(*topics, ",") {
			if topic = strings.TrimSpace(topic); topic != "" {
				names = append(names, topic)
			}
		}
		steps, err := Setup(ctx, cfg, SetupConfig{
			Topics: names, Partitions: int32(*partitions), ReplicationFactor: int16(*replicationFactor), DryRun: o.DryRun,
		})
		out := make([]sink.SetupStep, len(steps))
		for i, st := range steps {
			out[i] = sink.SetupStep{Resource: st.Resource, Settings: st.Settings, Created: st.Created}
		}
		return out, err
	}
}

// openURL is URL's Open.
func openURL(ctx context.Context, u *url.URL, o sink.URLOptions) (sink.Sink, error) {
	cfg, err := ParseURL(sink.WithCredentials(u, o.User, o.Password).String())
	if err != nil {
		return nil, &sink.OptionError{Option: "URL", Err: err}
	}
	cfg.Timeout, cfg.Logger = o.Timeout, o.Logger
	s, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return closer{s}, nil
}

// closer is the Sink as URL opens it: an io.Closer (the Sink's own Close
// returns nothing).
type closer struct{ *Sink }

func (c closer) Close() error {
	c.Sink.Close()
	return nil
}
