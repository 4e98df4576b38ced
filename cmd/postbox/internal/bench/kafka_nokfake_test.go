//go:build !kfake

package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
)

// Without -tags kfake the bench has no in-process cluster: a run that
// includes kafka without Config.KafkaBrokers fails before any scenario
// starts, before it opens the database (the URL is of a server that is not
// there, whose error would not name the flag), and says the two ways to
// run it.
func TestKafkaScenarioWithoutClusterRefused(t *testing.T) {
	for _, scenarios := range [][]string{{bench.ScenarioKafka}, {bench.ScenarioDrain, bench.ScenarioKafka}} {
		_, err := bench.Run(context.Background(), bench.Config{DB: "postgres://nobody@127.0.0.1:1/none",
			Scenarios: scenarios})
		if err == nil {
			t.Fatalf("%v without KafkaBrokers: no error", scenarios)
		}
		for _, want := range []string{"--kafka-brokers", "-tags kfake"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v without KafkaBrokers: error %q does not mention %s", scenarios, err, want)
			}
		}
	}
}
