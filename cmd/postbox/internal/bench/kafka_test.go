package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox/cmd/postbox/internal/bench"
	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// The kafka scenario in a tiny size, to a cluster of Config.KafkaBrokers
// (kfake, started by the test: the tests may link it, the command does not
// unless built with -tags kfake): its four drains each give a positive
// rate, the ratio is sink / the lower limit, both drains of the sink ran
// `postbox relay --sink kafka://...` on a scratch outbox that is gone
// afterwards, and the topics it created in the cluster are gone too.
func TestKafkaScenario(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t, kfake.BlackholeProduce())
	rep, relays := checkKafkaScenario(t, brokers)
	for _, args := range relays.args {
		if joined := strings.Join(args, " "); !strings.Contains(joined, "--sink kafka://"+strings.Join(brokers, ",")+"?topic="+rep.Run+"_relay_") {
			t.Errorf("relay args %q: want --sink kafka://%s?topic=%s_relay_...", joined, strings.Join(brokers, ","), rep.Run)
		}
	}
	if m, _ := rep.Measure("kafka.sink"); !strings.Contains(m.Name, "--kafka-brokers") {
		t.Errorf("kafka.sink is named %q: want the cluster it measured, --kafka-brokers", m.Name)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics.Names() {
		if strings.HasPrefix(topic, rep.Run) {
			t.Errorf("topic %s left in the cluster", topic)
		}
	}
}

// checkKafkaScenario runs the kafka scenario in a tiny size to the cluster
// of brokers (none: the in-process one), checks its report and scratch
// outboxes, and returns its report and the relays it started.
func checkKafkaScenario(t *testing.T, brokers []string) (*bench.Report, *relayCalls) {
	t.Helper()
	var (
		progress logbuf.Buffer
		relays   relayCalls
	)
	cfg := bench.Config{DB: pgtest.URL(), Scenarios: []string{bench.ScenarioKafka}, BrokerEvents: 2000,
		KafkaBrokers: brokers, Progress: &progress, Command: relays.command}
	rep, err := bench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("run: %v\nprogress:\n%s", err, progress.String())
	}
	values := map[string]float64{}
	for key, relay := range map[string]string{
		"kafka.sink": bench.RelayProcess, "kafka.sink_concurrency": bench.RelayProcess, "kafka.franz_go": "",
		"kafka.noop": bench.RelayInProcess, "kafka.ratio": bench.RelayProcess,
	} {
		m, ok := rep.Measure(key)
		switch {
		case !ok:
			t.Fatalf("no measure %s", key)
		case !(m.Value > 0):
			t.Errorf("measure %s = %v, want a positive number", key, m.Value)
		case m.Relay != relay:
			t.Errorf("measure %s: relay %q, want %q", key, m.Relay, relay)
		}
		values[key] = m.Value
	}
	if want := values["kafka.sink"] / min(values["kafka.franz_go"], values["kafka.noop"]); values["kafka.ratio"] != want {
		t.Errorf("kafka.ratio %v, want %v", values["kafka.ratio"], want)
	}
	if m, _ := rep.Measure("kafka.ratio"); m.Goal == nil || m.Met == nil {
		t.Errorf("kafka.ratio has no goal judged: %+v", m)
	}
	if len(relays.args) != 2 {
		t.Fatalf("started `postbox relay` %d times, want 2", len(relays.args))
	}
	for _, args := range relays.args {
		if joined := strings.Join(args, " "); !strings.Contains(joined, "--sink kafka://127.0.0.1:") {
			t.Errorf("relay args %q: want --sink kafka://...", joined)
		}
	}
	if !strings.Contains(strings.Join(relays.args[1], " "), "--concurrency 256") {
		t.Errorf("second relay args %q: want --concurrency 256", relays.args[1])
	}
	left, err := bench.Leftovers(context.Background(), cfg.DB, rep.Run)
	if err != nil || len(left) > 0 {
		t.Fatalf("scratch outboxes left: %v %v", left, err)
	}
	return rep, &relays
}
