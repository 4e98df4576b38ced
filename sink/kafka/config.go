package kafka

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/sink"
)

// Defaults of the Config fields left zero.
const (
	// TopicDefault is the topic template of Debezium's Outbox Event Router
	// (route.topic.replacement "outbox.event.${routedByValue}", routed by
	// the aggregate type), so that consumers of a Debezium pipeline read
	// postbox's records from the topics they know.
	TopicDefault = "outbox.event." + sink.PlaceholderAggregateType
	// TimeoutDefault bounds one publish: the wait for the produce's
	// acknowledgement, and a record's time in the producer's buffer.
	TimeoutDefault = 10 * time.Second
	// MaxBufferedRecordsDefault bounds the records waiting in the
	// producer; a publish beyond it waits for room.
	MaxBufferedRecordsDefault = 10_000
)

// SASL mechanisms, as the sasl URL option names them.
const (
	SASLPlain       = "plain"
	SASLScramSHA256 = "scram-sha-256"
	SASLScramSHA512 = "scram-sha-512"
)

// Config configures a Sink. Only Brokers is required; a zero field takes
// its default.
type Config struct {
	// Brokers are the seed brokers, HOST:PORT. Required.
	Brokers []string
	// Topic is the topic template (see sink.Template): a fixed topic, or
	// one chosen per event from its placeholders. Default TopicDefault,
	// Debezium's "outbox.event.{aggregate_type}".
	Topic string
	// TLS, when not nil, connects with TLS. ParseURL sets it for tls=true
	// and ca_file.
	TLS *tls.Config
	// SASL authenticates the connection when its Mechanism is set.
	SASL SASL
	// AllowAutoTopicCreation lets the brokers create a topic the sink
	// publishes to, when the cluster allows it. Off by default: a missing
	// topic is an error (at New for a fixed topic, at Publish for a
	// templated one).
	AllowAutoTopicCreation bool
	// Timeout bounds one publish (the relay's --timeout). Default
	// TimeoutDefault (10s).
	Timeout time.Duration
	// Linger is how long a partition's batch waits for more records before
	// it is sent. Default 0: at once. The records that arrive while a
	// produce request is in flight are gathered into the next one anyway,
	// and a publish waits for its acknowledgement, so a linger only adds
	// to each publish's time (franz-go's own default is 10ms).
	Linger time.Duration
	// MaxBufferedRecords bounds the records in the producer. Default
	// MaxBufferedRecordsDefault.
	MaxBufferedRecords int
	// MaxMessageBytes is the largest record batch produced (the
	// producer's batch size): a record that cannot fit alone in one (its
	// key, value and headers, plus a batch's 61-byte header) fails at
	// once, permanently, and is never sent. Default: what the cluster
	// accepts, read at start: a fixed topic's max.message.bytes, else a
	// broker's message.max.bytes, else (when the cluster does not say)
	// MessageMaxBytesDefault (1 MiB and 12 bytes, Kafka's default).
	MaxMessageBytes int
	// Logger receives the client's warnings and errors. Default: none.
	Logger *slog.Logger
}

// SASL is a mechanism and its credentials.
type SASL struct {
	// Mechanism is SASLPlain, SASLScramSHA256 or SASLScramSHA512; empty
	// means no authentication.
	Mechanism string
	User      string
	Password  string
}

// ParseURL parses a sink URL:
//
//	kafka://[USER:PASSWORD@]BROKER[,BROKER...][?OPTIONS]
//
// with the options
//
//	topic=TEMPLATE                  the topic template (default TopicDefault)
//	tls=true                        connect with TLS, verifying the brokers with the system's roots
//	ca_file=PATH                    verify the brokers with the PEM certificates in PATH (implies tls)
//	sasl=plain|scram-sha-256|scram-sha-512
//	                                authenticate with the URL's user and password
//	allow_auto_topic_creation=true  let the brokers create a missing topic
//	max_message_bytes=N             the largest record batch (Config.MaxMessageBytes)
//
// An unknown option, credentials without sasl, or sasl without credentials
// are errors. Errors never hold the password.
func ParseURL(rawURL string) (Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, errors.New("kafka: the sink URL does not parse (want kafka://BROKER[,BROKER]?topic=TEMPLATE)")
	}
	if u.Scheme != "kafka" {
		return Config{}, fmt.Errorf("kafka: sink URL scheme %q, want kafka", u.Scheme)
	}
	if u.Path != "" && u.Path != "/" {
		return Config{}, fmt.Errorf("kafka: sink URL %s: a path is not allowed (the topic is the topic option)", u.Redacted())
	}
	var cfg Config
	for b := range strings.SplitSeq(u.Host, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.Brokers = append(cfg.Brokers, b)
		}
	}
	if len(cfg.Brokers) == 0 {
		return Config{}, fmt.Errorf("kafka: sink URL %s names no broker", u.Redacted())
	}
	q := u.Query()
	var useTLS bool
	for name, values := range q {
		value := values[len(values)-1]
		switch name {
		case "topic":
			cfg.Topic = value
		case "tls":
			if useTLS, err = parseBool(name, value); err != nil {
				return Config{}, err
			}
		case "ca_file":
			useTLS = true
		case "sasl":
			cfg.SASL.Mechanism = strings.ToLower(value)
		case "allow_auto_topic_creation":
			if cfg.AllowAutoTopicCreation, err = parseBool(name, value); err != nil {
				return Config{}, err
			}
		case "max_message_bytes":
			if cfg.MaxMessageBytes, err = strconv.Atoi(value); err != nil || cfg.MaxMessageBytes <= batchOverhead {
				return Config{}, fmt.Errorf("kafka: sink URL option max_message_bytes=%q: want a number of bytes above %d", value, batchOverhead)
			}
		default:
			return Config{}, fmt.Errorf("kafka: sink URL option %q is unknown (want topic, tls, ca_file, sasl, allow_auto_topic_creation or max_message_bytes)", name)
		}
	}
	if useTLS {
		if cfg.TLS, err = tlsConfig(q.Get("ca_file")); err != nil {
			return Config{}, err
		}
	}
	if u.User != nil {
		cfg.SASL.User = u.User.Username()
		cfg.SASL.Password, _ = u.User.Password()
	}
	if err := cfg.SASL.validate(); err != nil {
		return Config{}, err
	}
	if _, err := sink.ParseTemplate(cfg.withDefaults().Topic); err != nil {
		return Config{}, fmt.Errorf("kafka: topic: %w", err)
	}
	return cfg, nil
}

func parseBool(name, value string) (bool, error) {
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Errorf("kafka: sink URL option %s=%q: want true or false", name, value)
	}
	return b, nil
}

// tlsConfig verifies the brokers with the certificates of caFile, or the
// system's roots when it is empty.
func tlsConfig(caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("kafka: ca_file: %w", err)
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kafka: ca_file %s holds no PEM certificate", caFile)
	}
	return c, nil
}

func (s SASL) validate() error {
	switch s.Mechanism {
	case "":
		if s.User != "" {
			return errors.New("kafka: credentials are given but no sasl mechanism (add sasl=plain, sasl=scram-sha-256 or sasl=scram-sha-512)")
		}
		return nil
	case SASLPlain, SASLScramSHA256, SASLScramSHA512:
		if s.User == "" || s.Password == "" {
			return fmt.Errorf("kafka: sasl=%s needs a user and a password (in the URL, or $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD)", s.Mechanism)
		}
		return nil
	}
	return fmt.Errorf("kafka: sasl=%q is unknown (want %s, %s or %s)", s.Mechanism, SASLPlain, SASLScramSHA256, SASLScramSHA512)
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.Topic == "" {
		c.Topic = TopicDefault
	}
	if c.Timeout == 0 {
		c.Timeout = TimeoutDefault
	}
	if c.MaxBufferedRecords == 0 {
		c.MaxBufferedRecords = MaxBufferedRecordsDefault
	}
	return c
}
