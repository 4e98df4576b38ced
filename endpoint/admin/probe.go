package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// TestEventType is the type of the event Test sends.
const TestEventType = "postbox.test"

// Test sends a test event (type postbox.test, aggregate "endpoint" and
// the endpoint's id, payload {"test":true}) to endpoint id now, through
// its own sink (its secrets opened with the keyring, its headers,
// authentication, signature profile and envelope), and says how it went;
// timeout (TestTimeoutDefault when not above zero) bounds the request,
// or the broker's connection and acknowledgement. A webhook's request
// goes through Config.Client's client. An event that does not get through
// is a *TestError.
func (a *Admin) Test(ctx context.Context, id uuid.UUID, timeout time.Duration) (Tested, error) {
	if timeout <= 0 {
		timeout = TestTimeoutDefault
	}
	e, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return Tested{}, notFound(id, err)
	}
	if e.Sealed.Data != nil && a.cfg.Keyring == nil {
		return Tested{}, endpoint.ErrNoKeyring
	}
	client, err := a.testClient(e, timeout)
	if err != nil {
		return Tested{}, err
	}
	start := time.Now()
	cfg := endpoint.SinkConfig{Webhook: webhook.Config{Timeout: timeout}, Client: func(store.Endpoint) *http.Client { return client },
		Kinds: a.cfg.Kinds, Logger: slog.New(slog.DiscardHandler), Keyring: a.cfg.Keyring}
	ev := postbox.Event{ID: postbox.NewID(), EventType: TestEventType, AggregateType: "endpoint",
		AggregateID: e.ID.String(), Payload: []byte(`{"test":true}`)}
	failed := func(opened bool, err error) error {
		return &TestError{EventID: ev.ID, Duration: time.Since(start).Round(time.Millisecond), URL: sink.Redact(e.URL), Opened: opened, Err: err}
	}
	own, err := endpoint.OpenSink(ctx, cfg, e, a.now())
	if err != nil {
		return Tested{}, failed(false, err)
	}
	if c, ok := own.(io.Closer); ok {
		defer c.Close()
	}
	if err := own.Publish(ctx, &sink.Message{Event: ev, Attempt: 1}); err != nil {
		return Tested{}, failed(true, err)
	}
	return Tested{EventID: ev.ID, Duration: time.Since(start)}, nil
}

// testClient is the client of Test's request: Config.Client's, or one
// behind the SSRF guard that allows private addresses only to an
// endpoint with AllowPrivate.
func (a *Admin) testClient(e store.Endpoint, timeout time.Duration) (*http.Client, error) {
	if a.cfg.Client != nil {
		return a.cfg.Client(e, timeout)
	}
	g, err := guard.New(guard.Config{AllowPrivate: e.AllowPrivate, Allow: a.cfg.AllowCIDRs})
	if err != nil {
		return nil, err
	}
	return g.Client(timeout), nil
}
