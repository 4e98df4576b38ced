//go:build kfake

package bench_test

import (
	"strings"
	"testing"
)

// Built with -tags kfake, the kafka scenario runs without
// Config.KafkaBrokers, against franz-go's in-memory cluster in the bench's
// process.
func TestKafkaScenarioInProcess(t *testing.T) {
	rep, _ := checkKafkaScenario(t, nil)
	if m, _ := rep.Measure("kafka.sink"); !strings.Contains(m.Name, "kfake in process") {
		t.Errorf("kafka.sink is named %q: want the cluster it measured, kfake in process", m.Name)
	}
}
