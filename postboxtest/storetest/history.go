package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// runHistory runs the suite of store.History (HistoryRead, Requeue) and of
// retention with a Keep (Source.Expire), on rows written by the store and
// by plain SQL, hostile ones among them.
func runHistory(t *testing.T, newStore func(t *testing.T) raw) {
	tests := []struct {
		name string
		run  func(t *testing.T, s raw)
	}{
		{"ReadPagesCoverEveryMatchOnce", testHistoryPages},
		{"ReadReturnsTheEventAsWritten", testHistoryFields},
		{"ReadRefusesBadParams", testHistoryRefuses},
		{"ReadPagesPastTheZeroID", testHistoryZeroID},
		{"RequeueCountsAndStates", testRequeueStates},
		{"RequeueTwiceSkips", testRequeueTwice},
		{"RequeueReinsertsDespiteAHeldKey", testRequeueHeldKey},
		{"RequeueWakesTheListener", testRequeueWakes},
		{"RequeueSkipsATimeNoTableHolds", testRequeueExtremeTime},
		{"RequeueKeptPagesWhatReadWouldReturn", testRequeueKept},
		{"ExpireKeepsThenDeletes", testExpireKeep},
		{"ExpireKeepErrorDeletesNothing", testExpireKeepError},
		{"ExpireKeepErrorPurgesHeldKeys", testExpireKeepErrorHeldKeys},
		{"ExpireRefusesBadLimits", testExpireLimits},
		{"PropertyHostileHistory", testHistoryHostile},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
}

// timeSQL is t as a time column's SQL value in dialect.
func timeSQL(dialect string, t time.Time) string {
	switch dialect {
	case "postgres":
		return "'" + t.UTC().Format(time.RFC3339Nano) + "'"
	case "mysql":
		return "'" + t.UTC().Format("2006-01-02 15:04:05.999999") + "'"
	}
	return fmt.Sprint(t.UnixMicro())
}

// historyRow is a row that the history tests write as plain SQL.
type historyRow struct {
	id                  uuid.UUID
	status              string
	typ, aggType, aggID string
	created, processed  time.Time
}

// write inserts r as a plain-SQL producer (or a relay that kept it) would
// have left it.
func (r historyRow) write(t *testing.T, ctx context.Context, s raw) {
	t.Helper()
	processed := "null"
	if r.status == store.StatusDone || r.status == store.StatusFailed {
		processed = timeSQL(s.Dialect, r.processed)
	}
	q := fmt.Sprintf(`insert into {outbox_events} (id, aggregate_type, aggregate_id, event_type, payload, headers, status, created_at, processed_at)
values ('%s', '%s', '%s', '%s', '{"id": "%s"}', '{"h": "%s"}', '%s', %s, %s)`,
		r.id, r.aggType, r.aggID, r.typ, r.id, r.id, r.status, timeSQL(s.Dialect, r.created), processed)
	if err := s.Exec(ctx, q); err != nil {
		t.Fatalf("insert %+v: %v", r, err)
	}
}

// idAt returns a new UUIDv7 whose time is at: an event written then. On
// a partitioned outbox (by range of id) it lands where such an event
// would, a time before every partition's in the DEFAULT partition, whose
// delivered events are retained as a plain table's.
func idAt(at time.Time) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	ms := at.UnixMilli()
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

// sortedIDs returns n new ids in increasing order.
func sortedIDs(n int) []uuid.UUID {
	out := make([]uuid.UUID, n)
	for i := range out {
		out[i] = uuid.Must(uuid.NewV7())
	}
	slices.SortFunc(out, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

// readAll pages through HistoryRead with limit, and fails t when a page is
// longer than limit, out of id order, or repeats an id.
func readAll(t *testing.T, s store.History, f store.HistoryFilter, limit int) []store.HistoryEvent {
	t.Helper()
	var out []store.HistoryEvent
	var after uuid.UUID
	resume := false // after the first page: After is a page's last id, zero or not
	for range 100_000 {
		page, err := s.HistoryRead(ctxFor(t), store.HistoryParams{Filter: f, After: after, Resume: resume, Limit: limit})
		if err != nil {
			t.Fatalf("HistoryRead %+v after %s limit %d: %v", f, after, limit, err)
		}
		if len(page) > limit {
			t.Fatalf("HistoryRead returned %d events, limit %d", len(page), limit)
		}
		if len(page) == 0 {
			return out
		}
		for _, ev := range page {
			if (resume || after != uuid.Nil) && bytes.Compare(ev.ID[:], after[:]) <= 0 {
				t.Fatalf("HistoryRead after %s returned %s: not in id order, or repeated", after, ev.ID)
			}
			after, resume = ev.ID, true
		}
		out = append(out, page...)
	}
	t.Fatal("HistoryRead never ran out")
	return nil
}

func historyIDs(evs []store.HistoryEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// testHistoryPages: done rows among failed, pending and leased ones, with
// types the globs match and types they do not (a '/' that '*' does not
// cross), read with every filter in pages of several sizes: each page in
// id order, every matching done row exactly once across the pages, no
// other.
func testHistoryPages(t *testing.T, s raw) {
	ctx := ctxFor(t)
	base := time.Now().Add(-10 * time.Hour).Truncate(time.Second)
	types := []string{"order.created", "order.paid", "order.a/b", "payment.done", "pay.ment", "order.created.v2"}
	ids := sortedIDs(90)
	var rows []historyRow
	leased := map[int]bool{}
	for i, id := range ids {
		r := historyRow{id: id, typ: types[i%len(types)], aggType: []string{"order", "payment"}[i%2],
			aggID: fmt.Sprint(i % 4), created: base.Add(time.Duration(i) * time.Minute), processed: base.Add(time.Hour)}
		switch i % 7 {
		case 0, 1, 2, 4:
			r.status = store.StatusDone
		case 3:
			r.status = store.StatusFailed
		case 5:
			r.status, leased[i] = store.StatusPending, true
		default:
			r.status = store.StatusPending
		}
		rows = append(rows, r)
	}
	// The leased rows first, claimed while they are the only pending ones.
	for i, r := range rows {
		if leased[i] {
			r.write(t, ctx, s)
		}
	}
	if got := claim(t, s, store.ClaimParams{Limit: 1000}); len(got) != len(leased) {
		t.Fatalf("claimed %d, want the %d leased rows", len(got), len(leased))
	}
	for i, r := range rows {
		if !leased[i] {
			r.write(t, ctx, s)
		}
	}
	filters := []store.HistoryFilter{
		{},
		{EventTypes: []string{"order.*"}},
		{EventTypes: []string{"order.*", "pay?ent.done"}},
		{EventTypes: []string{"*"}},
		{EventTypes: []string{"order.a/b"}},
		{EventTypes: []string{"order.created"}},
		{EventTypes: []string{"[op]*.*d"}},
		{AggregateType: "payment"},
		{AggregateID: "2"},
		{AggregateType: "order", AggregateID: "2"},
		{Since: base.Add(20 * time.Minute), Until: base.Add(50 * time.Minute)},
		{Since: base.Add(80 * time.Minute)},
		{Until: base.Add(3 * time.Minute)},
		{Since: base.Add(10 * time.Minute), EventTypes: []string{"order.*"}, AggregateType: "order"},
		{EventTypes: []string{"nothing.*"}},
		{EventTypes: []string{"*.paid"}},
		{EventTypes: []string{"*.created*", "*/b"}},
		{EventTypes: []string{"*.a/?", "[^o]*"}},
		{EventTypes: []string{"*[.]*.v[0-9]"}},
		{EventTypes: []string{`order\.c*`, "*.[!-n]*"}},
	}
	for _, f := range filters {
		var want []uuid.UUID
		for _, r := range rows {
			if r.status == store.StatusDone && f.Match(r.typ, r.aggType, r.aggID, r.created) {
				want = append(want, r.id)
			}
		}
		for _, limit := range []int{1, 2, 7, store.HistoryBatchMax} {
			got := readAll(t, s, f, limit)
			if fmt.Sprint(historyIDs(got)) != fmt.Sprint(want) {
				t.Errorf("filter %+v, limit %d: read %d events %v, want the %d matching done rows %v", f, limit, len(got), historyIDs(got), len(want), want)
			}
		}
	}
}

// testHistoryFields: a kept event reads back as its producer wrote it,
// with its place, its times and its dedup key.
func testHistoryFields(t *testing.T, s raw) {
	ev := event("7", 1)
	ev.DedupKey = "order-7-updated"
	ev.Headers = map[string]string{"traceparent": "00-x", "k": "v"}
	before := time.Now().Add(-time.Second)
	enqueue(t, s, ev)
	got := claim(t, s, store.ClaimParams{})
	settle(t, s, store.SettleParams{Done: []uuid.UUID{ev.ID}, Ended: []int64{got[0].Lease}, KeepDone: true})
	read := readAll(t, s, store.HistoryFilter{}, 10)
	if len(read) != 1 {
		t.Fatalf("read %d events, want 1", len(read))
	}
	h := read[0]
	if h.ID != ev.ID || h.AggregateType != ev.AggregateType || h.AggregateID != ev.AggregateID || h.EventType != ev.EventType ||
		h.DedupKey != ev.DedupKey || fmt.Sprint(h.Headers) != fmt.Sprint(ev.Headers) || h.OutboxSeq != got[0].OutboxSeq {
		t.Errorf("read %+v, want %+v at seq %d", h, ev, got[0].OutboxSeq)
	}
	sameJSON(t, h.Payload, ev.Payload)
	if h.CreatedAt.Before(before) || h.ProcessedAt.Before(h.CreatedAt) || time.Since(h.ProcessedAt) > time.Minute {
		t.Errorf("created %v, processed %v: want both now, in that order", h.CreatedAt, h.ProcessedAt)
	}
}

// testHistoryRefuses: limits out of range and filters no store can run
// are refused.
func testHistoryRefuses(t *testing.T, s raw) {
	now := time.Now()
	for _, p := range []store.HistoryParams{
		{Limit: 0},
		{Limit: -1},
		{Limit: store.HistoryBatchMax + 1},
		{Limit: 10, Filter: store.HistoryFilter{EventTypes: []string{"order.["}}},
		{Limit: 10, Filter: store.HistoryFilter{Since: now, Until: now}},
	} {
		if _, err := s.HistoryRead(ctxFor(t), p); err == nil {
			t.Errorf("HistoryRead %+v: no error", p)
		}
	}
}

// testHistoryZeroID: a done row with the all-zero id (plain SQL writes
// it) is read once: first from a zero After, and never again by the pages
// that resume after it (HistoryParams.Resume), whatever their size.
func testHistoryZeroID(t *testing.T, s raw) {
	ctx := ctxFor(t)
	processed := time.Now().Add(-time.Hour).Truncate(time.Second)
	ids := append([]uuid.UUID{uuid.Nil}, sortedIDs(3)...)
	for i, id := range ids {
		historyRow{id: id, status: store.StatusDone, typ: "order.paid", aggType: "order", aggID: fmt.Sprint(i),
			created: processed.Add(-time.Minute), processed: processed}.write(t, ctx, s)
	}
	for _, limit := range []int{1, 2, 10} {
		if got := historyIDs(readAll(t, s, store.HistoryFilter{}, limit)); fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Errorf("limit %d: read %v, want %v", limit, got, ids)
		}
	}
	for _, c := range []struct {
		resume bool
		want   []uuid.UUID
	}{{false, ids}, {true, ids[1:]}} {
		page, err := s.HistoryRead(ctx, store.HistoryParams{After: uuid.Nil, Resume: c.resume, Limit: 10})
		if err != nil || fmt.Sprint(historyIDs(page)) != fmt.Sprint(c.want) {
			t.Errorf("HistoryRead after the zero id, Resume %t: %v, %v; want %v", c.resume, historyIDs(page), err, c.want)
		}
	}
}

// testRequeueExtremeTime: in a batch of healthy events, an absent event
// whose CreatedAt no table holds (years out of 1 to 9999: what an
// archive may hold of a plain-SQL producer's row) is Skipped, and the
// healthy ones are requeued and written again.
func testRequeueExtremeTime(t *testing.T, s raw) {
	ctx := ctxFor(t)
	kept := deliveredKept(t, s, event("1", 1))
	gone := event("2", 1)
	batch := []store.HistoryEvent{kept[0], {Event: gone, CreatedAt: time.Now().Add(-time.Hour)}}
	for _, year := range []int{-5000, 0, 10_000, 300_000} {
		ev := event("x", year)
		batch = append(batch, store.HistoryEvent{Event: ev, CreatedAt: time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC)})
	}
	res, err := s.Requeue(ctx, batch, "extreme")
	if want := (store.RequeueResult{Requeued: 1, Inserted: 1, Skipped: 4}); err != nil || res != want {
		t.Fatalf("Requeue with times no table holds = %+v, %v; want %+v", res, err, want)
	}
	for _, id := range []uuid.UUID{kept[0].ID, gone.ID} {
		if r := get(t, s, id); r.Status != store.StatusPending {
			t.Errorf("event %s after the requeue: %q, want pending", id, r.Status)
		}
	}
	for _, ev := range batch[2:] {
		if _, err := s.Get(ctx, ev.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("event of %v: %v, want not written", ev.CreatedAt, err)
		}
	}
}

// testRequeueKept: RequeueKept requeues, page by page, the kept events
// HistoryRead returns for the same params (here: a type glob), each once,
// marked, and leaves the others done; a page shorter than the limit is the
// last, and the one after it selects nothing.
func testRequeueKept(t *testing.T, s raw) {
	ctx := ctxFor(t)
	var evs []postbox.Event
	for i := range 5 {
		ev := event(fmt.Sprint("k", i), 1)
		if i%2 == 1 {
			ev.EventType = "invoice.sent"
		}
		evs = append(evs, ev)
	}
	kept := deliveredKept(t, s, evs...)
	var orders []uuid.UUID
	for _, e := range kept {
		if e.EventType == "order.updated" {
			orders = append(orders, e.ID)
		}
	}
	p := store.HistoryParams{Filter: store.HistoryFilter{EventTypes: []string{"order.*"}}, Limit: 2}
	var pages []store.RequeueKeptResult
	for range 3 {
		res, err := s.RequeueKept(ctx, p, "replay-kept")
		if err != nil {
			t.Fatalf("RequeueKept(%+v): %v", p, err)
		}
		pages = append(pages, res)
		p.After, p.Resume = res.Last, true
	}
	want := []store.RequeueKeptResult{
		{RequeueResult: store.RequeueResult{Requeued: 2}, Read: 2, Last: orders[1]},
		{RequeueResult: store.RequeueResult{Requeued: 1}, Read: 1, Last: orders[2]},
		{Read: 0},
	}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Fatalf("RequeueKept pages = %+v, want %+v", pages, want)
	}
	for _, e := range kept {
		r := get(t, s, e.ID)
		wantStatus := store.StatusDone
		if e.EventType == "order.updated" {
			wantStatus = store.StatusPending
			if r.Headers[postbox.HeaderReplay] != "replay-kept" {
				t.Errorf("requeued event %s: headers %v, want the replay's mark", e.ID, r.Headers)
			}
		}
		if r.Status != wantStatus {
			t.Errorf("event %s (%s) after RequeueKept: %q, want %q", e.ID, e.EventType, r.Status, wantStatus)
		}
	}
	if _, err := s.RequeueKept(ctx, store.HistoryParams{Limit: 0}, "x"); err == nil {
		t.Error("RequeueKept with Limit 0: no error")
	}
}

// deliveredKept enqueues evs, claims and settles them done (kept), ending
// the claim, and returns them as HistoryRead reads them.
func deliveredKept(t *testing.T, s store.Outbox, evs ...postbox.Event) []store.HistoryEvent {
	t.Helper()
	enqueue(t, s, evs...)
	got := claim(t, s, store.ClaimParams{Limit: 1000})
	p := store.SettleParams{KeepDone: true}
	for _, d := range got {
		p.Done, p.Ended = append(p.Done, d.ID), append(p.Ended, d.Lease)
	}
	settle(t, s, p)
	var out []store.HistoryEvent
	want := map[uuid.UUID]bool{}
	for _, ev := range evs {
		want[ev.ID] = true
	}
	for _, h := range readAll(t, s, store.HistoryFilter{}, store.HistoryBatchMax) {
		if want[h.ID] {
			out = append(out, h)
		}
	}
	if len(out) != len(evs) {
		t.Fatalf("%d of the %d delivered events read from the history", len(out), len(evs))
	}
	return out
}

// testRequeueStates: a kept done row is requeued (pending, due, never
// attempted, its headers marked), an absent event is written again with
// its id and original creation time, pending, leased and failed rows are
// skipped, an id given twice counts once; a claim then delivers the
// replays with the header, their ids unchanged, at attempt 1.
func testRequeueStates(t *testing.T, s raw) {
	ctx := ctxFor(t)
	leasedEv := event("b", 1)
	enqueue(t, s, leasedEv)
	claim(t, s, store.ClaimParams{Owner: "relay-l"})
	doneEv, failedEv, pendingEv := event("a", 1), event("c", 1), event("d", 1)
	doneEv.Headers = map[string]string{"k": "v"}
	enqueue(t, s, doneEv, failedEv, pendingEv)
	got := claim(t, s, store.ClaimParams{})
	p := store.SettleParams{Done: []uuid.UUID{doneEv.ID}, KeepDone: true,
		Failed: []store.Failure{{ID: failedEv.ID, LastError: "410 gone"}}, Release: []store.Released{{ID: pendingEv.ID}}}
	for _, d := range got {
		p.Ended = append(p.Ended, d.Lease)
	}
	settle(t, s, p)
	kept := readAll(t, s, store.HistoryFilter{}, 100)
	if len(kept) != 1 || kept[0].ID != doneEv.ID {
		t.Fatalf("history %v, want the done event alone", historyIDs(kept))
	}
	created := time.Now().Add(-72 * time.Hour).Truncate(time.Microsecond)
	absent := store.HistoryEvent{Event: event("e", 1), CreatedAt: created, ProcessedAt: created.Add(time.Second)}
	absent.Headers = map[string]string{"x": "y"}
	absent.DedupKey = "order-e-1"
	batch := []store.HistoryEvent{kept[0], {Event: leasedEv}, {Event: failedEv}, {Event: pendingEv}, absent, absent}
	res, err := s.Requeue(ctx, batch, "replay-1")
	if err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	if want := (store.RequeueResult{Requeued: 1, Inserted: 1, Skipped: 4}); res != want {
		t.Fatalf("Requeue = %+v, want %+v", res, want)
	}
	r := get(t, s, doneEv.ID)
	if r.Status != store.StatusPending || r.Retries != 0 || r.LastError != "" || !r.ProcessedAt.IsZero() ||
		fmt.Sprint(r.Headers) != fmt.Sprint(map[string]string{"k": "v", postbox.HeaderReplay: "replay-1"}) {
		t.Errorf("requeued row %+v: want pending, never attempted, headers marked", r)
	}
	r = get(t, s, absent.ID)
	if r.Status != store.StatusPending || !r.CreatedAt.Equal(created) || r.DedupKey != "" || r.EventType != absent.EventType ||
		fmt.Sprint(r.Headers) != fmt.Sprint(map[string]string{"x": "y", postbox.HeaderReplay: "replay-1"}) {
		t.Errorf("inserted row %+v: want pending, created %v, no dedup key, headers marked", r, created)
	}
	if r := get(t, s, failedEv.ID); r.Status != store.StatusFailed || r.Headers[postbox.HeaderReplay] != "" {
		t.Errorf("failed row %+v: want left alone", r)
	}
	if r := get(t, s, pendingEv.ID); r.Headers[postbox.HeaderReplay] != "" {
		t.Errorf("pending row %+v: want left alone", r)
	}
	replays := claim(t, s, store.ClaimParams{Owner: "relay-z"})
	seen := map[uuid.UUID]store.ClaimedEvent{}
	for _, d := range replays {
		seen[d.ID] = d
	}
	if _, ok := seen[leasedEv.ID]; ok || len(replays) != 3 {
		t.Fatalf("claimed %v, want the two replays and the released event", ids(replays))
	}
	for _, want := range []postbox.Event{doneEv, absent.Event} {
		d, ok := seen[want.ID]
		if !ok || d.Invalid != "" || d.Attempt != 1 || d.Headers[postbox.HeaderReplay] != "replay-1" || d.EventType != want.EventType {
			t.Errorf("replay of %s claimed as %+v (found %t): want its id, attempt 1, the replay header", want.ID, d, ok)
			continue
		}
		sameJSON(t, d.Payload, want.Payload)
	}
	if d := seen[pendingEv.ID]; d.Headers[postbox.HeaderReplay] != "" {
		t.Errorf("the released event claimed with the replay header: %v", d.Headers)
	}
}

// testRequeueTwice: a second Requeue of the same events finds them
// pending (or leased): it skips them all and changes nothing.
func testRequeueTwice(t *testing.T, s raw) {
	kept := deliveredKept(t, s, event("1", 1), event("2", 1))
	absent := store.HistoryEvent{Event: event("3", 1)}
	batch := append(kept, absent)
	res, err := s.Requeue(ctxFor(t), batch, "twice")
	if want := (store.RequeueResult{Requeued: 2, Inserted: 1}); err != nil || res != want {
		t.Fatalf("first Requeue = %+v, %v; want %+v", res, err, want)
	}
	res, err = s.Requeue(ctxFor(t), batch, "twice")
	if want := (store.RequeueResult{Skipped: 3}); err != nil || res != want {
		t.Fatalf("second Requeue = %+v, %v; want %+v", res, err, want)
	}
	claim(t, s, store.ClaimParams{Limit: 1}) // one leased: still skipped
	res, err = s.Requeue(ctxFor(t), batch, "thrice")
	if want := (store.RequeueResult{Skipped: 3}); err != nil || res != want {
		t.Fatalf("Requeue with one leased = %+v, %v; want %+v", res, err, want)
	}
	if got := claim(t, s, store.ClaimParams{Owner: "relay-b"}); len(got) != 2 {
		t.Fatalf("claimed %d, want the 2 replays not leased", len(got))
	} else {
		for _, d := range got {
			if d.Headers[postbox.HeaderReplay] != "twice" {
				t.Errorf("claimed %s with replay header %q, want the first replay's", d.ID, d.Headers[postbox.HeaderReplay])
			}
		}
	}
	if res, err := s.Requeue(ctxFor(t), nil, "none"); err != nil || res != (store.RequeueResult{}) {
		t.Errorf("Requeue of nothing = %+v, %v", res, err)
	}
	if _, err := s.Requeue(ctxFor(t), make([]store.HistoryEvent, store.HistoryBatchMax+1), "many"); err == nil {
		t.Error("Requeue of more than HistoryBatchMax events: no error")
	}
}

// testRequeueHeldKey: an event whose row is gone while its dedup key is
// held (SettleParams.DedupWindow) is written again, without the key; the
// key stays held for producers.
func testRequeueHeldKey(t *testing.T, s raw) {
	ev := event("42", 1)
	ev.DedupKey = "order-42-paid"
	enqueue(t, s, ev)
	got := claim(t, s, store.ClaimParams{})
	settle(t, s, store.SettleParams{Done: []uuid.UUID{ev.ID}, Ended: []int64{got[0].Lease}, DedupWindow: time.Hour})
	res, err := s.Requeue(ctxFor(t), []store.HistoryEvent{{Event: ev}}, "held")
	if want := (store.RequeueResult{Inserted: 1}); err != nil || res != want {
		t.Fatalf("Requeue of an event whose key is held = %+v, %v; want %+v", res, err, want)
	}
	if r := get(t, s, ev.ID); r.DedupKey != "" || r.Status != store.StatusPending {
		t.Errorf("re-inserted row %+v: want pending without its dedup key", r)
	}
	again := event("42", 2)
	again.DedupKey = ev.DedupKey
	var dup *postbox.DuplicateError
	if err := s.Enqueue(ctxFor(t), again); !errors.As(err, &dup) {
		t.Errorf("Enqueue of the held key after the replay: %v, want a DuplicateError", err)
	}
	if got := claim(t, s, store.ClaimParams{}); len(got) != 1 || got[0].ID != ev.ID || got[0].Headers[postbox.HeaderReplay] != "held" {
		t.Errorf("claimed %+v, want the replay", got)
	}
}

// testRequeueWakes: a listening relay (dozing, where the store has
// doze) is woken by a Requeue of a kept row, which no insert trigger
// sees.
func testRequeueWakes(t *testing.T, s raw) {
	kept := deliveredKept(t, s, event("1", 1))
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	ready := make(chan store.Listening, 1)
	woke := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Listen(ctx, func(l store.Listening) { ready <- l }, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	var l store.Listening
	select {
	case l = <-ready:
	case err := <-done:
		if errors.Is(err, store.ErrCannotListen) {
			return // relays of such a store poll
		}
		t.Fatalf("listen: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("listener not ready")
	}
	if l.Dozer != nil {
		for dozed := false; !dozed; {
			var err error
			if dozed, err = l.Dozer.Doze(ctx); err != nil {
				t.Fatalf("doze: %v", err)
			}
		}
	}
	select { // a wake-up of the writes before, if any
	case <-woke:
	default:
	}
	if res, err := s.Requeue(ctx, kept, "wake"); err != nil || res.Requeued != 1 {
		t.Fatalf("Requeue = %+v, %v", res, err)
	}
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up after a requeue")
	}
}

// oldDone writes n done rows created a minute before processed (their
// ids too: idAt) and processed then, and returns their ids in increasing
// order.
func oldDone(t *testing.T, ctx context.Context, s raw, n int, processed time.Time) []uuid.UUID {
	t.Helper()
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = idAt(processed.Add(-time.Minute))
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	for i, id := range ids {
		historyRow{id: id, status: store.StatusDone, typ: "order.paid", aggType: "order", aggID: fmt.Sprint(i),
			created: processed.Add(-time.Minute), processed: processed}.write(t, ctx, s)
	}
	return ids
}

// testExpireKeep: Expire with a Keep hands each expired row once, in
// batches of Limit sorted by id, while the rows are still there, and
// deletes them after; younger done rows and pending ones stay; a row
// requeued while Keep runs is kept in the table, pending.
func testExpireKeep(t *testing.T, s raw) {
	ctx := ctxFor(t)
	now := time.Now()
	old := oldDone(t, ctx, s, 5, now.Add(-2*time.Hour))
	young := oldDone(t, ctx, s, 2, now)
	pending := event("p", 1)
	enqueue(t, s, pending)
	handed := map[uuid.UUID]int{}
	keep := func(ctx context.Context, evs []store.HistoryEvent) error {
		if !slices.IsSortedFunc(evs, func(a, b store.HistoryEvent) int { return bytes.Compare(a.ID[:], b.ID[:]) }) {
			t.Errorf("Keep given %v: not in id order", historyIDs(evs))
		}
		for _, ev := range evs {
			handed[ev.ID]++
			if r, err := s.Get(ctx, ev.ID); err != nil || r.Status != store.StatusDone {
				t.Errorf("event %s handed to Keep: %+v, %v; want still there, done", ev.ID, r, err)
			}
			if ev.EventType != "order.paid" || ev.ProcessedAt.IsZero() {
				t.Errorf("event handed to Keep: %+v, want it read whole", ev)
			}
		}
		return nil
	}
	var total store.ExpireResult
	for step := 0; ; step++ {
		if step > 10 {
			t.Fatal("Expire never ran out")
		}
		res, err := s.Expire(ctx, store.ExpireParams{Before: now.Add(-time.Hour), Limit: 2, Keep: keep})
		if err != nil {
			t.Fatalf("Expire: %v", err)
		}
		// A plain table keeps and deletes a batch of Limit at most; a
		// partitioned outbox drops whole partitions, read in chunks of
		// Limit (the chunks' order is checked by keep).
		if (res.Kept > 2 && len(res.Dropped) == 0) || res.Events != res.Kept {
			t.Errorf("Expire = %+v, want at most 2 kept (but for whole partitions dropped), each deleted", res)
		}
		total.Kept, total.Events = total.Kept+res.Kept, total.Events+res.Events
		if !res.More {
			break
		}
	}
	if total.Kept != len(old) || total.Events != len(old) {
		t.Errorf("kept %d and deleted %d in all, want %d", total.Kept, total.Events, len(old))
	}
	for _, id := range old {
		if handed[id] != 1 {
			t.Errorf("old event %s handed %d times, want once", id, handed[id])
		}
		if _, err := s.Get(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("old event %s after Expire: %v, want gone", id, err)
		}
	}
	for _, id := range append(young, pending.ID) {
		if handed[id] != 0 {
			t.Errorf("event %s handed to Keep, want left", id)
		}
		get(t, s, id)
	}
	// A replay between Keep and the delete keeps its row.
	more := oldDone(t, ctx, s, 2, now.Add(-2*time.Hour))
	res, err := s.Expire(ctx, store.ExpireParams{Before: now.Add(-time.Hour), Limit: 10, Keep: func(ctx context.Context, evs []store.HistoryEvent) error {
		_, err := s.Requeue(ctx, evs[:1], "during")
		return err
	}})
	if err != nil || res.Kept != 2 || res.Events != 1 {
		t.Fatalf("Expire with a replay during Keep = %+v, %v; want 2 kept, 1 deleted", res, err)
	}
	if r := get(t, s, more[0]); r.Status != store.StatusPending {
		t.Errorf("the event requeued during Keep: %q, want pending", r.Status)
	}
}

// testExpireKeepError: an error of Keep deletes nothing, and is returned.
func testExpireKeepError(t *testing.T, s raw) {
	ctx := ctxFor(t)
	now := time.Now()
	old := oldDone(t, ctx, s, 3, now.Add(-2*time.Hour))
	down := errors.New("bucket down")
	res, err := s.Expire(ctx, store.ExpireParams{Before: now.Add(-time.Hour), Limit: 10, Keep: func(context.Context, []store.HistoryEvent) error { return down }})
	if !errors.Is(err, down) || res.Events != 0 {
		t.Fatalf("Expire with a failing Keep = %+v, %v; want the Keep's error, nothing deleted", res, err)
	}
	for _, id := range old {
		if r := get(t, s, id); r.Status != store.StatusDone {
			t.Errorf("event %s after a failed Keep: %q, want done, kept", id, r.Status)
		}
	}
	res, err = s.Expire(ctx, store.ExpireParams{Before: now.Add(-time.Hour), Limit: 10, Keep: func(context.Context, []store.HistoryEvent) error { return nil }})
	if err != nil || res.Events != 3 || res.More {
		t.Fatalf("Expire once Keep succeeds = %+v, %v; want the 3 deleted", res, err)
	}
}

// testExpireKeepErrorHeldKeys: a Keep that fails does not stop the
// purge of the dedup keys whose hold ended (or a bucket that stays down
// would let them grow without limit); the Keep's error is returned, no
// event deleted.
func testExpireKeepErrorHeldKeys(t *testing.T, s raw) {
	ctx := ctxFor(t)
	now := time.Now()
	old := oldDone(t, ctx, s, 2, now.Add(-2*time.Hour))
	evs := []postbox.Event{event("k1", 1), event("k2", 1), event("k3", 1)}
	for i := range evs {
		evs[i].DedupKey = fmt.Sprintf("order-k%d-paid", i)
	}
	enqueue(t, s, evs...)
	got := claim(t, s, store.ClaimParams{Limit: 10})
	p := store.SettleParams{DedupWindow: time.Millisecond}
	for _, d := range got {
		p.Done, p.Ended = append(p.Done, d.ID), append(p.Ended, d.Lease)
	}
	settle(t, s, p)
	time.Sleep(50 * time.Millisecond) // the keys' hold ends
	down := errors.New("bucket down")
	res, err := s.Expire(ctx, store.ExpireParams{Before: now.Add(-time.Hour), Limit: 10, Keep: func(context.Context, []store.HistoryEvent) error { return down }})
	if !errors.Is(err, down) || res.Events != 0 || res.Keys != len(evs) {
		t.Fatalf("Expire with a failing Keep = %+v, %v; want the Keep's error, nothing deleted, the %d held keys purged", res, err, len(evs))
	}
	for _, id := range old {
		if r := get(t, s, id); r.Status != store.StatusDone {
			t.Errorf("event %s after a failed Keep: %q, want done, kept", id, r.Status)
		}
	}
	res, err = s.Expire(ctx, store.ExpireParams{Before: now.Add(-time.Hour), Limit: 10, Keep: func(context.Context, []store.HistoryEvent) error { return nil }})
	if err != nil || res.Events != len(old) || res.Keys != 0 {
		t.Fatalf("Expire once Keep succeeds = %+v, %v; want the %d events deleted, no key left", res, err, len(old))
	}
}

// testExpireLimits: Expire refuses a Limit out of 1 to HistoryBatchMax,
// with a Keep or without.
func testExpireLimits(t *testing.T, s raw) {
	keep := func(context.Context, []store.HistoryEvent) error { return nil }
	for _, limit := range []int{0, -1, store.HistoryBatchMax + 1} {
		for _, k := range []func(context.Context, []store.HistoryEvent) error{nil, keep} {
			if _, err := s.Expire(ctxFor(t), store.ExpireParams{Before: time.Now(), Limit: limit, Keep: k}); err == nil {
				t.Errorf("Expire with Limit %d (Keep %t): no error", limit, k != nil)
			}
		}
	}
}

// testHistoryHostile writes, on a schema without its bounds, a done row
// with every edge value of every column between healthy done rows, as
// plain SQL, and reads the history in pages of random sizes, requeues it
// all (kept rows), drains the queue as a relay does, expires the history
// with a Keep in random batches, and replays what was kept (rows gone):
// no read, requeue, claim or expiry fails; every row is read once, every
// kept row requeued, every healthy one delivered again as written with
// the replay header, handed to Keep once, and written again.
func testHistoryHostile(t *testing.T, s raw) {
	seed := int64(envInt(t, "POSTBOX_PROPERTY_SEED", int(time.Now().UnixNano())))
	t.Logf("seed %d (POSTBOX_PROPERTY_SEED)", seed)
	rng := rand.New(rand.NewSource(seed))
	s.Loosen(t)
	ctx := ctxFor(t)
	processed := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	healthy := map[uuid.UUID]historyRow{}
	hostile := map[uuid.UUID]Edge{}
	for _, e := range Edges(s.Dialect) {
		for range rng.Intn(3) {
			id := idAt(processed.Add(-time.Minute))
			r := historyRow{id: id, status: store.StatusDone, typ: fmt.Sprintf("order.%d", rng.Intn(3)), aggType: "order",
				aggID: fmt.Sprint(rng.Intn(5)), created: processed.Add(-time.Minute), processed: processed}
			r.write(t, ctx, s)
			healthy[id] = r
		}
		id, err := insertRow(ctx, s, e, store.StatusDone)
		if err != nil {
			continue // refused by the column's type
		}
		if e.Column != "processed_at" {
			if err := s.Exec(ctx, fmt.Sprintf("update {outbox_events} set processed_at = %s where id = '%s'", timeSQL(s.Dialect, processed), id)); err != nil {
				t.Fatal(err)
			}
		}
		hostile[id] = e
	}
	readsWork(t, s)
	for _, f := range []store.HistoryFilter{{}, {EventTypes: []string{"order.*"}}} {
		got := readAll(t, s, f, 1+rng.Intn(7))
		seen := map[uuid.UUID]bool{}
		for _, ev := range got {
			seen[ev.ID] = true
			if r, ok := healthy[ev.ID]; ok && (ev.EventType != r.typ || ev.AggregateID != r.aggID || ev.Headers["h"] != r.id.String() || !ev.CreatedAt.Equal(r.created)) {
				t.Errorf("healthy row %s read as %+v, want %+v", ev.ID, ev, r)
			}
		}
		for id, r := range healthy {
			if !seen[id] {
				t.Errorf("filter %+v: healthy row %+v not read", f, r)
			}
		}
		if len(f.EventTypes) == 0 {
			for id, e := range hostile {
				if !seen[id] {
					t.Errorf("done row with %s = %.40s not read", e.Column, e.SQL)
				}
			}
		}
	}
	all := readAll(t, s, store.HistoryFilter{}, store.HistoryBatchMax)
	res, err := s.Requeue(ctx, all, "kept")
	if err != nil || res.Requeued != len(all) {
		t.Fatalf("Requeue of the %d kept rows = %+v, %v; want each requeued", len(all), res, err)
	}
	readsWork(t, s)
	for range 1000 {
		got, err := s.Claim(ctx, store.ClaimParams{Owner: "relay-h", Limit: 1 + rng.Intn(20), Lease: lease})
		if err != nil {
			t.Fatalf("claim of the requeued rows: %v", err)
		}
		if len(got) == 0 {
			break
		}
		p := store.SettleParams{Owner: "relay-h", KeepDone: true}
		for _, d := range got {
			if r, ok := healthy[d.ID]; ok && (d.Invalid != "" || d.Attempt != 1 || d.EventType != r.typ || d.Headers[postbox.HeaderReplay] != "kept") {
				t.Errorf("healthy row %s claimed again as %+v", d.ID, d)
			}
			if d.Invalid != "" {
				p.Failed = append(p.Failed, store.Failure{ID: d.ID, LastError: d.Invalid, Lease: d.Lease})
			} else {
				p.Done = append(p.Done, d.ID)
			}
			p.Ended = append(p.Ended, d.Lease)
		}
		settle(t, s, p)
	}
	readsWork(t, s)
	var kept []store.HistoryEvent
	keep := func(_ context.Context, evs []store.HistoryEvent) error {
		kept = append(kept, evs...)
		return nil
	}
	expireCtx, before := ctxFor(t), time.Now()
	for step := 0; ; step++ {
		if step > 1000 {
			t.Fatal("Expire never ran out")
		}
		res, err := s.Expire(expireCtx, store.ExpireParams{Before: before, Limit: 1 + rng.Intn(10), Keep: keep})
		if err != nil {
			t.Fatalf("Expire: %v", err)
		}
		if !res.More {
			break
		}
	}
	handed := map[uuid.UUID]int{}
	for _, ev := range kept {
		handed[ev.ID]++
	}
	for id := range healthy {
		if handed[id] != 1 {
			t.Errorf("healthy row %s handed to Keep %d times, want once", id, handed[id])
		}
	}
	for id, e := range hostile {
		if handed[id] > 1 {
			t.Errorf("row with %s = %.40s handed to Keep %d times, want at most once", e.Column, e.SQL, handed[id])
		}
	}
	readsWork(t, s)
	rng.Shuffle(len(kept), func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })
	res, err = s.Requeue(ctx, kept, "hostile")
	if err != nil {
		t.Fatalf("Requeue of the kept rows: %v", err)
	}
	if res.Requeued != 0 || res.Inserted+res.Skipped != len(kept) || res.Inserted < len(healthy) {
		t.Errorf("Requeue = %+v of %d (%d healthy): want every healthy row written again", res, len(kept), len(healthy))
	}
	for id := range healthy {
		if r := get(t, s, id); r.Status != store.StatusPending || r.Headers[postbox.HeaderReplay] != "hostile" {
			t.Errorf("healthy row %s after the replay: %+v", id, r)
		}
	}
	readsWork(t, s)
}

// testEndpointRequeue: a finished delivery (done, dropped) of an endpoint
// is requeued, an absent one written, pending (leased) and failed ones
// skipped; the lane then claims the replays with the header, at attempt
// 1; a second call skips them all; an unknown endpoint is
// ErrEndpointNotFound.
func testEndpointRequeue(t *testing.T, s store.Endpoints) {
	ctx := context.Background()
	a := newEndpoint(t, s, "a")
	shadow, err := s.EndpointCreate(ctx, store.Endpoint{Name: "shadow", URL: "https://example.com/s", Secret: "whsec_s", Concurrency: 1, Shadow: true})
	if err != nil {
		t.Fatal(err)
	}
	events := laneEvents(5, "1")
	route(t, s, events[:2], a.ID)
	route(t, s, events[3:4], shadow.ID)
	l := s.EndpointLane(a)
	got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10})
	settleLane(t, l, store.SettleParams{Owner: "r", Done: eventIDs(events[:1]), KeepDone: true,
		Failed: []store.Failure{{ID: events[1].ID, LastError: "410"}}, Ended: leases(got)})
	route(t, s, events[2:3], a.ID)
	if got := claimLane(t, l, store.ClaimParams{Owner: "r", Limit: 10}); len(got) != 1 {
		t.Fatalf("claimed %d, want the third delivery", len(got))
	}
	ls := s.EndpointLane(shadow)
	got = claimLane(t, ls, store.ClaimParams{Owner: "r", Limit: 10})
	settleLane(t, ls, store.SettleParams{Owner: "r", Failed: []store.Failure{{ID: events[3].ID, LastError: "500"}}, Ended: leases(got)})
	if d, _ := delivery(t, s, shadow.ID, events[3].ID); d.Status != store.StatusDropped {
		t.Fatalf("shadow's delivery %+v, want dropped", d)
	}
	hist := func(evs ...postbox.Event) []store.HistoryEvent {
		out := make([]store.HistoryEvent, len(evs))
		for i, ev := range evs {
			out[i] = store.HistoryEvent{Event: ev}
		}
		return out
	}
	// events[0] done, [1] failed, [2] pending (leased), [4] absent.
	batch := hist(events[0], events[1], events[2], events[4], events[4])
	res, err := s.EndpointRequeue(ctx, a.ID, batch, "backfill")
	if want := (store.RequeueResult{Requeued: 1, Inserted: 1, Skipped: 3}); err != nil || res != want {
		t.Fatalf("EndpointRequeue = %+v, %v; want %+v", res, err, want)
	}
	res, err = s.EndpointRequeue(ctx, shadow.ID, hist(events[3]), "backfill")
	if want := (store.RequeueResult{Requeued: 1}); err != nil || res != want {
		t.Fatalf("EndpointRequeue of a dropped delivery = %+v, %v; want %+v", res, err, want)
	}
	for _, c := range []struct {
		endpoint uuid.UUID
		ev       postbox.Event
	}{{a.ID, events[0]}, {a.ID, events[4]}, {shadow.ID, events[3]}} {
		d, ok := delivery(t, s, c.endpoint, c.ev.ID)
		if !ok || d.Status != store.StatusPending || d.Attempt != 0 || d.Headers[postbox.HeaderReplay] != "backfill" || d.Headers["traceparent"] != "00-y" {
			t.Errorf("delivery of %s to %s after the requeue: %+v (found %t); want pending, never attempted, marked", c.ev.ID, c.endpoint, d, ok)
		}
	}
	if d, _ := delivery(t, s, a.ID, events[1].ID); d.Status != store.StatusFailed {
		t.Errorf("failed delivery %+v: want left alone", d)
	}
	if due, err := s.DeliveryDue(ctx, []uuid.UUID{a.ID, shadow.ID}); err != nil || len(due) != 2 {
		t.Errorf("DeliveryDue = %v, %v; want both endpoints due", due, err)
	}
	got = claimLane(t, l, store.ClaimParams{Owner: "r2", Limit: 10})
	sameIDs(t, "claimed replays", deliveryIDs(got), []uuid.UUID{events[0].ID, events[4].ID})
	for _, d := range got {
		if d.Attempt != 1 || d.Headers[postbox.HeaderReplay] != "backfill" {
			t.Errorf("claimed replay %+v: want attempt 1 and the replay header", d)
		}
	}
	res, err = s.EndpointRequeue(ctx, a.ID, batch, "again")
	if want := (store.RequeueResult{Skipped: 5}); err != nil || res != want {
		t.Errorf("second EndpointRequeue = %+v, %v; want %+v", res, err, want)
	}
	if _, err := s.EndpointRequeue(ctx, uuid.Must(uuid.NewV7()), batch, "nowhere"); !errors.Is(err, store.ErrEndpointNotFound) {
		t.Errorf("EndpointRequeue to an unknown endpoint: %v, want ErrEndpointNotFound", err)
	}
}

// leases are the leases of a claim's deliveries, to end them.
func leases(ds []store.ClaimedEvent) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.Lease
	}
	return out
}
