package envelope_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
)

// recorder is a sink that keeps what it is given.
type recorder struct {
	system string
	mu     sync.Mutex
	got    []*sink.Message
}

func (r *recorder) Publish(_ context.Context, m *sink.Message) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, m)
	return nil
}

func (r *recorder) String() string { return "recorder" }

func (r *recorder) Destination() sink.Destination {
	return sink.Destination{System: r.system, Name: "recorder"}
}

func (r *recorder) messages() []*sink.Message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// last returns the last message r was given.
func (r *recorder) last(t *testing.T) *sink.Message {
	t.Helper()
	got := r.messages()
	if len(got) == 0 {
		t.Fatal("the sink was given no message")
	}
	return got[len(got)-1]
}

// received is what a CloudEvents SDK receiver made of one request.
type received struct {
	encoding binding.Encoding
	event    *event.Event
	header   http.Header
}

// httpSink is a sink that posts each message as the webhook sink does
// (body = Payload, Content-Type = ContentType, JSON when empty, the
// message's headers and the Postbox-* headers) to an httptest server whose
// handler reads it with the CloudEvents SDK's HTTP protocol binding.
type httpSink struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []received
}

func newHTTPSink(t *testing.T) *httpSink {
	s := &httpSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := cehttp.NewMessageFromHttpRequest(r)
		enc := msg.ReadEncoding()
		ev, err := binding.ToEvent(r.Context(), msg)
		if err != nil {
			http.Error(w, "decoding: "+err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.got = append(s.got, received{encoding: enc, event: ev, header: r.Header.Clone()})
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *httpSink) Publish(ctx context.Context, m *sink.Message) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, bytes.NewReader(m.Payload))
	if err != nil {
		return err
	}
	for name, value := range m.Headers {
		req.Header.Set(name, value)
	}
	ct := m.ContentType
	if ct == "" {
		ct = postbox.ContentTypeJSON
	}
	req.Header.Set(postbox.HeaderContentType, ct)
	req.Header.Set(postbox.HeaderEventType, m.EventType)
	req.Header.Set(postbox.HeaderAttempt, strconv.Itoa(m.Attempt))
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	return nil
}

func (s *httpSink) String() string { return "http " + s.srv.URL }

func (s *httpSink) Destination() sink.Destination {
	return sink.Destination{System: "webhook", Name: s.srv.URL}
}

// last returns what the receiver made of the last request.
func (s *httpSink) last(t *testing.T) received {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.got) == 0 {
		t.Fatal("the receiver got no event")
	}
	return s.got[len(s.got)-1]
}

// testEvent is an event of the table the envelopes are tested over.
type testEvent struct {
	name  string
	event postbox.Event
}

// largePayload is a JSON object of about n bytes.
func largePayload(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"items": [`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"n": %d, "name": "item %d \u00e9\u20ac", "tags": ["<a>", "b&c"]}`, i, i)
	}
	b.WriteString("]}")
	return b.Bytes()
}

// testEvents is the table: UUIDv7 and v4 ids, with and without an
// aggregate, ASCII and Unicode types, and payloads of every JSON shape,
// with whitespace, HTML characters and escapes (which a re-encoding would
// change) and a large one.
func testEvents() []testEvent {
	ev := func(id uuid.UUID, eventType, aggregateType, aggregateID, payload string) postbox.Event {
		return postbox.Event{
			ID: id, EventType: eventType, AggregateType: aggregateType, AggregateID: aggregateID, Payload: []byte(payload),
			Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}
	}
	return []testEvent{
		{"v7 object", ev(postbox.NewID(), "order.created", "order", "42", `{"order_id": 42, "items": [1, 2]}`)},
		{"v4 array", ev(uuid.New(), "order.created", "order", "42", `[1, "two", {"three": 3.0e0}]`)},
		{"no aggregate", ev(postbox.NewID(), "ping", "", "", `{}`)},
		{"unicode type", ev(postbox.NewID(), "commande.créée", "コマンド", "Ünïcode 42 \"quoted\" 100%", `{"name": "Zoë 😀"}`)},
		{"spec's header example", ev(uuid.New(), "Euro € 😀", "a b", "x", `{"a": 1}`)},
		{"number", ev(postbox.NewID(), "n", "order", "1", `-0.5e-300`)},
		{"string", ev(postbox.NewID(), "s", "order", "1", `"just a string \u00e9"`)},
		{"null", ev(uuid.New(), "z", "order", "1", `null`)},
		{"true", ev(postbox.NewID(), "b", "order", "1", `true`)},
		{"whitespace", ev(postbox.NewID(), "w", "order", "1", "  {\n\t\"a\" :  1 ,\"b\":[ ] }\r\n")},
		{"html and escapes", ev(postbox.NewID(), "h", "order", "1", `{"html": "<b>&amp;</b>", "esc": "\u00e9\n\"\\\/", "big": 123456789012345678901234567890}`)},
		{"large", ev(postbox.NewID(), "order.imported", "order", "7", string(largePayload(1<<20)))},
	}
}

// message is the message of e, a first attempt, with a deep copy of its
// headers and payload, so that a test can tell whether the envelope
// changed them.
func message(e postbox.Event) *sink.Message {
	e.Headers = maps.Clone(e.Headers)
	e.Payload = bytes.Clone(e.Payload)
	return &sink.Message{Event: e, Attempt: 1}
}

// unchanged fails t when m is not what message made of e.
func unchanged(t *testing.T, m *sink.Message, e postbox.Event) {
	t.Helper()
	if !bytes.Equal(m.Payload, e.Payload) || !maps.Equal(m.Headers, e.Headers) || m.ContentType != "" {
		t.Errorf("the caller's message changed: payload %d bytes, headers %v, content type %q", len(m.Payload), m.Headers, m.ContentType)
	}
}

// checkTime fails t when got is not the time the envelope of the event of
// id, published between before and after, must carry: the id's own for a
// UUIDv7, and for others a time between the two (truncated to the
// microsecond).
func checkTime(t *testing.T, got time.Time, id uuid.UUID, before, after time.Time) {
	t.Helper()
	if id.Version() == 7 {
		sec, nsec := id.Time().UnixTime()
		if want := time.Unix(sec, nsec); !got.Equal(want) {
			t.Errorf("time %v, want the UUIDv7's %v", got, want)
		}
		return
	}
	if got.Before(before.Truncate(time.Microsecond)) || got.After(after) {
		t.Errorf("time %v of a v4 id, want the publish's, between %v and %v", got, before, after)
	}
}

// isPermanent fails t when err is not a sink.Permanent error saying want.
func isPermanent(t *testing.T, err error, want string) {
	t.Helper()
	var e *sink.Error
	if !errors.As(err, &e) || e.Kind != sink.Permanent || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want a Permanent sink.Error saying %q", err, want)
	}
}
