package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

// hostileRow is a failed event a plain-SQL producer (and a receiver's
// error) could leave.
type hostileRow struct {
	name                                         string
	eventType, aggregateType, aggregateID, error string
	payload                                      string
}

func hostileRows() []hostileRow {
	deep := strings.Repeat("[", 900) + strings.Repeat("]", 900)
	return []hostileRow{
		{name: "huge", eventType: "order." + strings.Repeat("x", 3000), aggregateType: "order",
			aggregateID: strings.Repeat("a", 100_000), error: "status 500: " + strings.Repeat("e", 50_000),
			payload: `{"note": "` + strings.Repeat("p", 50_000) + `"}`},
		{name: "control", eventType: "order.\x1b[2J\x07paid\r", aggregateType: "order\x1b]0;pwned\x07",
			aggregateID: "\u202eevil\u202c", error: "status 500\r\n\x1b]0;title\x07\tend", payload: `{"k": "\u001b[2J"}`},
		{name: "deep", eventType: "order.deep", aggregateType: "order", aggregateID: "1", error: "x", payload: deep},
		{name: "healthy", eventType: "order.paid", aggregateType: "order", aggregateID: "42", error: "status 503", payload: `{"order_id": 42}`},
	}
}

// insertHostile writes the rows as failed events with plain SQL, the way
// any producer may, and returns their ids.
func insertHostile(t *testing.T, s console.Store, rows []hostileRow) []uuid.UUID {
	t.Helper()
	ctx := ctxFor(t)
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		ids[i] = postbox.NewID()
		var err error
		switch s := s.(type) {
		case *postgres.Store:
			_, err = s.Pool().Exec(ctx, fmt.Sprintf(`insert into %s.outbox_events
				(id, event_type, aggregate_type, aggregate_id, payload, status, last_error, processed_at, retries)
				values ($1, $2, $3, $4, $5, 'failed', $6, now(), 1)`, s.Schema()),
				ids[i], r.eventType, r.aggregateType, r.aggregateID, r.payload, r.error)
		case *sqlite.Store:
			_, err = s.DB().ExecContext(ctx, `insert into outbox_events
				(id, event_type, aggregate_type, aggregate_id, payload, status, last_error, processed_at, retries)
				values (?, ?, ?, ?, ?, 'failed', ?, ?, 1)`,
				ids[i].String(), r.eventType, r.aggregateType, r.aggregateID, r.payload, r.error, time.Now().UnixMicro())
		default:
			t.Fatalf("store %T", s)
		}
		if err != nil {
			t.Fatalf("row %s: %v", r.name, err)
		}
	}
	return ids
}

// Hostile rows (huge strings, control characters, bidirectional
// overrides, deeply nested payloads) beside a healthy one: every page
// answers 200, a table shows each field capped and its control characters
// escaped, and the event's own page shows the whole value.
func TestPagesKeepWorkingWithHostileRows(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s console.Store) {
		rows := hostileRows()
		ids := insertHostile(t, s, rows)
		inboxID := uuid.New()
		claimInbox(t, s, inboxID, "handler: \x1b[31mred\x07 "+strings.Repeat("h", 20_000))
		c := serve(t, console.Config{Store: s})
		raw := []string{"\x1b", "\x07", "\r", "\u202e"}
		paths := []string{"/", "/failed", "/inbox", "/inbox/" + inboxID.String(), "/search?q=" + url.QueryEscape("\x1b[2J"+strings.Repeat("q", 5000))}
		for _, id := range ids {
			paths = append(paths, "/events/"+id.String())
		}
		for _, path := range paths {
			res, body := c.get(path)
			if res.StatusCode != http.StatusOK && !(strings.HasPrefix(path, "/search") && res.StatusCode == http.StatusNotFound) {
				t.Fatalf("GET %.80s: %d with hostile rows present:\n%.2000s", path, res.StatusCode, body)
			}
			for _, bad := range raw {
				if strings.Contains(body, bad) {
					t.Errorf("GET %.80s: holds the raw character %q", path, bad)
				}
			}
		}
		_, body := c.get("/failed")
		for _, id := range ids {
			if !strings.Contains(body, `data-id="`+id.String()+`"`) {
				t.Fatalf("the failed page lacks row %s", id)
			}
		}
		if strings.Contains(body, strings.Repeat("a", 121)) || strings.Contains(body, strings.Repeat("e", 401)) {
			t.Fatal("the failed page shows an uncapped field")
		}
		if len(body) > 64<<10 {
			t.Fatalf("the failed page is %d bytes: the huge fields are not capped", len(body))
		}
		for _, want := range []string{`order.\x1b[2J\x07paid\r`, `\u202eevil\u202c`, "…"} {
			if !strings.Contains(body, want) {
				t.Errorf("the failed page lacks %q", want)
			}
		}
		if _, body := c.get("/inbox"); strings.Contains(body, strings.Repeat("h", 401)) || !strings.Contains(body, `\x1b[31mred\x07`) {
			t.Error("the inbox page: the handler error is uncapped or its control characters are raw")
		}
		// The details view shows the whole value.
		_, body = c.get("/events/" + ids[0].String())
		if !strings.Contains(body, strings.Repeat("a", 100_000)) || !strings.Contains(body, strings.Repeat("e", 50_000)) {
			t.Fatal("the event page does not show the whole aggregate id and error")
		}
		_, body = c.get("/events/" + ids[2].String())
		if len(body) > 64<<10 {
			t.Fatalf("the page of a deeply nested payload is %d bytes: indented beyond reason", len(body))
		}
		if !strings.Contains(body, strings.Repeat("[", 900)) {
			t.Fatal("the deeply nested payload is not shown as stored")
		}
	})
}

// An event whose times are at the ends of what PostgreSQL holds (short of
// infinity) shows.
func TestPagesShowExtremeTimes(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	pgtest.DropBounds(t, s)
	ids := insertHostile(t, s, hostileRows()[3:])
	if _, err := s.Pool().Exec(context.Background(), fmt.Sprintf(
		`update %s.outbox_events set processed_at = '294276-12-31 23:59:59+00', created_at = '4713-01-01 00:00:00+00 BC', available_at = '294276-12-31 23:59:59+00' where id = $1`,
		s.Schema()), ids[0]); err != nil {
		t.Fatal(err)
	}
	c := serve(t, console.Config{Store: s})
	for _, path := range []string{"/", "/failed", "/events/" + ids[0].String()} {
		res, body := c.get(path)
		wantStatus(t, res, body, http.StatusOK)
	}
}

// A pending row created at '-infinity' (PostgreSQL accepts it) must not
// take the overview down: it answers 200 with the relays, and either the
// counts or a note that they could not be read.
func TestOverviewSurvivesAnUnreadableRow(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	pgtest.DropBounds(t, s)
	if _, err := s.Pool().Exec(context.Background(), fmt.Sprintf(
		`insert into %s.outbox_events (event_type, payload, created_at, available_at) values ('order.paid', '{}', '-infinity', '-infinity')`,
		s.Schema())); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool().Exec(context.Background(), fmt.Sprintf(
		`insert into %s.outbox_events (event_type, payload, status, processed_at, last_error) values ('order.paid', '{}', 'failed', 'infinity', 'x')`,
		s.Schema())); err != nil {
		t.Fatal(err)
	}
	c := serve(t, console.Config{Store: s})
	res, body := c.get("/")
	wantStatus(t, res, body, http.StatusOK)
	if !strings.Contains(body, `id="count-pending"`) && !strings.Contains(body, `id="counts-error"`) {
		t.Fatalf("the overview shows neither the counts nor why not:\n%s", body)
	}
	if !strings.Contains(body, "<h2>Relays</h2>") {
		t.Fatal("the overview lacks its relays")
	}
}

// Endpoints that cannot be read (here: their table is gone) take neither
// the overview nor the outbox's failed events down: both say what is
// missing and show the rest.
func TestPagesSurviveUnreadableEndpoints(t *testing.T) {
	t.Parallel()
	s := pgtest.Store(t)
	ids := failEvents(t, s, []postbox.Event{orderEvent(1)}, []string{"status 500"})
	if _, err := s.Pool().Exec(context.Background(), fmt.Sprintf(`drop table %s.endpoints cascade`, s.Schema())); err != nil {
		t.Fatal(err)
	}
	c := serve(t, console.Config{Store: s})
	res, body := c.get("/")
	wantStatus(t, res, body, http.StatusOK)
	if !strings.Contains(body, `id="count-failed">1<`) || !strings.Contains(body, `id="endpoints-error"`) {
		t.Fatalf("overview: want the outbox's counts and a note that the endpoints could not be read:\n%s", body)
	}
	res, body = c.get("/failed")
	wantStatus(t, res, body, http.StatusOK)
	if !strings.Contains(body, `<tr data-id="`+ids[0].String()+`"`) || !strings.Contains(body, `id="endpoints-error"`) {
		t.Fatalf("failed page: want the outbox's failed event and a note that the endpoints could not be listed:\n%s", body)
	}
}
