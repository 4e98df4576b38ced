package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// open opens a store on a new database file in t's temporary directory.
func open(t testing.TB, cfg sqlite.Config) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "postbox.db")
	s, err := sqlite.Open(context.Background(), path, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

// newStore returns a fresh, migrated store.
func newStore(t testing.TB, cfg sqlite.Config) *sqlite.Store {
	t.Helper()
	s, _ := open(t, cfg)
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return s
}

func event(agg string, n int) postbox.Event {
	return postbox.Event{
		AggregateType: "order",
		AggregateID:   agg,
		EventType:     "order.updated",
		Payload:       fmt.Appendf(nil, `{"aggregate": %q, "n": %d}`, agg, n),
	}
}

// Every conformance suite, each test on a database file of its own.
func TestConformance(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{Dialect: "sqlite", New: subject(sqlite.Config{})})
}

// Every conformance suite again, on tables with a prefix, synchronous FULL.
func TestConformanceWithTablePrefix(t *testing.T) {
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{Dialect: "sqlite",
		New: subject(sqlite.Config{TablePrefix: "pb_", Synchronous: "full"})})
}

// tableName is a table's name in braces, in the hostile suite's SQL.
var tableName = regexp.MustCompile(`\{[a-z_]+\}`)

// subject returns fresh stores for the suites, with a business table,
// effects, beside their inbox. Every SQLite store claims in order as it
// is: the schema parameters ask for nothing more.
func subject(cfg sqlite.Config) func(t *testing.T, _ store.SchemaParams) storetest.Subject[*sql.Tx] {
	return func(t *testing.T, _ store.SchemaParams) storetest.Subject[*sql.Tx] {
		s := newStore(t, cfg)
		effects := s.Table("effects")
		if _, err := s.DB().Exec("create table " + effects + " (key text not null)"); err != nil {
			t.Fatal(err)
		}
		return storetest.Subject[*sql.Tx]{
			Store:  s,
			Driver: s.Driver(),
			Exec: func(ctx context.Context, query string, args ...any) error {
				_, err := s.DB().ExecContext(ctx, tableName.ReplaceAllStringFunc(query, func(name string) string { return s.Table(strings.Trim(name, "{}")) }), args...)
				return err
			},
			Loosen: func(t *testing.T) {
				if _, err := s.DB().ExecContext(t.Context(), "drop trigger "+s.Table("outbox_events_bounds")); err != nil {
					t.Fatal(err)
				}
			},
			Effect: func(ctx context.Context, tx *sql.Tx, key string) error {
				_, err := tx.ExecContext(ctx, "insert into "+effects+" (key) values (?)", key)
				return err
			},
			Effects: func(ctx context.Context, key string) (n int, err error) {
				err = s.DB().QueryRowContext(ctx, "select count(*) from "+effects+" where key = ?", key).Scan(&n)
				return n, err
			},
		}
	}
}

func TestOpenConfiguresEveryConnection(t *testing.T) {
	s, _ := open(t, sqlite.Config{Synchronous: "FULL", BusyTimeout: 1234 * time.Millisecond})
	ctx := t.Context()
	// Hold several connections at once so that each is a different one.
	var conns []*sql.Conn
	for range 3 {
		c, err := s.DB().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	for i, c := range conns {
		var journal string
		var sync, fk, busy int
		for _, q := range []struct {
			pragma string
			dest   any
		}{{"journal_mode", &journal}, {"synchronous", &sync}, {"foreign_keys", &fk}, {"busy_timeout", &busy}} {
			if err := c.QueryRowContext(ctx, "pragma "+q.pragma).Scan(q.dest); err != nil {
				t.Fatalf("connection %d: pragma %s: %v", i, q.pragma, err)
			}
		}
		if journal != "wal" || sync != 2 || fk != 1 || busy != 1234 {
			t.Fatalf("connection %d: journal_mode %s, synchronous %d, foreign_keys %d, busy_timeout %d; want wal, 2 (FULL), 1, 1234",
				i, journal, sync, fk, busy)
		}
	}
}

func TestOpenFileURI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "postbox.db")
	s, err := sqlite.Open(t.Context(), "file:"+path+"?cache=private", sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var journal string
	if err := s.DB().QueryRow("pragma journal_mode").Scan(&journal); err != nil || journal != "wal" {
		t.Fatalf("journal_mode %q, %v; want wal", journal, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
}

func TestOpenRefusesBadSettings(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		cfg  sqlite.Config
		want string
	}{
		{":memory:", sqlite.Config{}, "in-memory"},
		{"file:x?mode=memory&cache=shared", sqlite.Config{}, "in-memory"},
		{"", sqlite.Config{}, "in-memory"},
		{filepath.Join(dir, "a?b.db"), sqlite.Config{}, "file: URI"},
		{filepath.Join(dir, "x.db"), sqlite.Config{TablePrefix: "app-"}, "Config.TablePrefix"},
		{filepath.Join(dir, "x.db"), sqlite.Config{Synchronous: "OFF"}, "Config.Synchronous"},
		{filepath.Join(dir, "x.db"), sqlite.Config{BusyTimeout: time.Microsecond}, "Config.BusyTimeout"},
		{filepath.Join(dir, "x.db"), sqlite.Config{MaxOpenConns: -1}, "Config.MaxOpenConns"},
		{filepath.Join(dir, "missing", "x.db"), sqlite.Config{}, "open"},
	} {
		s, err := sqlite.Open(t.Context(), tc.path, tc.cfg)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q, %+v) succeeded", tc.path, tc.cfg)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q, %+v): %v; want an error about %s", tc.path, tc.cfg, err, tc.want)
		}
	}
}

// versions are the versions of the store's migrations, in order.
func versions(t *testing.T) []int {
	t.Helper()
	migrations, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range migrations {
		out = append(out, m.Version)
	}
	return out
}

func TestMigrateIsIdempotent(t *testing.T) {
	s, _ := open(t, sqlite.Config{})
	ctx := t.Context()
	applied, err := s.Migrate(ctx)
	if want := versions(t); err != nil || !reflect.DeepEqual(applied, want) {
		t.Fatalf("first migrate: %v, %v; want %v", applied, err, want)
	}
	applied, err = s.Migrate(ctx)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second migrate: %v, %v; want nothing applied", applied, err)
	}
	rows, err := s.DB().QueryContext(ctx, "select version, name, applied_at from postbox_migrations order by version")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v int
		var name string
		var at int64
		if err := rows.Scan(&v, &name, &at); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(time.UnixMicro(at)); d < 0 || d > time.Minute {
			t.Errorf("migration %d applied_at %d is not a recent Unix time in microseconds", v, at)
		}
		got = append(got, fmt.Sprintf("%04d_%s", v, name))
	}
	migrations, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range migrations {
		want = append(want, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("postbox_migrations: %v, want %v", got, want)
	}
}

// Handles on one file behave like processes: only SQLite's locking is
// shared. Several open a new file and migrate it at the same moment.
func TestMigrateConcurrently(t *testing.T) {
	path := filepath.Join(t.TempDir(), "postbox.db")
	const n = 4
	stores := make([]*sqlite.Store, n)
	results := make([][]int, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := sqlite.Open(t.Context(), path, sqlite.Config{})
			if err != nil {
				errs[i] = err
				return
			}
			stores[i] = s
			results[i], errs[i] = s.Migrate(t.Context())
		})
	}
	close(start)
	wg.Wait()
	for _, s := range stores {
		if s != nil {
			defer s.Close()
		}
	}
	var all []int
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("open and migrate %d: %v", i, errs[i])
		}
		all = append(all, results[i]...)
	}
	if slices.Sort(all); !reflect.DeepEqual(all, versions(t)) {
		t.Fatalf("concurrent migrations applied %v in total (%v), want %v once", all, results, versions(t))
	}
	if err := stores[0].Enqueue(t.Context(), event("1", 1)); err != nil {
		t.Fatalf("enqueue after concurrent migrations: %v", err)
	}
}

// The migrations have the numbers and names of the PostgreSQL store's.
func TestMigrationsMatchPostgres(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "postgres", "migrations"))
	if err != nil {
		t.Skipf("PostgreSQL migrations not found: %v", err)
	}
	var want []string
	for _, e := range entries {
		want = append(want, strings.TrimSuffix(e.Name(), ".sql"))
	}
	ms, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%04d_%s", m.Version, m.Name))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SQLite migrations %v, PostgreSQL migrations %v", got, want)
	}
}

// The tables and indexes have the names of the PostgreSQL store's, with
// the same columns.
func TestSchemaMatchesPostgres(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "postgres", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Skipf("PostgreSQL migrations not found: %v", err)
	}
	want := map[string][]string{} // table -> columns; "indexes" -> index names
	column := regexp.MustCompile(`^  ([a-z_]+) `)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		table, altered := "", ""
		for line := range strings.Lines(string(b)) {
			switch {
			case strings.HasPrefix(line, "alter table {schema}."):
				altered = strings.Fields(strings.TrimPrefix(line, "alter table {schema}."))[0]
			case altered != "" && strings.HasPrefix(strings.TrimSpace(line), "add column "):
				want[altered] = append(want[altered], strings.Fields(line)[2])
			case strings.HasPrefix(line, "create table {schema}."):
				table = strings.Fields(strings.TrimPrefix(line, "create table {schema}."))[0]
				want[table] = nil
			case strings.HasPrefix(line, "create index ") || strings.HasPrefix(line, "create unique index "):
				f := strings.Fields(line)
				want["indexes"] = append(want["indexes"], f[len(f)-1])
			case strings.HasPrefix(line, "drop index "):
				fields := strings.Fields(strings.TrimSuffix(strings.TrimSpace(line), ";"))
				name := strings.TrimPrefix(fields[len(fields)-1], "{schema}.")
				if !slices.Contains(want["indexes"], name) {
					t.Fatalf("%s drops index %s, which no earlier migration creates", filepath.Base(f), name)
				}
				want["indexes"] = slices.DeleteFunc(want["indexes"], func(s string) bool { return s == name })
			case strings.HasPrefix(line, ")"):
				table = ""
			case table != "":
				if m := column.FindStringSubmatch(line); m != nil && m[1] != "primary" {
					want[table] = append(want[table], m[1])
				}
			}
		}
	}
	s := newStore(t, sqlite.Config{})
	got := map[string][]string{}
	query := func(q string, args ...any) []string {
		rows, err := s.DB().Query(q, args...)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			out = append(out, name)
		}
		return out
	}
	for _, table := range query("select name from sqlite_schema where type = 'table' and name not like 'sqlite_%' and name <> 'postbox_migrations'") {
		got[table] = query("select name from pragma_table_info(?) order by cid", table)
	}
	got["indexes"] = query("select name from sqlite_schema where type = 'index' and name not like 'sqlite_%'")
	// The one intended difference: PostgreSQL leases a batch of events in
	// one outbox_leases row (claims take turns on an advisory lock), SQLite
	// leases each row (its claims take turns on the write lock).
	delete(want, "outbox_leases")
	want["outbox_events"] = append(want["outbox_events"], "attempts", "lease_owner", "lease_expires_at")
	want["indexes"] = append(want["indexes"], "outbox_events_lease_idx")
	// PostgreSQL builds the index of ordered claims only on demand
	// (Store.MigrateOrdered, "postbox migrate --ordered"), so that producers
	// of unordered outboxes do not maintain it; SQLite keeps it, since its
	// ordered claim needs it and its relay takes no extra step.
	if slices.Contains(want["indexes"], "outbox_events_aggregate_open_idx") {
		t.Fatal("PostgreSQL migrations keep outbox_events_aggregate_open_idx: update this test's intended differences")
	}
	want["indexes"] = append(want["indexes"], "outbox_events_aggregate_open_idx")
	for k := range want {
		slices.Sort(want[k])
	}
	for k := range got {
		slices.Sort(got[k])
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("SQLite schema:\n%v\nPostgreSQL schema:\n%v", got, want)
	}
}

// The article's plain INSERT, knowing none of postbox's columns, works and
// wakes the relay.
func TestArticleInsert(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	woke := listen(t, s)
	before := time.Now().Add(-time.Millisecond)
	_, err := s.DB().ExecContext(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42')`)
	if err != nil {
		t.Fatalf("article insert: %v", err)
	}
	waitWake(t, woke, "a plain INSERT")
	recs, err := s.List(ctx, store.ListParams{Status: store.StatusPending, Limit: 10})
	if err != nil || len(recs) != 1 {
		t.Fatalf("list: %v, %v", recs, err)
	}
	r := recs[0]
	if r.ID.Version() != 7 || r.ID.Variant() != uuid.RFC4122 {
		t.Errorf("default id %s is not a UUIDv7", r.ID)
	}
	if idTime := time.Unix(r.ID.Time().UnixTime()); idTime.Before(before.Truncate(time.Second)) || idTime.After(time.Now().Add(time.Second)) {
		t.Errorf("default id %s carries time %v, not the time of the insert", r.ID, idTime)
	}
	if r.CreatedAt.Before(before) || r.CreatedAt.After(time.Now()) || !r.AvailableAt.Equal(r.CreatedAt) {
		t.Errorf("default times: created %v, available %v; insert at %v", r.CreatedAt, r.AvailableAt, before)
	}
	if r.DedupKey != "order.created:42" || r.Retries != 0 || r.Attempts != 0 || r.OutboxSeq <= 0 || r.Headers != nil {
		t.Errorf("defaults of a plain insert: %+v", r)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "relay", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 1 || got[0].ID != r.ID || string(got[0].Payload) != `{"order_id": 42}` {
		t.Fatalf("claim of the plain insert: %+v, %v", got, err)
	}

	// The same insert again is refused by the dedup key; bad JSON by the check.
	_, err = s.DB().ExecContext(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42')`)
	if err == nil {
		t.Error("second plain insert with the same dedup key succeeded")
	}
	_, err = s.DB().ExecContext(ctx, `insert into outbox_events(event_type, payload) values ('x', '{"order_id": ')`)
	if err == nil {
		t.Error("plain insert of malformed JSON succeeded")
	}
	_, err = s.DB().ExecContext(ctx, `insert into outbox_events(id, event_type, payload) values ('0190A0B0-0000-7000-8000-000000000000', 'x', '{}')`)
	if err == nil {
		t.Error("plain insert of a non-canonical id succeeded")
	}
	_, err = s.DB().ExecContext(ctx, `insert into outbox_events(event_type, payload, available_at) values ('x', '{}', '2030-01-01 00:00:00')`)
	if err == nil {
		t.Error("plain insert of a text time succeeded")
	}
}

// Times keep PostgreSQL's precision, microseconds, through every column.
func TestTimestampsKeepMicroseconds(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := t.Context()
	at := time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)
	events := []postbox.Event{event("1", 1)}
	events[0].AvailableAt = at
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	if events[0].ID == uuid.Nil {
		t.Fatal("Enqueue did not write the generated id back")
	}
	r, err := s.Get(ctx, events[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Microsecond); !r.AvailableAt.Equal(want) {
		t.Fatalf("available_at: got %v, want %v", r.AvailableAt, want)
	}
	if r.CreatedAt.IsZero() || r.CreatedAt.Nanosecond()%1000 != 0 {
		t.Fatalf("created_at: %v", r.CreatedAt)
	}
	// Rows order by time as numbers, whatever the year.
	var n int
	if err := s.DB().QueryRowContext(ctx, "select count(*) from outbox_events where available_at > ?", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("comparison on available_at: %d, %v", n, err)
	}
}

// listen registers a listener on s and returns its wake-up channel.
func listen(t *testing.T, s *sqlite.Store) <-chan struct{} {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready := make(chan struct{})
	woke := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Driver().Listen(ctx, func(store.Listening) { close(ready) }, func() {
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("listen: %v", err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("listen: %v", err)
	}
	return woke
}

func waitWake(t *testing.T, woke <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-woke:
	case <-time.After(5 * time.Second):
		t.Fatalf("no wake-up after %s", after)
	}
}

func noWake(t *testing.T, woke <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-woke:
		t.Fatalf("woken after %s", after)
	case <-time.After(20 * time.Millisecond):
	}
}

// CheckSchema says what to run on a file that was never migrated, and
// MustExist opens no file that is not there.
func TestCheckSchemaAndMustExist(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "missing.db")
	if _, err := sqlite.Open(ctx, missing, sqlite.Config{MustExist: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("open a missing file with MustExist: %v, want os.ErrNotExist", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("MustExist created the file: %v", err)
	}
	s, _ := open(t, sqlite.Config{})
	if err := s.CheckSchema(ctx, store.SchemaParams{}); !errors.Is(err, store.ErrNotMigrated) || !strings.Contains(err.Error(), "postbox migrate") {
		t.Fatalf("CheckSchema before Migrate: %v, want ErrNotMigrated naming postbox migrate", err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSchema(ctx, store.SchemaParams{Ordered: true}); err != nil {
		t.Fatalf("CheckSchema after Migrate: %v", err)
	}
}
