package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/httpfault"
	"github.com/postbox-go/postbox/store/postgres"
)

// consumer is the receiving side of one destination: the inbox's webhook
// handler on a real HTTP server on 127.0.0.1, behind the injected consumer
// faults. Its business logic records each application of an event in the
// applied table, under the destination's number, with the sequence number
// of the event and the last one this destination applied before it for the
// same aggregate, so that the reconciliation counts applications and
// checks their order per destination.
type consumer struct {
	srv  *http.Server
	addr string

	// fault is the httpfault.Fault in force; perMillion the share of
	// requests it hits, in millionths.
	fault      atomic.Int64
	perMillion atomic.Int64
	// randomPerMillion is the share of the other requests that fail at
	// random (endpoints mode), in millionths.
	randomPerMillion int64

	mu         sync.Mutex
	deliveries map[uuid.UUID]int

	processed, duplicates atomic.Int64
}

// payload is the body of every event the suite produces.
type payload struct {
	Seq int64 `json:"seq"`
}

// startConsumer serves the inbox of s for destination dest (its number in
// the applied table); hold is how long a slow answer is held (past the
// relays' --timeout), randomFailures the share of requests (0 to 1) that
// fail at random besides the injected faults: see randomFaults.
func startConsumer(s *postgres.Store, tables tables, dest int, secret string, hold time.Duration, randomFailures float64, logger *slog.Logger) (*consumer, error) {
	c := &consumer{deliveries: map[uuid.UUID]int{}, randomPerMillion: int64(randomFailures * 1e6)}
	ib := inbox.New(s.Driver())
	apply := func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		var p payload
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			return inbox.Reject(fmt.Errorf("payload: %w", err))
		}
		var prev *int64
		if err := tx.QueryRow(ctx, tables.lastSeqForUpdate, dest, ev.AggregateID).Scan(&prev); err != nil && err != pgx.ErrNoRows {
			return err
		}
		if _, err := tx.Exec(ctx, tables.insertApplied, dest, ev.ID, ev.AggregateID, p.Seq, prev, time.Now()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, tables.upsertLastSeq, dest, ev.AggregateID, p.Seq); err != nil {
			return err
		}
		if httpfault.HandlerFails(ctx) {
			return httpfault.ErrInjected
		}
		return nil
	}
	handler, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets: []string{secret},
		Logger:  logger,
		Process: func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			out, err := ib.Process(ctx, ev, apply)
			switch {
			case err != nil:
			case out == inbox.Processed:
				c.processed.Add(1)
			case out == inbox.Duplicate:
				c.duplicates.Add(1)
			}
			return out, err
		},
	})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	c.addr = ln.Addr().String()
	c.srv = &http.Server{Handler: c.count(httpfault.Middleware(c.pick, hold, handler)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// inject puts fault in force on share (0 to 1) of the requests; None ends
// it.
func (c *consumer) inject(fault httpfault.Fault, share float64) {
	c.perMillion.Store(int64(share * 1e6))
	c.fault.Store(int64(fault))
}

// randomFaults are the failures of endpoints mode's random share of
// requests, picked in turn at random: an error answer, a handler that
// fails after the inbox insert, and an event applied whose answer is lost
// (the sender retries it: a duplicate for the inbox to absorb).
var randomFaults = []httpfault.Fault{httpfault.ServerError, httpfault.HandlerFailure, httpfault.DropAfter}

// pick is the fault of one request: the injected fault on its share, or
// else a random failure on the random share.
func (c *consumer) pick() httpfault.Fault {
	if f := httpfault.Fault(c.fault.Load()); f != httpfault.None && rand.Int64N(1e6) < c.perMillion.Load() {
		return f
	}
	if c.randomPerMillion > 0 && rand.Int64N(1e6) < c.randomPerMillion {
		return randomFaults[rand.IntN(len(randomFaults))]
	}
	return httpfault.None
}

// count counts the requests that reach the consumer, per event id.
func (c *consumer) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, err := uuid.Parse(r.Header.Get("webhook-id")); err == nil {
			c.mu.Lock()
			c.deliveries[id]++
			c.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

// deliveriesOf returns the number of requests that reached the consumer
// for each event.
func (c *consumer) deliveriesOf() map[uuid.UUID]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[uuid.UUID]int, len(c.deliveries))
	for id, n := range c.deliveries {
		out[id] = n
	}
	return out
}

func (c *consumer) close() { _ = c.srv.Close() }
