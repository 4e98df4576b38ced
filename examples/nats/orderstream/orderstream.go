// Package orderstream is the JetStream side the NATS examples share: the
// stream ORDERS that the relay publishes the shop's events into, as
// "orders.<event type>", with a duplicate window that absorbs the relay's
// retries.
package orderstream

import (
	"context"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// Stream is the stream's name.
	Stream = "ORDERS"
	// SubjectTemplate is the relay's subject template: postbox relay
	// --sink 'nats://127.0.0.1:4222?subject=orders.{event_type}'.
	SubjectTemplate = "orders.{event_type}"
	// Subjects are the subjects the stream captures.
	Subjects = "orders.>"
	// DuplicateWindow is how long the stream remembers a Nats-Msg-Id (the
	// event id): a relay's retry within it is stored once.
	DuplicateWindow = 2 * time.Minute
)

// Open connects to the NATS server at url as name, reconnecting forever,
// and makes sure the stream exists (Ensure). Close the connection when
// done.
func Open(ctx context.Context, url, name string) (*natsgo.Conn, jetstream.JetStream, error) {
	nc, err := natsgo.Connect(url, natsgo.Name(name), natsgo.Timeout(10*time.Second), natsgo.MaxReconnects(-1))
	if err != nil {
		return nil, nil, fmt.Errorf("connect to NATS: %w", err)
	}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = Ensure(ctx, js)
	}
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// Ensure creates the stream, or updates it to this configuration: the
// equivalent of
//
//	nats stream add ORDERS --subjects 'orders.>' --storage file --dupe-window 2m --defaults
func Ensure(ctx context.Context, js jetstream.JetStream) (jetstream.Stream, error) {
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       Stream,
		Subjects:   []string{Subjects},
		Storage:    jetstream.FileStorage,
		Duplicates: DuplicateWindow,
	})
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", Stream, err)
	}
	return st, nil
}
