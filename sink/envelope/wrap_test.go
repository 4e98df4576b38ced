package envelope_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/envelope"
)

func TestParseKindRoundTrips(t *testing.T) {
	for _, k := range []envelope.Kind{envelope.Raw, envelope.Standard, envelope.CloudEvents, envelope.CloudEventsBinary} {
		got, err := envelope.ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", k.String(), got, err, k)
		}
	}
	if k, err := envelope.ParseKind(""); err != nil || k != envelope.Raw {
		t.Errorf(`ParseKind("") = %v, %v; want raw`, k, err)
	}
	for _, name := range []string{"CloudEvents", "binary", "raw ", "cloudevents_binary", "standard-webhooks"} {
		if _, err := envelope.ParseKind(name); err == nil || !strings.Contains(err.Error(), "raw, standard, cloudevents, cloudevents-binary") {
			t.Errorf("ParseKind(%q): %v, want an error listing the envelopes", name, err)
		}
	}
	if s := envelope.Kind(9).String(); s != "Kind(9)" {
		t.Errorf("Kind(9).String() = %q", s)
	}
}

func TestRawIsTheSinkItself(t *testing.T) {
	next := &recorder{}
	s, err := envelope.Wrap(next, envelope.Config{Source: "not a URI reference"}) // Raw reads no Source
	if err != nil || s != sink.Sink(next) {
		t.Fatalf("Wrap(raw) = %v, %v; want the sink itself", s, err)
	}
}

// The source must be a non-empty URI-reference (RFC 3986); empty is
// SourceDefault.
func TestSource(t *testing.T) {
	for _, source := range []string{
		"", "/postbox", "https://shop.example/orders", "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
		"mailto:cncf-wg-serverless@lists.cncf.io", "/cloudevents/spec/pull/123", "http://[::1]:8080/x?q=1#f",
		"relative/path", "/a%20b", "tag:shop.example,2026:orders",
	} {
		if _, err := envelope.Wrap(&recorder{}, envelope.Config{Kind: envelope.CloudEvents, Source: source}); err != nil {
			t.Errorf("source %q: %v", source, err)
		}
	}
	for _, source := range []string{
		"with space", "/a%zz", "/a%2", "/a#b#c", "/x[1]", ":nothing", "1a:b", "/\u00e9", "/a\nb", "/a\"b", "/a<b>", "/a\\b", "/a{b}", "http://[::1/x",
	} {
		_, err := envelope.Wrap(&recorder{}, envelope.Config{Kind: envelope.CloudEventsBinary, Source: source})
		if err == nil || !strings.Contains(err.Error(), "CloudEvents source") {
			t.Errorf("source %q: %v, want it refused", source, err)
		}
	}
}

// The NATS binding (1.0.2) defines structured mode only: binary mode over
// NATS is refused, whether Config.Binding or the sink says NATS.
func TestBinaryOverNATSIsRefused(t *testing.T) {
	for _, c := range []struct {
		system  string
		binding envelope.Binding
	}{{"nats", envelope.NATS}, {"nats", envelope.HTTP}, {"custom", envelope.NATS}} {
		_, err := envelope.Wrap(&recorder{system: c.system}, envelope.Config{Kind: envelope.CloudEventsBinary, Binding: c.binding})
		if err == nil || !strings.Contains(err.Error(), "NATS protocol binding") || !strings.Contains(err.Error(), "structured mode only") {
			t.Errorf("binary over %s with binding %s: %v", c.system, c.binding, err)
		}
	}
	if _, err := envelope.Wrap(&recorder{system: "nats"}, envelope.Config{Kind: envelope.CloudEvents, Binding: envelope.NATS}); err != nil {
		t.Errorf("structured over NATS: %v", err)
	}
}

// A binding that is not the one the sink speaks is refused, naming the
// right one; a sink of a system BindingFor does not know takes the
// Config's.
func TestBindingMustBeTheSinks(t *testing.T) {
	for system, want := range map[string]envelope.Binding{"webhook": envelope.HTTP, "kafka": envelope.Kafka, "rabbitmq": envelope.AMQP} {
		for _, b := range []envelope.Binding{envelope.HTTP, envelope.Kafka, envelope.AMQP} {
			_, err := envelope.Wrap(&recorder{system: system}, envelope.Config{Kind: envelope.CloudEventsBinary, Binding: b})
			if b == want && err != nil {
				t.Errorf("%s sink, binding %s: %v", system, b, err)
			}
			if b != want && (err == nil || !strings.Contains(err.Error(), "set Config.Binding to "+want.String())) {
				t.Errorf("%s sink, binding %s: %v, want it refused, naming %s", system, b, err, want)
			}
		}
	}
	if _, err := envelope.Wrap(&recorder{system: "custom"}, envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.Kafka}); err != nil {
		t.Errorf("custom sink, binding kafka: %v", err)
	}
}

func TestUnknownKindOrBindingIsRefused(t *testing.T) {
	if _, err := envelope.Wrap(&recorder{}, envelope.Config{Kind: envelope.Kind(7)}); err == nil || !strings.Contains(err.Error(), "Kind(7)") {
		t.Errorf("Kind(7): %v", err)
	}
	if _, err := envelope.Wrap(&recorder{}, envelope.Config{Kind: envelope.CloudEventsBinary, Binding: envelope.Binding(-1)}); err == nil || !strings.Contains(err.Error(), "Binding(-1)") {
		t.Errorf("Binding(-1): %v", err)
	}
	if _, err := envelope.Wrap(nil, envelope.Config{Kind: envelope.Standard}); err == nil {
		t.Error("Wrap(nil) returned no error")
	}
}

// closingSink is a recorder that is an io.Closer.
type closingSink struct {
	recorder
	closed atomic.Int32
}

func (c *closingSink) Close() error {
	c.closed.Add(1)
	return errors.New("closed")
}

// batchSink is a recorder that is a sink.BatchSink, failing the messages
// whose payload is "fail".
type batchSink struct {
	recorder
	batches [][]*sink.Message
}

func (b *batchSink) PublishBatch(ctx context.Context, msgs []*sink.Message, errs []error) {
	b.batches = append(b.batches, msgs)
	for i, m := range msgs {
		if string(m.Payload) == `{"data":"fail"}` || string(m.Payload) == `"fail"` {
			errs[i] = errors.New("the destination refused it")
			continue
		}
		errs[i] = b.Publish(ctx, m)
	}
}

// closingBatchSink is both.
type closingBatchSink struct {
	batchSink
	closed atomic.Int32
}

func (c *closingBatchSink) Close() error {
	c.closed.Add(1)
	return nil
}

// The wrapper is an io.Closer and a sink.BatchSink exactly when the sink
// it wraps is, and forwards Close; String and Destination are the
// sink's.
func TestWrapperKeepsTheSinksInterfaces(t *testing.T) {
	cases := []struct {
		next           sink.Sink
		closer, batchy bool
	}{
		{&recorder{system: "webhook"}, false, false},
		{&closingSink{recorder: recorder{system: "webhook"}}, true, false},
		{&batchSink{recorder: recorder{system: "webhook"}}, false, true},
		{&closingBatchSink{batchSink: batchSink{recorder: recorder{system: "webhook"}}}, true, true},
	}
	for _, c := range cases {
		for _, kind := range []envelope.Kind{envelope.Standard, envelope.CloudEvents, envelope.CloudEventsBinary} {
			s, err := envelope.Wrap(c.next, envelope.Config{Kind: kind})
			if err != nil {
				t.Fatal(err)
			}
			closer, isCloser := s.(io.Closer)
			_, isBatch := s.(sink.BatchSink)
			if isCloser != c.closer || isBatch != c.batchy {
				t.Errorf("%T in %s: closer %v batch %v, want %v %v", c.next, kind, isCloser, isBatch, c.closer, c.batchy)
			}
			if isCloser {
				before := closedCount(c.next)
				err := closer.Close()
				if closedCount(c.next) != before+1 {
					t.Errorf("%T in %s: Close was not forwarded", c.next, kind)
				}
				if _, ok := c.next.(*closingSink); ok && (err == nil || err.Error() != "closed") {
					t.Errorf("Close returned %v, want the sink's error", err)
				}
			}
			if s.String() != "recorder (envelope "+kind.String()+")" || s.Destination() != c.next.Destination() {
				t.Errorf("String %q, Destination %+v", s.String(), s.Destination())
			}
		}
	}
}

func closedCount(s sink.Sink) int32 {
	switch c := s.(type) {
	case *closingSink:
		return c.closed.Load()
	case *closingBatchSink:
		return c.closed.Load()
	}
	return 0
}

// In a batch, a message without an envelope fails alone; the others go to
// the sink in one batch, and each gets its own outcome back.
func TestPublishBatchFailsEachMessageAlone(t *testing.T) {
	next := &batchSink{recorder: recorder{system: "webhook"}}
	s, err := envelope.Wrap(next, envelope.Config{Kind: envelope.CloudEventsBinary})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []*sink.Message{
		message(postbox.Event{ID: postbox.NewID(), EventType: "ok", Payload: []byte(`{}`)}),
		message(postbox.Event{ID: postbox.NewID(), EventType: "bad\ntype", Payload: []byte(`{}`)}),
		message(postbox.Event{ID: postbox.NewID(), EventType: "ok", Payload: []byte(`"fail"`)}),
		message(postbox.Event{ID: postbox.NewID(), EventType: "ok", Payload: []byte(`[1]`)}),
	}
	errs := make([]error, len(msgs))
	s.(sink.BatchSink).PublishBatch(t.Context(), msgs, errs)
	if errs[0] != nil || errs[3] != nil {
		t.Errorf("the good messages failed: %v, %v", errs[0], errs[3])
	}
	isPermanent(t, errs[1], "control character U+000A")
	if errs[2] == nil || errs[2].Error() != "the destination refused it" {
		t.Errorf("message 2: %v, want the sink's own error", errs[2])
	}
	if len(next.batches) != 1 || len(next.batches[0]) != 3 {
		t.Fatalf("batches %v, want one of 3", next.batches)
	}
	for j, i := range []int{0, 2, 3} {
		if got := next.batches[0][j]; got.ID != msgs[i].ID || got.Headers["ce-id"] != msgs[i].ID.String() {
			t.Errorf("batch message %d is %s, want message %d in its envelope", j, got.ID, i)
		}
	}
	all := []*sink.Message{msgs[1]}
	errs = make([]error, 1)
	s.(sink.BatchSink).PublishBatch(t.Context(), all, errs)
	if len(next.batches) != 1 || errs[0] == nil {
		t.Errorf("a batch of only a bad message: %d batches, error %v; want none sent and its error", len(next.batches), errs[0])
	}
}
