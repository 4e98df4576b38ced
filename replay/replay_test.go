package replay_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// byID sorts events in id order: the order a replay reads them in.
func byID(events []postbox.Event) []postbox.Event {
	out := slices.Clone(events)
	slices.SortFunc(out, func(a, b postbox.Event) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return out
}

// ofTypes are the events of events whose type has one of the prefixes.
func ofTypes(events []postbox.Event, prefixes ...string) []postbox.Event {
	var out []postbox.Event
	for _, e := range events {
		for _, p := range prefixes {
			if strings.HasPrefix(e.EventType, p) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// Delivered events kept by a relay's Retention, replayed to the outbox by
// type and aggregate: the running relay delivers each chosen one once
// more, to the same receiver, with its first delivery's webhook-id and
// body and the Postbox-Replay header; the others are not sent. Replayed
// again while still pending (no relay), they are not history: not read,
// not queued twice.
func TestReplayToOutboxDeliversAgain(t *testing.T) {
	bothStores(t, func(t *testing.T, s outbox) {
		ctx := context.Background()
		events := newEvents(30, "order.created", "order.paid", "user.signed_up")
		rcv, running := deliverKept(t, s, events)
		chosen := byID(ofTypes(events, "order."))

		var calls []replay.Progress
		pr, err := replay.Run(ctx, replay.Config{Outbox: s}, replay.Params{
			Filter:    store.HistoryFilter{EventTypes: []string{"order.*"}, AggregateType: "order"},
			BatchSize: 7, Name: "fix-42",
			Progress: func(p replay.Progress) { calls = append(calls, p) },
		})
		if err != nil {
			t.Fatal(err)
		}
		want := replay.Progress{Read: 20, Matched: 20, RequeueResult: store.RequeueResult{Requeued: 20},
			Last: chosen[len(chosen)-1].ID, Name: "fix-42", Until: pr.Until}
		if pr != want {
			t.Fatalf("progress %+v, want %+v", pr, want)
		}
		if len(calls) != 3 || calls[0].Read != 7 || calls[0].Last != chosen[6].ID || calls[2] != pr {
			t.Fatalf("progress after each batch of 7: %+v", calls)
		}
		if pr.Until.IsZero() || pr.Until.After(time.Now()) {
			t.Fatalf("Until %v: want the time the run began", pr.Until)
		}

		rcv.WaitAccepted(t, len(events)+len(chosen), 30*time.Second)
		waitDone(t, s, len(events))
		onceEach(t, "replays", replays(rcv, "fix-42"), idSet(chosen))
		onceEach(t, "first deliveries", firstDeliveries(rcv), idSet(events))
		bodies := map[string][]string{}
		for _, d := range rcv.Accepted() {
			bodies[d.ID] = append(bodies[d.ID], string(d.Body))
		}
		for _, e := range chosen {
			if b := bodies[e.ID.String()]; len(b) != 2 || b[0] != b[1] || b[0] != string(e.Payload) {
				t.Fatalf("bodies of %s: %q, want its payload twice", e.ID, b)
			}
		}

		// With the relay stopped, a replay leaves its events pending: a
		// second one skips them, and they are delivered once more only.
		running.Stop()
		p := replay.Params{Filter: store.HistoryFilter{EventTypes: []string{"user.*"}}, Name: "again"}
		if pr, err := replay.Run(ctx, replay.Config{Outbox: s}, p); err != nil || pr.Requeued != 10 || pr.Skipped != 0 {
			t.Fatalf("replay of user.*: %+v, %v", pr, err)
		}
		if pr, err := replay.Run(ctx, replay.Config{Outbox: s}, p); err != nil || pr.Read != 0 {
			// Pending again, they are not history: nothing to read.
			t.Fatalf("second replay of user.* while pending: %+v, %v", pr, err)
		}
		before := len(rcv.Accepted())
		startRelay(t, s, rcv)
		rcv.WaitAccepted(t, before+10, 30*time.Second)
		waitDone(t, s, len(events))
		onceEach(t, "replays of user.*", replays(rcv, "again"), idSet(ofTypes(events, "user.")))
	})
}

// A replay stopped by its context after a batch returns where it stopped
// (Last, Until) with the context's error; run again with After = Last it
// replays the rest: every event is delivered again exactly once.
func TestReplayResumesAfterInterruption(t *testing.T) {
	bothStores(t, func(t *testing.T, s outbox) {
		events := newEvents(50, "order.created")
		rcv, _ := deliverKept(t, s, events)
		sorted := byID(events)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		batches := 0
		p := replay.Params{BatchSize: 5, Name: "resumed", Progress: func(replay.Progress) {
			if batches++; batches == 2 {
				cancel() // as Ctrl-C during the second batch: it ends whole
			}
		}}
		pr, err := replay.Run(ctx, replay.Config{Outbox: s}, p)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted replay: %v, want context.Canceled", err)
		}
		if pr.Read != 10 || pr.Requeued != 10 || pr.Last != sorted[9].ID {
			t.Fatalf("interrupted after two batches of 5: %+v, want 10 requeued, last %s", pr, sorted[9].ID)
		}

		p.After, p.Filter.Until, p.Progress = pr.Last, pr.Until, nil
		rest, err := replay.Run(context.Background(), replay.Config{Outbox: s}, p)
		if err != nil || rest.Read != 40 || rest.Requeued != 40 || rest.Last != sorted[49].ID {
			t.Fatalf("resumed replay: %+v, %v; want the 40 left", rest, err)
		}
		rcv.WaitAccepted(t, 100, 30*time.Second)
		waitDone(t, s, len(events))
		onceEach(t, "replays", replays(rcv, "resumed"), idSet(events))
	})
}

// A replay to one endpoint backfills it: only the events its types and
// filter want become its deliveries (an event its filter fails on is
// counted, not sent), delivered by its lane with the replay header; the
// outbox is left as it was, and a dry run writes nothing.
func TestReplayBackfillsOneEndpoint(t *testing.T) {
	bothStores(t, func(t *testing.T, s outbox) {
		ctx := context.Background()
		events := newEvents(12, "order.created", "order.paid", "user.signed_up")
		odd := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "x", EventType: "order.created", Payload: []byte(`{"note": "no n"}`)}
		events = append(events, odd)
		first, _ := deliverKept(t, s, events)

		late := receiver.New(t, secret, nil)
		e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "late", URL: late.URL, Types: []string{"order.*"},
			Filter: `int(payload.n) % 2 == 0`, Secret: secret, Concurrency: 4})
		if err != nil {
			t.Fatal(err)
		}
		var want []postbox.Event
		for i, ev := range events[:12] {
			if strings.HasPrefix(ev.EventType, "order.") && i%2 == 0 {
				want = append(want, ev)
			}
		}
		cfg := replay.Config{Outbox: s, Endpoints: s}
		p := replay.Params{Endpoint: e.ID, Name: "backfill-late", BatchSize: 4}

		p.DryRun = true
		dry, err := replay.Run(ctx, cfg, p)
		if err != nil || dry.Read != 13 || dry.Matched != len(want) || dry.FilterErrors != 1 || dry.Requeued+dry.Inserted+dry.Skipped != 0 {
			t.Fatalf("dry run: %+v, %v; want 13 read, %d matched, 1 filter error, nothing sent", dry, err, len(want))
		}
		if c, err := s.DeliveryCounts(ctx, e.ID); err != nil || c != (store.DeliveryCounts{}) {
			t.Fatalf("deliveries after a dry run: %+v, %v", c, err)
		}

		p.DryRun = false
		pr, err := replay.Run(ctx, cfg, p)
		if err != nil || pr.Read != 13 || pr.Matched != len(want) || pr.Inserted+pr.Requeued != len(want) || pr.FilterErrors != 1 {
			t.Fatalf("backfill: %+v, %v; want %d sent", pr, err, len(want))
		}
		startLanes(t, s)
		late.WaitAccepted(t, len(want), 30*time.Second)
		waitFor(t, 30*time.Second, "the backfill delivered", func() bool {
			c, err := s.DeliveryCounts(ctx, e.ID)
			return err == nil && c.Done == int64(len(want)) && c.Pending == 0 && c.Processing == 0
		})
		onceEach(t, "backfill", replays(late, "backfill-late"), idSet(want))
		if n := len(late.Accepted()); n != len(want) {
			t.Fatalf("the endpoint got %d deliveries, want %d (all replays)", n, len(want))
		}
		waitDone(t, s, len(events))
		if r := replays(first, "backfill-late"); len(r) != 0 {
			t.Fatalf("the outbox's receiver got replays of an endpoint's backfill: %v", r)
		}
	})
}

// Run refuses what no replay can run, before it reads or writes anything.
func TestRunRefusesBadParams(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	d := s.Driver()
	now := time.Now()
	for _, tc := range []struct {
		name string
		cfg  replay.Config
		p    replay.Params
		want string
	}{
		{"no outbox", replay.Config{}, replay.Params{}, "Outbox is required"},
		{"endpoint without endpoints", replay.Config{Outbox: d}, replay.Params{Endpoint: uuid.New()}, "needs Config.Endpoints"},
		{"archive without archive", replay.Config{Outbox: d}, replay.Params{Archive: true}, "needs Config.Archive"},
		{"batch too big", replay.Config{Outbox: d}, replay.Params{BatchSize: store.HistoryBatchMax + 1}, "BatchSize"},
		{"negative batch", replay.Config{Outbox: d}, replay.Params{BatchSize: -1}, "BatchSize"},
		{"bad glob", replay.Config{Outbox: d}, replay.Params{Filter: store.HistoryFilter{EventTypes: []string{"order.["}}}, "pattern"},
		{"window backwards", replay.Config{Outbox: d}, replay.Params{Filter: store.HistoryFilter{Since: now, Until: now.Add(-time.Hour)}}, "ends before it begins"},
		{"name with a new line", replay.Config{Outbox: d}, replay.Params{Name: "a\r\nX-Evil: 1"}, "printable ASCII"},
		{"name too long", replay.Config{Outbox: d}, replay.Params{Name: strings.Repeat("n", replay.NameMax+1)}, "characters"},
		{"unknown endpoint", replay.Config{Outbox: d, Endpoints: d}, replay.Params{Endpoint: uuid.New()}, "not found"},
	} {
		pr, err := replay.Run(ctx, tc.cfg, tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) || pr.Read != 0 {
			t.Errorf("%s: %+v, %v; want an error with %q", tc.name, pr, err, tc.want)
		}
	}
	if err := replay.CheckName("replay-20261202T101500Z"); err != nil {
		t.Fatalf("a default name: %v", err)
	}
}
