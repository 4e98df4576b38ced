package replay_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "gocloud.dev/blob/fileblob"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/endpoint"
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

// A replay to an endpoint subscribed to postbox.* chooses as the fan-out
// does: the operator events about other endpoints (and the outbox's dead
// letters), never those about the endpoint itself (its own failures, its
// own dead letters).
func TestReplayToEndpointSkipsOperatorEventsAboutItself(t *testing.T) {
	bothStores(t, func(t *testing.T, s outbox) {
		ctx := context.Background()
		ops := receiver.New(t, secret, nil)
		e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "ops", URL: ops.URL, Types: []string{"postbox.*"}, Secret: secret, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		other := uuid.New()
		op := func(eventType, aggType, aggID string) postbox.Event {
			return postbox.Event{ID: postbox.NewID(), AggregateType: aggType, AggregateID: aggID, EventType: eventType, Payload: []byte(`{}`)}
		}
		self := []postbox.Event{
			op(endpoint.EventEndpointFailing, endpoint.AggregateEndpoint, e.ID.String()),
			op(endpoint.EventEndpointDisabled, endpoint.AggregateEndpoint, e.ID.String()),
			op(endpoint.EventDeadLettersGrew, endpoint.AggregateDeadLetters, e.ID.String()+"/g1"),
		}
		want := []postbox.Event{
			op(endpoint.EventEndpointFailing, endpoint.AggregateEndpoint, other.String()),
			op(endpoint.EventDeadLettersGrew, endpoint.AggregateDeadLetters, other.String()+"/g1"),
			op(endpoint.EventDeadLettersGrew, endpoint.AggregateDeadLetters, "outbox/g2"),
		}
		events := append(newEvents(2, "order.created"), append(self, want...)...)
		deliverKept(t, s, events)

		pr, err := replay.Run(ctx, replay.Config{Outbox: s, Endpoints: s}, replay.Params{Endpoint: e.ID, Name: "ops-backfill"})
		if err != nil || pr.Read != len(events) || pr.Matched != len(want) || pr.Inserted+pr.Requeued != len(want) {
			t.Fatalf("replay: %+v, %v; want %d read, %d matched and sent (not the %d about the endpoint itself)", pr, err, len(events), len(want), len(self))
		}
		startLanes(t, s)
		ops.WaitAccepted(t, len(want), 30*time.Second)
		waitFor(t, 30*time.Second, "the replay delivered", func() bool {
			c, err := s.DeliveryCounts(ctx, e.ID)
			return err == nil && c.Done == int64(len(want)) && c.Pending == 0 && c.Processing == 0
		})
		onceEach(t, "replay to the endpoint", replays(ops, "ops-backfill"), idSet(want))
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

// openArchive opens an archive in a new folder through its bucket URL, as
// postbox replay --archive does, and returns it with its folder.
func openArchive(t *testing.T) (*archive.Archive, string) {
	t.Helper()
	dir := t.TempDir()
	a, err := archive.Open(context.Background(), "file://"+filepath.ToSlash(dir)+"?no_tmp_dir=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a, dir
}

// The table and the archive merged: events that retention archived and
// removed from the table are written again (Inserted), those archived and
// still kept (a crash between the archive and the delete) are sent once,
// from their row (Requeued); the relay delivers each once more.
func TestReplayMergesTableAndArchive(t *testing.T) {
	bothStores(t, func(t *testing.T, s outbox) {
		ctx := context.Background()
		events := newEvents(30, "order.created", "order.paid")
		rcv, _ := deliverKept(t, s, events)
		a, _ := openArchive(t)

		// Retention archives 10 delivered events and removes them...
		var removed []uuid.UUID
		res, err := s.Expire(ctx, store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 10,
			Keep: func(ctx context.Context, kept []store.HistoryEvent) error {
				removed = append(removed, ids(kept)...)
				return a.Keep(ctx, kept)
			}})
		if err != nil || res.Events != 10 || len(removed) != 10 {
			t.Fatalf("expire: %+v, %v (kept %d)", res, err, len(removed))
		}
		// ...and 10 others were archived but not removed.
		left, err := s.HistoryRead(ctx, store.HistoryParams{Limit: 100})
		if err != nil || len(left) != 20 {
			t.Fatalf("history left: %d, %v", len(left), err)
		}
		if err := a.Keep(ctx, left[5:15]); err != nil {
			t.Fatal(err)
		}

		cfg := replay.Config{Outbox: s, Archive: a}
		only, err := replay.Run(ctx, cfg, replay.Params{Archive: true, DryRun: true})
		if err != nil || only.Read != 20 || only.Archived != 20 || only.Both != 0 {
			t.Fatalf("the archive alone: %+v, %v; want its 20", only, err)
		}
		pr, err := replay.Run(ctx, cfg, replay.Params{Name: "merged", BatchSize: 8})
		if err != nil {
			t.Fatal(err)
		}
		if pr.Read != 30 || pr.Archived != 10 || pr.Both != 10 || pr.Requeued != 20 || pr.Inserted != 10 || pr.Skipped != 0 || pr.Last != byID(events)[29].ID {
			t.Fatalf("merged replay: %+v; want 30 read: 10 only archived (inserted), 10 in both and 10 in the table (requeued)", pr)
		}
		rcv.WaitAccepted(t, 60, 30*time.Second)
		waitDone(t, s, len(events))
		onceEach(t, "replays", replays(rcv, "merged"), idSet(events))
		for _, id := range removed {
			r, err := s.Get(ctx, id)
			if err != nil || r.Status != store.StatusDone || r.Headers[postbox.HeaderReplay] != "merged" {
				t.Fatalf("an archived event written again: %+v, %v", r, err)
			}
		}
	})
}

// archiveAll moves every delivered event of s to a new archive (retention
// with Keep), leaving the table without history, and returns the archive
// and its folder.
func archiveAll(t *testing.T, s store.Outbox) (*archive.Archive, string) {
	t.Helper()
	a, dir := openArchive(t)
	res, err := s.Expire(context.Background(), store.ExpireParams{Before: time.Now().Add(time.Hour), Limit: 1000, Keep: a.Keep})
	if err != nil || res.More {
		t.Fatalf("expire: %+v, %v", res, err)
	}
	if left, err := s.HistoryRead(context.Background(), store.HistoryParams{Limit: 1}); err != nil || len(left) != 0 {
		t.Fatalf("history left after archiving it all: %d, %v", len(left), err)
	}
	return a, dir
}

// A replay of the archive alone, stopped after a batch (its reader ends
// with it) and resumed after Last, writes each archived event again once:
// the relay delivers each once more.
func TestReplayFromArchiveResumes(t *testing.T) {
	bothStores(t, func(t *testing.T, s outbox) {
		events := newEvents(30, "order.created")
		rcv, running := deliverKept(t, s, events)
		running.Stop() // its retention step must not race ours
		a, _ := archiveAll(t, s)
		sorted := byID(events)

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		batches := 0
		p := replay.Params{Archive: true, BatchSize: 3, Name: "from-archive", Progress: func(replay.Progress) {
			if batches++; batches == 2 {
				cancel()
			}
		}}
		cfg := replay.Config{Outbox: s, Archive: a}
		pr, err := replay.Run(ctx, cfg, p)
		if !errors.Is(err, context.Canceled) || pr.Read != 6 || pr.Inserted != 6 || pr.Archived != 6 || pr.Last != sorted[5].ID {
			t.Fatalf("interrupted: %+v, %v; want 6 inserted, last %s", pr, err, sorted[5].ID)
		}
		p.After, p.Filter.Until, p.Progress = pr.Last, pr.Until, nil
		rest, err := replay.Run(context.Background(), cfg, p)
		if err != nil || rest.Read != 24 || rest.Inserted != 24 || rest.Last != sorted[29].ID {
			t.Fatalf("resumed: %+v, %v; want the 24 left inserted", rest, err)
		}
		startRelay(t, s, rcv)
		rcv.WaitAccepted(t, 60, 30*time.Second)
		waitDone(t, s, len(events))
		onceEach(t, "replays", replays(rcv, "from-archive"), idSet(events))
	})
}

// An archived object that was altered stops the replay before its events
// are sent, with an error naming the object.
func TestReplayRefusesCorruptArchive(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "postbox.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	_, running := deliverKept(t, s.Driver(), newEvents(5, "order.created"))
	running.Stop()
	a, dir := archiveAll(t, s.Driver())
	objects, err := filepath.Glob(filepath.Join(dir, "events", "*", "*", "*", "*", "*.ndjson.gz"))
	if err != nil || len(objects) == 0 {
		t.Fatalf("archived objects: %v, %v", objects, err)
	}
	if err := os.WriteFile(objects[0], []byte("not what was archived"), 0o644); err != nil {
		t.Fatal(err)
	}
	pr, err := replay.Run(ctx, replay.Config{Outbox: s.Driver(), Archive: a}, replay.Params{})
	if err == nil || !strings.Contains(err.Error(), filepath.Base(objects[0])) || pr.Read != 0 {
		t.Fatalf("replay of a corrupt archive: %+v, %v; want an error naming %s", pr, err, filepath.Base(objects[0]))
	}
	if st, err := s.Stats(ctx); err != nil || st.Pending != 0 {
		t.Fatalf("after the refused replay: %+v, %v; want nothing written", st, err)
	}
}
