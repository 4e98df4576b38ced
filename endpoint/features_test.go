package endpoint_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

// recorded is one request an endpoint's server got.
type recorded struct {
	header http.Header
	body   []byte
}

// recorder is an endpoint's server that keeps every request and answers
// 204.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recorded
}

func newRecorder(t *testing.T) *recorder {
	r := &recorder{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{req.Header.Clone(), body})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *recorder) got() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.reqs)
}

// outboxAndEndpoints is a store's driver as these tests use it.
type outboxAndEndpoints interface {
	store.Outbox
	store.Endpoints
	Enqueue(ctx context.Context, events ...postbox.Event) error
}

// Each endpoint gets only the events its types and its CEL filter want, in
// its envelope, signed under its profile, with its own authentication and
// static headers; an endpoint whose stored filter does not compile, or
// whose secrets were sealed by a key the relay lacks, gets nothing, says so
// once, and costs the others nothing.
func TestEndpointFiltersEnvelopesProfilesAndAuthShapeEachDelivery(t *testing.T) {
	t.Parallel()
	bothEndpointStores(t, func(t *testing.T, es store.Endpoints) {
		s := es.(outboxAndEndpoints)
		ctx := context.Background()
		big, orders, broken, lost := newRecorder(t), newRecorder(t), newRecorder(t), newRecorder(t)
		add := func(k *keyring.Keyring, e store.Endpoint, c endpoint.Credentials) store.Endpoint {
			t.Helper()
			e.Concurrency = 2
			if err := endpoint.Seal(k, &e, c); err != nil {
				t.Fatal(err)
			}
			e, err := s.EndpointCreate(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		bigSecret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("big-orders-signing-key-32-bytes!"))
		add(testKeyring, store.Endpoint{Name: "big", URL: big.URL, Filter: `payload.total > 100`, Envelope: "standard", Signature: "svix"},
			endpoint.Credentials{Secret: bigSecret, Bearer: "tok-big", Headers: map[string]string{"X-Api-Key": "hk-big"}})
		add(testKeyring, store.Endpoint{Name: "orders", URL: orders.URL, Types: []string{"order.*"}, Envelope: "cloudevents;source=/shop"},
			endpoint.Credentials{Secret: secret, Basic: &endpoint.BasicAuth{User: "shop", Password: "pw-orders"}})
		add(testKeyring, store.Endpoint{Name: "broken", URL: broken.URL, Filter: `payload.(`}, endpoint.Credentials{Secret: secret})
		add(mustKeyring(t, keyring.GenerateKey()), store.Endpoint{Name: "lost", URL: lost.URL}, endpoint.Credentials{Secret: secret})

		var logs logbuf.Buffer
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		sup := startSupervisor(t, s, func(c *endpoint.SupervisorConfig) { c.Logger, c.Relay.Logger = log, log })
		events := []postbox.Event{
			{AggregateType: "order", AggregateID: "1", EventType: "order.created", Payload: []byte(`{"total": 150}`)},
			{AggregateType: "order", AggregateID: "2", EventType: "order.created", Payload: []byte(`{"total": 50}`)},
			{AggregateType: "payment", AggregateID: "3", EventType: "payment.captured", Payload: []byte(`{"total": 1e3}`)},
			{AggregateType: "payment", AggregateID: "4", EventType: "payment.captured", Payload: []byte(`[1, 2]`)},
		}
		for i := range events {
			events[i].ID = uuid.Must(uuid.NewV7())
		}
		if err := s.Enqueue(ctx, events...); err != nil {
			t.Fatal(err)
		}
		startRelay(t, s, sup.FanOut(), nil)
		waitFor(t, 20*time.Second, "big got 2 events and orders 2", func() bool { return len(big.got()) >= 2 && len(orders.got()) >= 2 })
		// Anything more would have come with these: give the lanes a moment.
		time.Sleep(300 * time.Millisecond)

		// big: total > 100 (events 0 and 2), event 3's array payload fails
		// its filter (an error: no match, counted).
		verifier, err := signature.NewProfileVerifier(signature.Svix, time.Minute, bigSecret)
		if err != nil {
			t.Fatal(err)
		}
		var bigIDs []uuid.UUID
		for _, r := range big.got() {
			if got := r.header.Get("Authorization"); got != "Bearer tok-big" {
				t.Errorf("big: Authorization %q, want its bearer token", got)
			}
			if got := r.header.Get("X-Api-Key"); got != "hk-big" {
				t.Errorf("big: X-Api-Key %q, want its static header", got)
			}
			id, _, err := verifier.Verify(r.header, r.body)
			if err != nil {
				t.Errorf("big: the svix-* signature does not verify: %v", err)
			}
			var env struct {
				Type      string          `json:"type"`
				Timestamp time.Time       `json:"timestamp"`
				Data      json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(r.body, &env); err != nil || env.Type == "" || env.Timestamp.IsZero() || len(env.Data) == 0 {
				t.Errorf("big: body %s is not a Standard Webhooks envelope", r.body)
			}
			bigIDs = append(bigIDs, uuid.MustParse(id))
		}
		if want := []uuid.UUID{events[0].ID, events[2].ID}; !sameIDs(bigIDs, want) {
			t.Errorf("big got %v, want %v (total > 100)", bigIDs, want)
		}

		// orders: order.* only, in CloudEvents structured mode, Basic auth.
		var orderIDs []uuid.UUID
		for _, r := range orders.got() {
			if u, p, ok := (&http.Request{Header: r.header}).BasicAuth(); !ok || u != "shop" || p != "pw-orders" {
				t.Errorf("orders: Basic credentials %q/%q, want shop's", u, p)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/cloudevents+json") {
				t.Errorf("orders: Content-Type %q, want CloudEvents structured", ct)
			}
			var ce struct {
				SpecVersion string          `json:"specversion"`
				ID          string          `json:"id"`
				Source      string          `json:"source"`
				Type        string          `json:"type"`
				Data        json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(r.body, &ce); err != nil || ce.SpecVersion != "1.0" || ce.Source != "/shop" || ce.Type != "order.created" {
				t.Errorf("orders: body %s is not the CloudEvent wanted", r.body)
				continue
			}
			orderIDs = append(orderIDs, uuid.MustParse(ce.ID))
		}
		if want := []uuid.UUID{events[0].ID, events[1].ID}; !sameIDs(orderIDs, want) {
			t.Errorf("orders got %v, want %v", orderIDs, want)
		}

		if n := len(broken.got()) + len(lost.got()); n != 0 {
			t.Errorf("the endpoints with a broken filter or a lost key got %d requests, want none", n)
		}
		st := sup.Stats()
		if st.Filtered != 1 || st.FilterErrors != 1 {
			t.Errorf("filtered %d, filter errors %d; want 1 (total 50) and 1 (an array payload)", st.Filtered, st.FilterErrors)
		}
		out := logs.String()
		if n := strings.Count(out, "endpoint filter does not compile"); n != 1 {
			t.Errorf("the broken filter was logged %d times, want once:\n%s", n, out)
		}
		for _, leak := range []string{"tok-big", "hk-big", "pw-orders", strings.TrimPrefix(bigSecret, "whsec_"), strings.TrimPrefix(secret, "whsec_")} {
			if strings.Contains(out, leak) {
				t.Errorf("a secret reached the logs: %q", leak)
			}
		}
	})
}

// sameIDs reports whether a and b hold the same ids, in any order.
func sameIDs(a, b []uuid.UUID) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	cmp := func(p, q uuid.UUID) int { return strings.Compare(p.String(), q.String()) }
	slices.SortFunc(x, cmp)
	slices.SortFunc(y, cmp)
	return slices.Equal(x, y)
}
