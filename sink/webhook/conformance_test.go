package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/postboxtest/sinktest"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink/webhook"
)

func TestConformance(t *testing.T) {
	sinktest.Run(t, sinktest.Harness{
		New: func(t *testing.T) sinktest.Destination {
			r := newReceiver(t)
			const limit = 64 << 10
			s := newSink(t, webhook.Config{URL: r.URL, MaxMessageBytes: limit})
			return sinktest.Destination{Sink: s, Received: r.received, MaxPayload: limit}
		},
		Features: sinktest.Features{OrderedPerAggregate: true, CarriesHeaders: true},
		Refused: []sinktest.Header{
			{Name: "Authorization", Value: "Bearer forged"},
			{Name: "Proxy-Authorization", Value: "Basic Zm9yZ2Vk"},
			{Name: "Cookie", Value: "session=forged"},
			{Name: "Transfer-Encoding", Value: "chunked"},
			{Name: "X-Injected", Value: "v\r\nX-Forged: 1"},
			{Name: "X-Nul", Value: "v\x00w"},
			{Name: "with space", Value: "v"},
		},
	})
}

// receiver is a webhook endpoint as a partner would write it: it verifies
// each request with package signature, answers 401 to what fails, and keeps
// what passes.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []sinktest.Delivery
}

func newReceiver(t *testing.T) *receiver {
	v, err := signature.NewVerifier(signature.Standard, 0, testSecret)
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		id, _, err := v.Verify(req.Header, body)
		if err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		headers := map[string]string{}
		for name := range req.Header {
			headers[name] = req.Header.Get(name)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, sinktest.Delivery{
			ID:          uuid.MustParse(id),
			EventType:   req.Header.Get("Postbox-Event-Type"),
			AggregateID: req.Header.Get("Postbox-Aggregate-Id"),
			Payload:     body,
			Headers:     headers,
		})
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) received() []sinktest.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}
