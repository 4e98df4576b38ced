package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/relaytest"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/store/postgres"
)

// The WAL tests stream from the test binary's throwaway cluster with
// wal_level = logical: its start overlaps the package's other tests.
func init() { pgtest.StartLogical() }

// walStore is a migrated store in WAL mode (no notify trigger) and its
// stream; the slot and the publication are dropped when the test ends.
func walStore(t *testing.T) (*postgres.Driver, *postgres.WAL) {
	t.Helper()
	s := pgtest.LogicalStore(t)
	if err := s.SetProducerNotify(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	return s.Driver(), pgtest.WAL(t, s)
}

// waitStreaming waits until a relay streams the slot.
func waitStreaming(t *testing.T, w *postgres.WAL) {
	t.Helper()
	waitFor(t, "a relay to stream "+w.String(), 10*time.Second, func() bool {
		st, err := w.State(context.Background())
		return err == nil && st.Active
	})
}

// insertSQL writes one event per transaction with the article's plain SQL
// insert, n events for each aggregate, the aggregates interleaved; it
// returns the server's WAL position once they are all committed.
func insertSQL(t *testing.T, s *postgres.Driver, aggregates []string, n int) pglogrepl.LSN {
	t.Helper()
	ctx := context.Background()
	insert := `insert into ` + s.Table("outbox_events") + `(aggregate_type, aggregate_id, event_type, payload) values ('order', $1, 'order.updated', $2)`
	for i := range n {
		for _, agg := range aggregates {
			b, _ := json.Marshal(payload{Agg: agg, N: i})
			if _, err := s.Pool().Exec(ctx, insert, agg, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	var end pglogrepl.LSN
	if err := s.Pool().QueryRow(ctx, "select pg_current_wal_lsn()").Scan(&end); err != nil {
		t.Fatal(err)
	}
	return end
}

func confirmedFlush(t *testing.T, s *postgres.Driver, w *postgres.WAL) pglogrepl.LSN {
	t.Helper()
	var lsn pglogrepl.LSN
	err := s.Pool().QueryRow(context.Background(),
		"select confirmed_flush_lsn from pg_replication_slots where slot_name = $1", w.Slot()).Scan(&lsn)
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

// streamOnly is Config.StreamBehindPoll for the tests that check what the
// stream alone delivers (and its commit order): the relay never looks for
// new events itself while the stream is behind, as it would when the
// package's other tests load the server.
const streamOnly = -1

// Plain-SQL inserts reach the sink through the slot alone (the poll is an
// hour away and no trigger notifies), in commit order per aggregate, and
// the slot is confirmed past them once they are recorded.
func TestWALDeliversPlainSQLInsertsInCommitOrder(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Stream: w, PollInterval: time.Hour, StreamBehindPoll: streamOnly})
	waitStreaming(t, w)

	aggregates := []string{"a", "b", "c", "d"}
	end := insertSQL(t, s, aggregates, 25)
	rcv.WaitAccepted(t, 100, 20*time.Second)
	waitFor(t, "the slot to be confirmed past the inserts", 10*time.Second, func() bool {
		return confirmedFlush(t, s, w) >= end
	})
	checkOrder(t, rcv.Accepted(), map[string]int{"a": 25, "b": 25, "c": 25, "d": 25})
	// The receiver's answer comes before the relay's settle, so the counts
	// are waited for, not read at once: a run under load once read 98 done
	// and 2 processing right after the slot was confirmed past the inserts
	// (cause not established: the stream confirms a batch after its settles
	// commit; nothing was lost or reordered).
	waitFor(t, "the 100 events settled done", 10*time.Second, func() bool {
		st := stats(t, s)
		return st.Done == 100 && st.Pending == 0 && st.Processing == 0
	})
}

// Batches streamed while earlier ones are still delivered (the stream
// pipelines them) keep each aggregate's commit order: with an endpoint
// that takes a few milliseconds, each at random, an event is sent only
// once the events of its aggregate in earlier batches are recorded.
func TestWALPipelinedBatchesKeepCommitOrder(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	rcv := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(time.Duration(rand.IntN(6000)) * time.Microsecond)
		return http.StatusOK
	})
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Stream: w, PollInterval: time.Hour, StreamBehindPoll: streamOnly})
	waitStreaming(t, w)

	end := insertSQL(t, s, []string{"a", "b", "c"}, 60)
	rcv.WaitAccepted(t, 180, 30*time.Second)
	waitFor(t, "the slot to be confirmed past the inserts", 10*time.Second, func() bool {
		return confirmedFlush(t, s, w) >= end
	})
	checkOrder(t, rcv.Accepted(), map[string]int{"a": 60, "b": 60, "c": 60})
}

// A first attempt that fails is settled as a retry in the table, and the
// polling claim delivers it.
func TestWALRetriesGoThroughTheTable(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	rcv := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, _ receiver.Delivery, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Stream: w,
		PollInterval: 50 * time.Millisecond, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond})
	waitStreaming(t, w)
	insertSQL(t, s, []string{"a"}, 1)
	rcv.WaitAccepted(t, 1, 10*time.Second)
	id := rcv.Accepted()[0].ID
	if n := rcv.Attempts(id); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	waitFor(t, "the event to be done", 5*time.Second, func() bool { return stats(t, s).Done == 1 })
}

// Only one relay streams the slot; a second one stands by and takes over
// when the first stops.
func TestWALStandbyTakesOver(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	rcv := receiver.New(t, secret, nil)
	cfg := relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Stream: w, PollInterval: time.Hour, StreamBehindPoll: streamOnly}
	first := cfg
	first.Owner = "first"
	stopFirst := start(t, first)
	waitStreaming(t, w)
	second := cfg
	second.Owner = "second"
	r := relaytest.Start(t, second)

	// Its first claim (at start) done, the standby polls no more: what
	// it delivers comes from the slot.
	waitFor(t, "the standby's first claim", 10*time.Second, r.Ready)
	insertSQL(t, s, []string{"a", "b"}, 5)
	rcv.WaitAccepted(t, 10, 10*time.Second)
	stopFirst()
	end := insertSQL(t, s, []string{"a", "b"}, 5)
	rcv.WaitAccepted(t, 20, 20*time.Second)
	waitFor(t, "the standby to confirm the slot", 10*time.Second, func() bool {
		return confirmedFlush(t, s, w) >= end
	})
	checkOrder(t, rcv.Accepted()[:10], map[string]int{"a": 5, "b": 5})
	checkOrder(t, rcv.Accepted()[10:], map[string]int{"a": 5, "b": 5})
	if got := r.Stats().Claimed; got != 10 {
		t.Fatalf("the standby claimed %d events, want the 10 written after the first relay stopped", got)
	}
}

// An event written before the relay streamed (no slot yet) is delivered
// by the polling claim.
func TestWALPollingTakesWhatTheStreamMissed(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	rcv := receiver.New(t, secret, nil)
	insertSQL(t, s, []string{"early"}, 3)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Stream: w, PollInterval: 50 * time.Millisecond})
	rcv.WaitAccepted(t, 3, 10*time.Second)
	waitFor(t, "the events to be done", 5*time.Second, func() bool { return stats(t, s).Done == 3 })
}

func TestWALRefusesOrdered(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	_, err := relay.New(relay.Config{Store: s, Sink: newSink(t, "http://127.0.0.1:1", time.Second), Stream: w, Ordered: true})
	if err == nil || !strings.Contains(err.Error(), "Ordered") {
		t.Fatalf("relay.New with Stream and Ordered: %v, want a refusal naming Ordered", err)
	}
}

// A row no event can be read from (a time of infinity, retries at the
// integer limit), streamed between good events, costs them nothing: they
// are delivered through the slot (the poll is an hour away) and the slot
// is confirmed past them all.
func TestWALHostileRowsCostTheStreamNothing(t *testing.T) {
	t.Parallel()
	s, w := walStore(t)
	pgtest.DropBounds(t, s.Store)
	rcv := receiver.New(t, secret, nil)
	start(t, relay.Config{Store: s, Sink: newSink(t, rcv.URL, 5*time.Second), Stream: w, PollInterval: time.Hour, StreamBehindPoll: streamOnly})
	waitStreaming(t, w)

	insertSQL(t, s, []string{"before"}, 2)
	for _, q := range []string{
		`insert into %s (event_type, payload, created_at) values ('order.updated', '{}', 'infinity')`,
		`insert into %s (event_type, payload, available_at) values ('order.updated', '{}', '-infinity')`,
		`insert into %s (event_type, payload, retries) values ('order.updated', '{}', 2147483647)`,
	} {
		if _, err := s.Pool().Exec(context.Background(), fmt.Sprintf(q, s.Table("outbox_events"))); err != nil {
			t.Fatal(err)
		}
	}
	end := insertSQL(t, s, []string{"after"}, 2)
	waitFor(t, "the good events delivered", 20*time.Second, func() bool {
		got := map[string]int{}
		for _, d := range rcv.Accepted() {
			var p payload
			if json.Unmarshal(d.Body, &p) == nil {
				got[p.Agg]++
			}
		}
		return got["before"] == 2 && got["after"] == 2
	})
	waitFor(t, "the slot to be confirmed past every row", 10*time.Second, func() bool {
		return confirmedFlush(t, s, w) >= end
	})
}
