package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// raw is a store under test with what a plain-SQL producer has: its
// tables, written with the store's SQL (see Subject).
type raw struct {
	store.Outbox
	// Dialect is Harness.Dialect.
	Dialect string
	Exec    func(ctx context.Context, query string, args ...any) error
	Loosen  func(t *testing.T)
}

// runHostile runs the suite of hostile rows: rows a plain-SQL producer
// wrote with values no event has, beside healthy events. Each fails alone
// (refused at insert, or claimed with ClaimedEvent.Invalid naming its column)
// and never costs another event anything, nor breaks a claim or a read.
func runHostile(t *testing.T, newStore func(t *testing.T) raw) {
	tests := []struct {
		name string
		run  func(t *testing.T, s raw)
	}{
		{"BoundsRefuseHostileRows", testBoundsRefuse},
		{"HostileRowFailsAlone", func(t *testing.T, s raw) { testHostileRowFailsAlone(t, s, false) }},
		{"HostileRowFailsAloneOrdered", func(t *testing.T, s raw) { testHostileRowFailsAlone(t, s, true) }},
		{"ReadsListHostileRows", testReadsListHostileRows},
		{"DedupKeyHeldAfterDelivery", func(t *testing.T, s raw) { testDedupKeyHeld(t, s, false) }},
		{"DedupKeyHeldAfterDeliveryKept", func(t *testing.T, s raw) { testDedupKeyHeld(t, s, true) }},
		{"DedupKeyFreeWithoutWindow", testDedupKeyFreeWithoutWindow},
		{"ClaimBoundedByBytes", func(t *testing.T, s raw) { testClaimBoundedByBytes(t, s, false) }},
		{"OrderedClaimBoundedByBytes", func(t *testing.T, s raw) { testClaimBoundedByBytes(t, s, true) }},
		{"PropertyHostileColumns", testPropertyHostileColumns},
		{"OtherTablesReadHostileRows", testOtherTablesReadHostileRows},
		{"EndpointUpdatedAtAheadOfTheClock", testEndpointUpdatedAtAhead},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(t, newStore(t))
		})
	}
}

// Outcome is what the store must do with a row holding an edge value.
type Outcome int

const (
	// Delivered: the row is an event as written.
	Delivered Outcome = iota
	// Invalid: claimed with ClaimedEvent.Invalid naming the column (or refused
	// at insert).
	Invalid
	// NeverDue: never claimed (a time that never comes), and never in the
	// way of reads.
	NeverDue
)

// Edge is a value at the edge of a column's domain, as SQL.
type Edge struct {
	Column string
	// SQL is the value's SQL expression in the store's dialect.
	SQL     string
	Outcome Outcome
	// Bounded: the schema (migration 0008) refuses the value at insert.
	Bounded bool
	// Refused: the column's type refuses the value, bounds or not.
	Refused bool
}

// Edges are the edge values of outbox_events' columns in dialect.
func Edges(dialect string) []Edge {
	deep := strings.Repeat("[", 2000) + strings.Repeat("]", 2000)
	huge := strings.Repeat("x", 100_000)
	common := []Edge{
		{Column: "aggregate_type", SQL: "''"},
		{Column: "aggregate_id", SQL: "'" + huge + "'"},
		{Column: "event_type", SQL: "''", Outcome: Invalid},
		{Column: "event_type", SQL: "'" + huge + "'"},
		{Column: "payload", SQL: "'null'"},
		{Column: "payload", SQL: `'"text"'`},
		{Column: "payload", SQL: "'[]'"},
		{Column: "headers", SQL: "'[1, 2]'", Outcome: Invalid},
		{Column: "headers", SQL: `'"text"'`, Outcome: Invalid},
		{Column: "headers", SQL: "'42'", Outcome: Invalid},
		{Column: "headers", SQL: `'{"n": 1, "o": {"a": [true]}}'`},
		{Column: "headers", SQL: "'null'"},
		{Column: "dedup_key", SQL: "null"},
		{Column: "dedup_key", SQL: "'" + strings.Repeat("k", 2000) + "'"},
	}
	switch dialect {
	case "mysql":
		return append(common, mysqlEdges()...)
	case "postgres":
		return append(common,
			Edge{Column: "created_at", SQL: "'infinity'", Outcome: Invalid, Bounded: true},
			Edge{Column: "created_at", SQL: "'-infinity'", Outcome: Invalid, Bounded: true},
			Edge{Column: "created_at", SQL: "'10000-01-01'", Outcome: Invalid, Bounded: true},
			Edge{Column: "created_at", SQL: "'4713-01-01 BC'", Outcome: Invalid, Bounded: true},
			Edge{Column: "available_at", SQL: "'-infinity'", Outcome: Invalid, Bounded: true},
			Edge{Column: "available_at", SQL: "'infinity'", Outcome: NeverDue, Bounded: true},
			Edge{Column: "retries", SQL: "2147483647", Outcome: Invalid, Bounded: true},
			Edge{Column: "retries", SQL: "-999999", Outcome: Invalid, Bounded: true},
			Edge{Column: "retries", SQL: "-2147483648", Outcome: Invalid, Bounded: true},
			Edge{Column: "retries", SQL: "999999999"},
			Edge{Column: "processed_at", SQL: "'infinity'", Bounded: true},
			Edge{Column: "payload", SQL: "'" + deep + "'"},
			Edge{Column: "event_type", SQL: `E'a\000b'`, Outcome: Invalid, Refused: true},
			Edge{Column: "aggregate_id", SQL: `E'\xff'`, Outcome: Invalid, Refused: true},
			Edge{Column: "payload", SQL: `'{"a": "\u0000"}'`, Outcome: Invalid, Refused: true},
			Edge{Column: "payload", SQL: "'not json'", Outcome: Invalid, Refused: true},
			Edge{Column: "payload", SQL: "null", Outcome: Invalid, Refused: true},
			Edge{Column: "retries", SQL: "2147483648", Outcome: Invalid, Refused: true},
			Edge{Column: "headers", SQL: `'{"a": ` + deep + `}'`},
		)
	}
	return append(common,
		Edge{Column: "created_at", SQL: "9223372036854775807", Outcome: Invalid, Bounded: true},
		Edge{Column: "created_at", SQL: "-9223372036854775808", Outcome: Invalid, Bounded: true},
		Edge{Column: "available_at", SQL: "-9223372036854775808", Outcome: Invalid, Bounded: true},
		Edge{Column: "available_at", SQL: "9223372036854775807", Outcome: NeverDue, Bounded: true},
		Edge{Column: "attempts", SQL: "9223372036854775807", Outcome: Invalid, Bounded: true},
		Edge{Column: "attempts", SQL: "-5", Outcome: Invalid, Bounded: true},
		Edge{Column: "attempts", SQL: "'many'", Outcome: Invalid, Bounded: true},
		Edge{Column: "attempts", SQL: "1.5", Outcome: Invalid, Bounded: true},
		Edge{Column: "retries", SQL: "9223372036854775807", Bounded: true},
		Edge{Column: "retries", SQL: "'many'", Bounded: true},
		Edge{Column: "event_type", SQL: "x'ff'", Outcome: Invalid, Bounded: true},
		Edge{Column: "event_type", SQL: "'a' || char(0) || 'b'", Outcome: Invalid, Bounded: true},
		Edge{Column: "event_type", SQL: "42"},
		Edge{Column: "aggregate_type", SQL: "cast(x'ff' as text)", Outcome: Invalid},
		Edge{Column: "aggregate_id", SQL: "x'00'", Outcome: Invalid, Bounded: true},
		Edge{Column: "payload", SQL: `cast(x'7b2261223a22ff227d' as text)`, Outcome: Invalid},
		Edge{Column: "payload", SQL: "'" + strings.Repeat("[", 900) + strings.Repeat("]", 900) + "'"},
		Edge{Column: "processed_at", SQL: "9223372036854775807", Bounded: true},
		Edge{Column: "payload", SQL: "'not json'", Outcome: Invalid, Refused: true},
		Edge{Column: "payload", SQL: "x'7b7d'", Outcome: Invalid, Refused: true},
		Edge{Column: "payload", SQL: "null", Outcome: Invalid, Refused: true},
		Edge{Column: "created_at", SQL: "'yesterday'", Outcome: Invalid, Refused: true},
		Edge{Column: "headers", SQL: "'{'", Outcome: Invalid, Refused: true},
	)
}

// mysqlEdges are the edge values of MySQL and MariaDB, written through a
// session in strict mode (the store's): what a column's type cannot hold
// (text in an integer, an integer past INT, invalid UTF-8, a zero date,
// text that is not JSON) is refused by the type; migration 0008's checks
// refuse counts out of 0 to 1000000000 and NUL in the names.
func mysqlEdges() []Edge {
	deep := strings.Repeat("[", 900) + strings.Repeat("]", 900)
	return []Edge{
		{Column: "created_at", SQL: "'0001-01-01 00:00:00'"},
		{Column: "created_at", SQL: "'9999-12-31 23:59:59.999999'"},
		{Column: "available_at", SQL: "'9999-12-31 23:59:59.999999'", Outcome: NeverDue},
		{Column: "processed_at", SQL: "'9999-12-31 23:59:59.999999'"},
		{Column: "retries", SQL: "2147483647", Bounded: true},
		{Column: "retries", SQL: "-1", Bounded: true},
		{Column: "retries", SQL: "999999999"},
		{Column: "attempts", SQL: "2147483647", Outcome: Invalid, Bounded: true},
		{Column: "attempts", SQL: "-5", Outcome: Invalid, Bounded: true},
		{Column: "event_type", SQL: "concat('a', char(0 using utf8mb4), 'b')", Outcome: Invalid, Bounded: true},
		{Column: "aggregate_id", SQL: "x'00'", Outcome: Invalid, Bounded: true},
		{Column: "event_type", SQL: "42"},
		{Column: "payload", SQL: `'{"a": "\u0000"}'`},
		{Column: "payload", SQL: "'1e308'"},
		{Column: "created_at", SQL: "'0000-00-00 00:00:00'", Outcome: Invalid, Refused: true},
		{Column: "created_at", SQL: "'yesterday'", Outcome: Invalid, Refused: true},
		{Column: "attempts", SQL: "2147483648", Outcome: Invalid, Refused: true},
		{Column: "attempts", SQL: "'many'", Outcome: Invalid, Refused: true},
		{Column: "retries", SQL: "-9223372036854775808", Outcome: Invalid, Refused: true},
		{Column: "event_type", SQL: "x'ff'", Outcome: Invalid, Refused: true},
		{Column: "aggregate_type", SQL: "x'c328'", Outcome: Invalid, Refused: true},
		{Column: "payload", SQL: `x'7b2261223a22ff227d'`, Outcome: Invalid, Refused: true},
		{Column: "payload", SQL: "'" + deep + "'", Outcome: Invalid, Refused: true},
		{Column: "payload", SQL: "'not json'", Outcome: Invalid, Refused: true},
		{Column: "payload", SQL: "null", Outcome: Invalid, Refused: true},
		{Column: "headers", SQL: "'{'", Outcome: Invalid, Refused: true},
	}
}

// nowSQL is the SQL of the current time in dialect's time columns.
func nowSQL(dialect string) string {
	switch dialect {
	case "postgres":
		return "now()"
	case "mysql":
		return "utc_timestamp(6)"
	}
	return fmt.Sprint(time.Now().UnixMicro())
}

// hostileRow is one row as a plain-SQL producer writes it: the article's
// columns, then edge overriding one of them.
type hostileRow struct {
	id   uuid.UUID
	edge Edge
}

// insertRow writes a row with edge (a row of healthy values when edge is
// the zero Edge), as plain SQL, and returns its id and the insert's error.
func insertRow(ctx context.Context, s raw, edge Edge, status string) (uuid.UUID, error) {
	id := postbox.NewID()
	cols := map[string]string{
		"id":             "'" + id.String() + "'",
		"aggregate_type": "'order'",
		"aggregate_id":   "'hostile'",
		"event_type":     "'order.hostile'",
		"payload":        `'{"hostile": true}'`,
	}
	if status != "" {
		cols["status"] = "'" + status + "'"
		if status == store.StatusFailed {
			cols["processed_at"] = nowSQL(s.Dialect)
		}
	}
	if edge.Column != "" {
		cols[edge.Column] = edge.SQL
	}
	var names, values []string
	for _, c := range []string{"id", "aggregate_type", "aggregate_id", "event_type", "payload", "dedup_key", "status", "retries", "attempts", "available_at", "created_at", "processed_at", "headers"} {
		if v, ok := cols[c]; ok {
			names, values = append(names, c), append(values, v)
		}
	}
	err := s.Exec(ctx, fmt.Sprintf("insert into {outbox_events} (%s) values (%s)", strings.Join(names, ", "), strings.Join(values, ", ")))
	return id, err
}

// readsWork runs every read of the status tools and fails t if one
// errors.
func readsWork(t *testing.T, s store.Outbox) {
	t.Helper()
	ctx := ctxFor(t)
	if _, err := s.Stats(ctx); err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if _, err := s.StatsUpTo(ctx, 1000); err != nil {
		t.Fatalf("StatsUpTo: %v", err)
	}
	if _, err := s.StatsByType(ctx); err != nil {
		t.Fatalf("StatsByType: %v", err)
	}
	if _, err := s.Relays(ctx); err != nil {
		t.Fatalf("Relays: %v", err)
	}
	for _, status := range []string{store.StatusPending, store.StatusProcessing, store.StatusDone, store.StatusFailed} {
		recs, err := s.List(ctx, store.ListParams{Status: status, Limit: 1000})
		if err != nil {
			t.Fatalf("List %s: %v", status, err)
		}
		for _, r := range recs {
			if _, err := s.Get(ctx, r.ID); err != nil {
				t.Fatalf("Get %s: %v", r.ID, err)
			}
		}
	}
	page, err := s.FailedList(ctx, store.FailedListParams{Limit: 1000})
	if err != nil {
		t.Fatalf("FailedList: %v", err)
	}
	for _, r := range page.Events {
		if _, err := s.Get(ctx, r.ID); err != nil {
			t.Fatalf("Get failed %s: %v", r.ID, err)
		}
	}
	if _, err := s.FailedGroups(ctx, store.FailedGroupsParams{}); err != nil {
		t.Fatalf("FailedGroups: %v", err)
	}
}

// testBoundsRefuse: the schema refuses at insert the values it bounds.
func testBoundsRefuse(t *testing.T, s raw) {
	ctx := ctxFor(t)
	for _, e := range Edges(s.Dialect) {
		if !e.Bounded && !e.Refused {
			continue
		}
		if _, err := insertRow(ctx, s, e, ""); err == nil {
			t.Errorf("%s = %.40s: inserted, want refused by the schema's bounds", e.Column, e.SQL)
		}
	}
	readsWork(t, s)
}

// testHostileRowFailsAlone: on a schema without its bounds, each hostile
// row is claimed beside healthy events without failing the claim; it is
// Invalid (naming its column) and fails alone with that text, the healthy
// events are delivered at their first attempt.
func testHostileRowFailsAlone(t *testing.T, s raw, ordered bool) {
	s.Loosen(t)
	for i, e := range Edges(s.Dialect) {
		if e.Outcome == Invalid && !e.Refused {
			t.Run(e.Name(), func(t *testing.T) { hostileRowFailsAlone(t, s, ordered, e, i) })
		}
	}
}

// Name names the edge in a subtest: column=value, the value cut short.
func (e Edge) Name() string {
	v := strings.Trim(e.SQL, "'")
	if len(v) > 24 {
		v = v[:24] + "…"
	}
	return e.Column + "=" + v
}

// hostileRowFailsAlone claims a row with edge e between two healthy
// events (of aggregates numbered n) and settles them as a relay does.
func hostileRowFailsAlone(t *testing.T, s raw, ordered bool, e Edge, n int) {
	ctx := ctxFor(t)
	healthy := []postbox.Event{event(fmt.Sprint("a", n), 1), event(fmt.Sprint("b", n), 1)}
	enqueue(t, s, healthy[0])
	bad, err := insertRow(ctx, s, e, "")
	if err != nil {
		t.Fatalf("insert: %v", err)
	}
	enqueue(t, s, healthy[1])
	readsWork(t, s)
	got, err := s.Claim(ctx, store.ClaimParams{Owner: "relay-a", Limit: 100, Lease: lease, Ordered: ordered})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	p := store.SettleParams{Owner: "relay-a"}
	found := 0
	for _, d := range got {
		switch d.ID {
		case bad:
			found++
			if !strings.HasPrefix(d.Invalid, e.Column+": ") && !strings.Contains(d.Invalid, "; "+e.Column+": ") {
				t.Errorf("Invalid %q, want it to name the column", d.Invalid)
			}
			p.Failed = append(p.Failed, store.Failure{ID: d.ID, LastError: d.Invalid, Lease: d.Lease})
		case healthy[0].ID, healthy[1].ID:
			found++
			if d.Invalid != "" || d.Attempt != 1 {
				t.Errorf("healthy event claimed with Invalid %q, attempt %d", d.Invalid, d.Attempt)
			}
			p.Done = append(p.Done, d.ID)
		}
		p.Ended = append(p.Ended, d.Lease)
	}
	if found != 3 {
		t.Fatalf("claimed %d of the 3 events", found)
	}
	settle(t, s, p)
	readsWork(t, s)
	if r := get(t, s, bad); r.Status != store.StatusFailed || !strings.Contains(r.LastError, e.Column+": ") {
		t.Fatalf("row %s ended %q with %q, want failed naming the column", bad, r.Status, r.LastError)
	}
	if left := claim(t, s, store.ClaimParams{Ordered: ordered}); len(left) != 0 {
		t.Fatalf("%d events left to claim", len(left))
	}
}

// testReadsListHostileRows: rows with hostile values in every status are
// read by every status tool without an error.
func testReadsListHostileRows(t *testing.T, s raw) {
	s.Loosen(t)
	ctx := ctxFor(t)
	for _, e := range Edges(s.Dialect) {
		for _, status := range []string{"", store.StatusFailed, store.StatusDone} {
			if e.Column == "dedup_key" && status != "" {
				continue // one row may hold a key
			}
			if _, err := insertRow(ctx, s, e, status); err != nil && e.Outcome == Delivered && !e.Bounded {
				t.Fatalf("%s = %.40s as %q: insert: %v", e.Column, e.SQL, status, err)
			}
		}
	}
	readsWork(t, s)
}

// testDedupKeyHeld: with a DedupWindow, the key of a delivered event is
// refused, to plain SQL and to Enqueue, whether the row was deleted or
// kept done and then purged.
func testDedupKeyHeld(t *testing.T, s raw, keep bool) {
	ctx := ctxFor(t)
	key := Edge{Column: "dedup_key", SQL: "'order-42-paid'"}
	first, err := insertRow(ctx, s, key, "")
	if err != nil {
		t.Fatal(err)
	}
	got := claim(t, s.Outbox, store.ClaimParams{})
	if len(got) != 1 || got[0].ID != first {
		t.Fatalf("claimed %v, want %s", ids(got), first)
	}
	settle(t, s.Outbox, store.SettleParams{Done: []uuid.UUID{first}, Ended: []int64{got[0].Lease}, KeepDone: keep, DedupWindow: time.Hour})
	if keep {
		if _, err := purgeDone(ctx, s, time.Now().Add(time.Hour), 100); err != nil {
			t.Fatalf("purge done: %v", err)
		}
	}
	if _, err := s.Get(ctx, first); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delivered row: %v, want it gone", err)
	}
	if _, err := insertRow(ctx, s, key, ""); err == nil {
		t.Fatal("plain SQL insert of a delivered event's dedup key: accepted, want refused for the window")
	} else if !strings.Contains(err.Error(), "dedup_key") {
		t.Fatalf("plain SQL insert of a held key: %v, want the unique index's error", err)
	}
	again := event("42", 2)
	again.DedupKey = "order-42-paid"
	var dup *postbox.DuplicateError
	if err := s.Enqueue(ctx, again); !errors.As(err, &dup) || len(dup.Keys) != 1 || dup.Keys[0] != again.DedupKey {
		t.Fatalf("Enqueue of a held key: %v, want a DuplicateError naming it", err)
	}
	other := event("43", 1)
	other.DedupKey = "order-43-paid"
	enqueue(t, s.Outbox, other)
	if st, err := s.Stats(ctx); err != nil || st.Pending != 1 {
		t.Fatalf("stats %+v, %v: want only the event of another key pending", st, err)
	}
}

// testDedupKeyFreeWithoutWindow: without a DedupWindow, a delivered
// event's key is free again once its row is gone (the behaviour before
// windows).
func testDedupKeyFreeWithoutWindow(t *testing.T, s raw) {
	ctx := ctxFor(t)
	key := Edge{Column: "dedup_key", SQL: "'order-42-paid'"}
	first, err := insertRow(ctx, s, key, "")
	if err != nil {
		t.Fatal(err)
	}
	got := claim(t, s.Outbox, store.ClaimParams{})
	settle(t, s.Outbox, store.SettleParams{Done: []uuid.UUID{first}, Ended: []int64{got[0].Lease}})
	if _, err := insertRow(ctx, s, key, ""); err != nil {
		t.Fatalf("insert of a delivered key without a window: %v", err)
	}
}

// testClaimBoundedByBytes: MaxBytes stops a claim before the payload that
// would take it past the bound, and an event larger than the bound is
// claimed alone.
func testClaimBoundedByBytes(t *testing.T, s raw, ordered bool) {
	const mb = 1 << 20
	big := func(agg string, size int) postbox.Event {
		e := event(agg, 1)
		e.Payload = []byte(`"` + strings.Repeat("x", size-2) + `"`)
		return e
	}
	var events []postbox.Event
	for i := range 10 {
		events = append(events, big(fmt.Sprint(i), mb))
	}
	enqueue(t, s, events...)
	got := claim(t, s.Outbox, store.ClaimParams{Limit: 100, MaxBytes: 3 * mb, Ordered: ordered})
	if len(got) != 3 || got[0].ID != events[0].ID {
		t.Fatalf("claimed %d events of 1 MB with MaxBytes 3 MB, want the first 3", len(got))
	}
	rest := claim(t, s.Outbox, store.ClaimParams{Owner: "relay-b", Limit: 100, Ordered: ordered})
	if len(rest) != 7 {
		t.Fatalf("claimed %d events without a byte bound, want the other 7", len(rest))
	}
	huge := big("huge", 5*mb)
	small := event("small", 1)
	enqueue(t, s, huge, small)
	got = claim(t, s.Outbox, store.ClaimParams{Owner: "relay-c", Limit: 100, MaxBytes: 3 * mb, Ordered: ordered})
	if len(got) != 1 || got[0].ID != huge.ID || len(got[0].Payload) != 5*mb {
		t.Fatalf("claimed %v with MaxBytes 3 MB, want the 5 MB event alone", ids(got))
	}
}

// otherTableEdges are hostile values of the inbox's and the endpoints'
// columns in dialect: table, column, SQL.
func otherTableEdges(dialect string) [][3]string {
	switch dialect {
	case "mysql":
		return [][3]string{
			{"inbox_events", "attempts", "2147483647"},
			{"inbox_events", "attempts", "-2147483648"},
			{"inbox_events", "seq", "-9223372036854775808"},
			{"inbox_events", "payload", "'[1, 2]'"},
			{"inbox_events", "lease_expires_at", "'9999-12-31 23:59:59.999999'"},
			{"inbox_events", "received_at", "'0001-01-01'"},
			{"endpoint_deliveries", "available_at", "'0001-01-01'"},
			{"endpoint_deliveries", "created_at", "'9999-12-31 23:59:59.999999'"},
			{"endpoint_deliveries", "headers", "'[1, 2]'"},
			{"endpoint_deliveries", "attempts", "2147483647"},
			{"endpoints", "failing_since", "'9999-12-31 23:59:59.999999'"},
			{"endpoints", "created_at", "'0001-01-01'"},
		}
	case "postgres":
		return [][3]string{
			{"inbox_events", "received_at", "'infinity'"},
			{"inbox_events", "processed_at", "'-infinity'"},
			{"inbox_events", "lease_expires_at", "'infinity'"},
			{"inbox_events", "attempts", "2147483647"},
			{"inbox_events", "payload", "'[1, 2]'"},
			{"endpoint_deliveries", "available_at", "'-infinity'"},
			{"endpoint_deliveries", "created_at", "'infinity'"},
			{"endpoint_deliveries", "headers", "'[1, 2]'"},
			{"endpoint_deliveries", "attempts", "2147483647"},
			{"endpoint_attempts", "at", "'infinity'"},
			{"endpoints", "failing_since", "'infinity'"},
			{"endpoints", "created_at", "'-infinity'"},
		}
	}
	return [][3]string{
		{"inbox_events", "attempts", "'many'"},
		{"inbox_events", "seq", "'x'"},
		{"inbox_events", "lease_expires_at", "'soon'"},
		{"endpoint_deliveries", "available_at", "-9223372036854775808"},
		{"endpoint_deliveries", "created_at", "'today'"},
		{"endpoint_deliveries", "attempts", "'many'"},
		{"endpoint_deliveries", "headers", "'[1, 2]'"},
		{"endpoint_attempts", "at", "'now'"},
		{"endpoints", "failing_since", "'long ago'"},
		{"endpoints", "created_at", "9223372036854775807"},
	}
}

// testOtherTablesReadHostileRows: rows of the inbox's and the endpoints'
// tables with hostile values do not break their lists, counts and claims.
func testOtherTablesReadHostileRows(t *testing.T, s raw) {
	ctx := ctxFor(t)
	inbox, ok := s.Outbox.(store.InboxReader)
	endpoints, ok2 := s.Outbox.(store.Endpoints)
	if !ok || !ok2 {
		t.Fatalf("%T is no store.InboxReader and store.Endpoints: a store's driver must be both", s.Outbox)
	}
	now := nowSQL(s.Dialect)
	for _, e := range otherTableEdges(s.Dialect) {
		table, column, value := e[0], e[1], e[2]
		endpoint := postbox.NewID()
		rows := map[string]map[string]string{
			"endpoints": {"id": "'" + endpoint.String() + "'", "url": "'https://example.com/hook'", "secret": "'s'",
				"created_at": now, "updated_at": now},
			"inbox_events": {"id": "'" + postbox.NewID().String() + "'", "handler_status": "'failed'", "payload": `'{}'`},
			"endpoint_deliveries": {"event_id": "'" + postbox.NewID().String() + "'", "endpoint_id": "'" + endpoint.String() + "'",
				"event_type": "'order.paid'", "payload": `'{}'`, "available_at": now, "created_at": now},
			"endpoint_attempts": {"endpoint_id": "'" + endpoint.String() + "'", "event_id": "'" + postbox.NewID().String() + "'", "attempt": "1", "at": now},
		}
		order := []string{"endpoints", "inbox_events", "endpoint_deliveries", "endpoint_attempts"}
		rows[table][column] = value
		refused := false
		for _, tab := range order {
			var names, values []string
			for n, v := range rows[tab] {
				names, values = append(names, n), append(values, v)
			}
			q := fmt.Sprintf("insert into {%s} (%s) values (%s)", tab, strings.Join(names, ", "), strings.Join(values, ", "))
			err := s.Exec(ctx, q)
			if err != nil && tab == table {
				refused = true // the schema refuses the value: fine
				break
			}
			if err != nil {
				t.Fatalf("%s.%s = %s: insert into %s: %v", table, column, value, tab, err)
			}
		}
		if refused {
			continue
		}
		what := table + "." + column + " = " + value
		for _, status := range []string{store.StatusPending, store.StatusDone, store.StatusFailed} {
			recs, err := inbox.InboxList(ctx, store.InboxListParams{Status: status, Limit: 100})
			if err != nil {
				t.Fatalf("%s: inbox list %s: %v", what, status, err)
			}
			for _, r := range recs {
				if _, err := inbox.InboxGet(ctx, r.ID); err != nil {
					t.Fatalf("%s: inbox get: %v", what, err)
				}
			}
		}
		if _, err := endpoints.EndpointList(ctx); err != nil {
			t.Fatalf("%s: endpoint list: %v", what, err)
		}
		if _, err := endpoints.EndpointGet(ctx, endpoint); err != nil {
			t.Fatalf("%s: endpoint get: %v", what, err)
		}
		one, err := endpoints.DeliveryCounts(ctx, endpoint)
		if err != nil {
			t.Fatalf("%s: delivery counts: %v", what, err)
		}
		all, err := endpoints.DeliveryCountsAll(ctx)
		if err != nil {
			t.Fatalf("%s: delivery counts of every endpoint: %v", what, err)
		}
		if got, ok := all[endpoint]; !ok || countsOnly(got) != countsOnly(one) {
			t.Errorf("%s: delivery counts of every endpoint say %+v (listed %t), DeliveryCounts %+v", what, got, ok, one)
		}
		checkHostileSummary(t, endpoints, what, endpoint, table == "endpoint_attempts" && column == "at")
		for _, status := range []string{store.StatusPending, store.StatusFailed} {
			if _, err := endpoints.DeliveryList(ctx, endpoint, status, 100); err != nil {
				t.Fatalf("%s: delivery list %s: %v", what, status, err)
			}
		}
		if _, err := endpoints.AttemptList(ctx, endpoint, 100); err != nil {
			t.Fatalf("%s: attempt list: %v", what, err)
		}
		lane := endpoints.EndpointLane(store.Endpoint{ID: endpoint})
		if _, err := lane.Claim(ctx, store.ClaimParams{Owner: "relay-a", Limit: 10, Lease: lease}); err != nil {
			t.Fatalf("%s: lane claim: %v", what, err)
		}
	}
}

// checkHostileSummary: AttemptSummary reads the one attempt of endpoint
// (a success) among hostile rows (what; the store holds those of the edges
// before too). An attempt whose time is not one (badTime: PostgreSQL's
// infinity, SQLite's text) is counted for every since, as both stores
// order it after every time, and is never Last; one made now is counted
// since the zero time with its time, and not since an hour from now.
func checkHostileSummary(t *testing.T, s store.Endpoints, what string, endpoint uuid.UUID, badTime bool) {
	t.Helper()
	for _, later := range []bool{false, true} {
		since := time.Time{}
		if later {
			since = time.Now().Add(time.Hour)
		}
		all, err := s.AttemptSummary(ctxFor(t), since)
		if err != nil {
			t.Fatalf("%s: attempt summary since %v: %v", what, since, err)
		}
		var got []store.AttemptSummary
		for _, a := range all {
			if a.EndpointID == endpoint {
				got = append(got, a)
			}
		}
		if later && !badTime {
			if len(got) != 0 {
				t.Errorf("%s: attempt summary since an hour from now = %+v, want the endpoint absent", what, got)
			}
			continue
		}
		if len(got) != 1 || got[0].Attempts != 1 || got[0].Succeeded != 1 || got[0].Last.IsZero() != badTime {
			t.Errorf("%s: attempt summary since %v = %+v, want the endpoint's one success, its time read: %t",
				what, since, got, !badTime)
		}
	}
}
