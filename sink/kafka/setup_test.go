package kafka_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/kafkatest"
	"github.com/postbox-go/postbox/sink/kafka"
)

// A dry run creates nothing; Setup creates a fixed topic with the partitions and replication factor
// asked; the second time it finds it and creates nothing; the sink then
// starts on it.
func TestSetupCreatesTheTopicOnce(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	cfg, err := kafka.ParseURL(kafkatest.URL(brokers, "topic=orders"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.New(t.Context(), cfg); err == nil {
		t.Fatal("New before Setup: the topic exists already")
	}
	dry, err := kafka.Setup(t.Context(), cfg, kafka.SetupConfig{DryRun: true})
	if err != nil || len(dry) != 1 || !dry[0].Created {
		t.Fatalf("dry run = %+v, %v; want the topic to create", dry, err)
	}
	if _, err := kafka.New(t.Context(), cfg); err == nil {
		t.Fatal("the topic exists after a dry run")
	}
	steps, err := kafka.Setup(t.Context(), cfg, kafka.SetupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	want := "6 partitions, replication factor 3"
	if len(steps) != 1 || !steps[0].Created || steps[0].Settings != want {
		t.Fatalf("first Setup = %+v, want topic orders created with %s", steps, want)
	}
	again, err := kafka.Setup(t.Context(), cfg, kafka.SetupConfig{})
	if err != nil || len(again) != 1 || again[0].Created || again[0].Settings != want {
		t.Fatalf("second Setup = %+v, %v; want the topic found with %s, not created", again, err, want)
	}
	s, err := kafka.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("New after Setup: %v", err)
	}
	s.Close()
}

// A topic with another partition count is reported, not changed; a
// template needs its topics named; a replication factor above the
// cluster's brokers is refused before anything is created.
func TestSetupRefusals(t *testing.T) {
	_, brokers := kafkatest.NewCluster(t)
	kafkatest.CreateTopic(t, brokers, "one", 1)
	fixed, err := kafka.ParseURL(kafkatest.URL(brokers, "topic=one"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.Setup(t.Context(), fixed, kafka.SetupConfig{ReplicationFactor: 1}); !errors.Is(err, kafka.ErrDiffers) || !strings.Contains(err.Error(), "1 partitions") {
		t.Errorf("Setup of a 1-partition topic asking 6: %v, want ErrDiffers naming the partitions", err)
	}
	templated, err := kafka.ParseURL(kafkatest.URL(brokers, "topic=outbox.{aggregate_type}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kafka.Setup(t.Context(), templated, kafka.SetupConfig{}); err == nil || !strings.Contains(err.Error(), "name the topics") {
		t.Errorf("Setup of a template without topics: %v, want a request to name them", err)
	}
	if _, err := kafka.Setup(t.Context(), templated, kafka.SetupConfig{Topics: []string{"other.order"}}); err == nil {
		t.Error("Setup of a topic the template cannot produce succeeded")
	}
	steps, err := kafka.Setup(t.Context(), templated, kafka.SetupConfig{Topics: []string{"outbox.order", "outbox.payment"}})
	if err != nil || len(steps) != 2 {
		t.Errorf("Setup of two topics of the template = %+v, %v", steps, err)
	}
	if _, err := kafka.Setup(t.Context(), templated, kafka.SetupConfig{Topics: []string{"outbox.five"}, ReplicationFactor: 5}); err == nil || !strings.Contains(err.Error(), "the cluster has 3") {
		t.Errorf("Setup with replication factor 5 on 3 brokers: %v, want a refusal naming the brokers", err)
	}
}
