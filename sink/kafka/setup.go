package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/postbox-go/postbox/sink"
)

// Defaults of the SetupConfig fields left zero.
const (
	// PartitionsDefault lets six consumers of a group share a topic; the
	// relay keys each record by its aggregate, so one aggregate's events
	// stay in one partition, in order.
	PartitionsDefault = 6
	// ReplicationFactorDefault keeps every record on three brokers; with
	// min.insync.replicas=2, which Setup sets then, an acknowledged
	// record (the sink asks acks=all) survives the loss of one broker.
	ReplicationFactorDefault = 3
)

// SetupConfig says how Setup creates topics.
type SetupConfig struct {
	// Topics are the topics to create. Default: the Config's topic, when
	// it is fixed; a topic template needs them named (the topics its
	// events will take), each beginning with the template's text before
	// its first placeholder.
	Topics []string
	// Partitions is each topic's partition count. Default
	// PartitionsDefault.
	Partitions int32
	// ReplicationFactor is each topic's number of replicas. Default
	// ReplicationFactorDefault; it cannot exceed the cluster's brokers.
	ReplicationFactor int16
	// DryRun changes nothing: Setup only reports what it would do (a step
	// Created is one it would create).
	DryRun bool
}

// SetupStep is what Setup did with one resource.
type SetupStep struct {
	// Resource names it: `topic "orders"`.
	Resource string
	// Created is false when it existed already (and was left unchanged).
	Created bool
	// Settings describes it.
	Settings string
}

// ErrDiffers is wrapped by Setup's error when a resource exists with
// settings that differ from those asked; Setup changes nothing then.
var ErrDiffers = errors.New("exists with different settings; not changed")

// Setup creates the topics a Sink of cfg publishes to, with the partitions
// and replication factor s asks. A topic that exists with them is left as
// it is and reported as not created; one with another partition count or
// replication factor is reported in an error wrapping ErrDiffers, and no
// topic is created then.
func Setup(ctx context.Context, cfg Config, s SetupConfig) ([]SetupStep, error) {
	cfg = cfg.withDefaults()
	topics, err := setupTopics(cfg.Topic, s.Topics)
	if err != nil {
		return nil, err
	}
	if s.Partitions < 0 || s.ReplicationFactor < 0 {
		return nil, errors.New("kafka: SetupConfig.Partitions and ReplicationFactor may not be negative")
	}
	if s.Partitions == 0 {
		s.Partitions = PartitionsDefault
	}
	if s.ReplicationFactor == 0 {
		s.ReplicationFactor = ReplicationFactorDefault
	}
	opts := clientOptions(cfg, 0)
	client, err := kgo.NewClient(append(opts[:len(opts):len(opts)], kgo.ClientID("postbox-sink-setup"))...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	admin := kadm.NewClient(client)
	meta, err := admin.Metadata(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("kafka: no broker of %s answers: %w", strings.Join(cfg.Brokers, ","), err)
	}
	steps, missing, err := existingTopics(meta.Topics, topics, s)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 && len(meta.Brokers) < int(s.ReplicationFactor) {
		return nil, fmt.Errorf("kafka: replication factor %d needs as many brokers; the cluster has %d (ask for %d or fewer)", s.ReplicationFactor, len(meta.Brokers), len(meta.Brokers))
	}
	for _, topic := range missing {
		if s.DryRun {
			steps = append(steps, SetupStep{Resource: fmt.Sprintf("topic %q", topic), Created: true, Settings: describeTopic(s.Partitions, s.ReplicationFactor)})
			continue
		}
		resp, err := admin.CreateTopic(ctx, s.Partitions, s.ReplicationFactor, topicConfigs(s.ReplicationFactor), topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: create topic %q: %w", topic, err)
		}
		steps = append(steps, SetupStep{Resource: fmt.Sprintf("topic %q", topic), Created: true, Settings: describeTopic(s.Partitions, s.ReplicationFactor)})
	}
	return steps, nil
}

// setupTopics returns the topics to create: those named, or the fixed
// topic of template.
func setupTopics(template string, named []string) ([]string, error) {
	t, err := sink.ParseTemplate(template)
	if err != nil {
		return nil, fmt.Errorf("kafka: topic: %w", err)
	}
	if len(named) == 0 {
		if !t.IsFixed() {
			return nil, fmt.Errorf("kafka: topic template %s names a topic per event: name the topics to create (the topics its events take)", template)
		}
		return []string{template}, nil
	}
	head, _, _ := strings.Cut(template, "{")
	for _, topic := range named {
		if !strings.HasPrefix(topic, head) || strings.ContainsAny(topic, "{} ") || topic == "" {
			return nil, fmt.Errorf("kafka: topic %q cannot come from the template %s", topic, template)
		}
	}
	return named, nil
}

// existingTopics returns a step for each of topics that exists as s asks,
// the topics that do not exist, or an error naming each that differs.
func existingTopics(details kadm.TopicDetails, topics []string, s SetupConfig) ([]SetupStep, []string, error) {
	var (
		steps    []SetupStep
		missing  []string
		problems []string
	)
	for _, topic := range topics {
		d, ok := details[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, topic)
			continue
		case d.Err != nil:
			return nil, nil, fmt.Errorf("kafka: topic %q: %w", topic, d.Err)
		}
		partitions, replicas := int32(len(d.Partitions)), int16(0)
		for _, p := range d.Partitions {
			replicas = max(replicas, int16(len(p.Replicas)))
		}
		if partitions != s.Partitions || replicas != s.ReplicationFactor {
			problems = append(problems, fmt.Sprintf("topic %q has %s, not the %s asked", topic, describeTopic(partitions, replicas), describeTopic(s.Partitions, s.ReplicationFactor)))
			continue
		}
		steps = append(steps, SetupStep{Resource: fmt.Sprintf("topic %q", topic), Settings: describeTopic(partitions, replicas)})
	}
	if len(problems) > 0 {
		return nil, nil, fmt.Errorf("kafka: %w: %s", ErrDiffers, strings.Join(problems, "; "))
	}
	return steps, missing, nil
}

// topicConfigs sets min.insync.replicas to 2 for three replicas or more,
// so that an acks=all record is on two brokers at least.
func topicConfigs(replicationFactor int16) map[string]*string {
	if replicationFactor < 3 {
		return nil
	}
	two := strconv.Itoa(2)
	return map[string]*string{"min.insync.replicas": &two}
}

func describeTopic(partitions int32, replicationFactor int16) string {
	return fmt.Sprintf("%d partitions, replication factor %d", partitions, replicationFactor)
}
