//go:build !kfake

package bench

import (
	"context"
	"errors"
)

// inProcessKafka is the kafka scenario's cluster when Config.KafkaBrokers
// is empty: none in this build. franz-go's in-memory cluster (kfake, 3 MB
// of test code) is linked only with -tags kfake, so that the postbox users
// run carries no test-only module.
func inProcessKafka() (func(ctx context.Context, topics []string) (kafkaCluster, error), error) {
	return nil, errors.New("bench: the kafka scenario needs --kafka-brokers (a running Kafka, e.g. `go run ./examples/kafka/devkafka`), " +
		"or a postbox built with `-tags kfake`, which links franz-go's in-memory cluster")
}
