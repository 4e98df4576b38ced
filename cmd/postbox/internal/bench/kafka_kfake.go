//go:build kfake

package bench

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kfake"
)

// inProcessKafka returns how to start the kafka scenario's cluster when
// Config.KafkaBrokers is empty: this build (-tags kfake) links franz-go's
// in-memory cluster, kfake, and runs it in the bench's process.
func inProcessKafka() (func(ctx context.Context, topics []string) (kafkaCluster, error), error) {
	return startKfake, nil
}

// startKfake starts a kfake cluster of kafkaBrokers brokers in the bench's
// process with topics of kafkaPartitions partitions, which acknowledges
// records without keeping them, so that its memory stays out of the
// figures.
func startKfake(_ context.Context, topics []string) (kafkaCluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(kafkaBrokers), kfake.BlackholeProduce(),
		kfake.SeedTopics(kafkaPartitions, topics...))
	if err != nil {
		return kafkaCluster{}, fmt.Errorf("start kfake: %w", err)
	}
	return kafkaCluster{
		brokers: c.ListenAddrs(),
		what:    "kfake in process",
		close:   func(context.Context) error { c.Close(); return nil },
	}, nil
}
