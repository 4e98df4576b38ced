package relay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

// Producers notify only while a relay dozes (PostgreSQL). With polling
// turned off in effect, commits that come in bursts, alone after a quiet
// moment, or while the relay goes to doze are all delivered: no wake-up is
// lost between a busy relay and a dozing one.
func TestNoWakeUpLostAroundDozing(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), PollInterval: time.Hour})
	ctx := context.Background()
	const producers, each = 6, 30
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			for i := range each {
				// Pauses from none to longer than a claim cycle, so
				// commits land while the relay claims, lingers, dozes
				// and waits.
				time.Sleep(time.Duration(rng.IntN(12)) * time.Millisecond)
				if err := s.Enqueue(ctx, ev(fmt.Sprint(p), i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rcv.WaitAccepted(t, producers*each, 10*time.Second)

	// Quiet, then events alone, each after the relay went back to doze:
	// each is notified.
	for i := range 20 {
		time.Sleep(time.Duration(10+i) * time.Millisecond)
		if err := s.Enqueue(ctx, ev("alone", i)); err != nil {
			t.Fatal(err)
		}
		rcv.WaitAccepted(t, producers*each+i+1, 5*time.Second)
	}
}

// An ordered relay on a PostgreSQL outbox without the index of ordered
// claims does not start: Run says what to run.
func TestOrderedRelayNeedsMigrateOrdered(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rl, err := relay.New(relay.Config{Store: s, Sink: newSink(t, "http://127.0.0.1:1", time.Second), Ordered: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = rl.Run(ctx)
	if !errors.Is(err, postgres.ErrOrderedIndexMissing) {
		t.Fatalf("Run: %v; want postgres.ErrOrderedIndexMissing", err)
	}
}

// Retries that fall due at different times are each attempted when due,
// not only the earliest: with polling off, the later one is delivered too.
func TestEveryScheduledRetryWakesTheRelay(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t).Driver()
	rcv := receiver.New(t, secret, func(w http.ResponseWriter, r *http.Request, d receiver.Delivery, n int) int {
		if n > 1 {
			return http.StatusOK
		}
		if d.AggregateID == "later" {
			w.Header().Set("Retry-After", "2")
		} else {
			w.Header().Set("Retry-After", "1")
		}
		return http.StatusServiceUnavailable
	})
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second),
		BackoffMin: 10 * time.Millisecond, BackoffMax: time.Minute, PollInterval: time.Hour})
	if err := s.Enqueue(context.Background(), ev("sooner", 1), ev("later", 1)); err != nil {
		t.Fatal(err)
	}
	rcv.WaitAccepted(t, 2, 8*time.Second)
}
