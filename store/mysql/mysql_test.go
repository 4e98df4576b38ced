package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/postboxtest/storetest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/mysql"
)

// open opens a store on a fresh database, dropped when t ends.
func open(t testing.TB, cfg mysql.Config) *mysql.Store {
	t.Helper()
	s, err := mysql.Open(context.Background(), mysqltest.Database(t), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Every conformance suite, each test on a database of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{Dialect: "mysql", New: subject(mysql.Config{})})
}

// Every conformance suite again, on tables with a prefix.
func TestConformanceWithTablePrefix(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.Harness[*sql.Tx]{Dialect: "mysql", New: subject(mysql.Config{TablePrefix: "pb_"})})
}

// tableName is a table's name in braces, in the hostile suite's SQL.
var tableName = regexp.MustCompile(`\{[a-z_]+\}`)

// subject returns fresh stores for the suites, with a business table,
// effects, beside their inbox. Every MySQL store claims in order as it
// is: the schema parameters ask for nothing more.
func subject(cfg mysql.Config) func(t *testing.T, _ store.SchemaParams) storetest.Subject[*sql.Tx] {
	return func(t *testing.T, _ store.SchemaParams) storetest.Subject[*sql.Tx] {
		s := mysqltest.StoreWith(t, cfg)
		effects := s.Table("effects")
		if _, err := s.DB().Exec("create table " + effects + " (k varchar(255) not null)"); err != nil {
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
				if _, err := s.DB().ExecContext(t.Context(), "alter table "+s.Table("outbox_events")+" drop constraint "+s.Table("outbox_events_bounds")); err != nil {
					t.Fatal(err)
				}
			},
			Effect: func(ctx context.Context, tx *sql.Tx, key string) error {
				_, err := tx.ExecContext(ctx, "insert into "+effects+" (k) values (?)", key)
				return err
			},
			Effects: func(ctx context.Context, key string) (n int, err error) {
				err = s.DB().QueryRowContext(ctx, "select count(*) from "+effects+" where k = ?", key).Scan(&n)
				return n, err
			},
		}
	}
}

// Migrate applies every migration once; a second run applies none.
func TestMigrateIdempotent(t *testing.T) {
	s := open(t, mysql.Config{})
	first, err := s.Migrate(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	all, err := mysql.Migrations()
	if err != nil || len(first) != len(all) {
		t.Fatalf("applied %v of %d migrations, %v", first, len(all), err)
	}
	if again, err := s.Migrate(t.Context()); err != nil || len(again) != 0 {
		t.Fatalf("second run applied %v, %v; want nothing", again, err)
	}
	if err := s.CheckSchema(t.Context(), store.SchemaParams{Ordered: true}); err != nil {
		t.Fatal(err)
	}
}

// Migrations run at once on one database take turns: each is applied
// once, and every run ends without an error.
func TestMigrateConcurrent(t *testing.T) {
	dsn := mysqltest.Database(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := map[int]int{}
	for range 4 {
		wg.Go(func() {
			s, err := mysql.Open(t.Context(), dsn, mysql.Config{TablePrefix: "c_"})
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			applied, err := s.Migrate(t.Context())
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range applied {
				count[v]++
			}
		})
	}
	wg.Wait()
	all, err := mysql.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if count[m.Version] != 1 {
			t.Errorf("migration %d applied %d times, want once", m.Version, count[m.Version])
		}
	}
}

// Times keep their microseconds, in UTC, whatever the time zone of the
// time given.
func TestMicrosecondsKept(t *testing.T) {
	s := mysqltest.Store(t)
	at := time.Date(2030, 5, 6, 7, 8, 9, 123456789, time.FixedZone("X", 5*3600+1800))
	ev := postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(`{}`), AvailableAt: at}
	if err := s.Enqueue(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(t.Context(), ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Microsecond); !r.AvailableAt.Equal(want) || r.AvailableAt.Location() != time.UTC {
		t.Fatalf("available at %v, want %v in UTC", r.AvailableAt, want)
	}
	if r.CreatedAt.Nanosecond()%int(time.Microsecond) != 0 || time.Since(r.CreatedAt).Abs() > time.Minute {
		t.Fatalf("created at %v: want now, to the microsecond", r.CreatedAt)
	}
}

// Open refuses what it cannot work with, naming the setting.
func TestOpenRefusesBadSettings(t *testing.T) {
	dsn := mysqltest.Database(t)
	for name, tc := range map[string]struct {
		dsn  string
		cfg  mysql.Config
		want string
	}{
		"prefix":          {dsn, mysql.Config{TablePrefix: "a-b"}, "Config.TablePrefix"},
		"long prefix":     {dsn, mysql.Config{TablePrefix: strings.Repeat("p", 33)}, "Config.TablePrefix"},
		"connections":     {dsn, mysql.Config{MaxOpenConns: -1}, "Config.MaxOpenConns"},
		"lock wait":       {dsn, mysql.Config{LockWaitTimeout: 1500 * time.Millisecond}, "Config.LockWaitTimeout"},
		"dial":            {dsn, mysql.Config{DialTimeout: -time.Second}, "Config.DialTimeout"},
		"no database":     {strings.TrimSuffix(mysqltest.URL(), "/"), mysql.Config{}, "names no database"},
		"no host":         {"mysql:///db", mysql.Config{}, "names no host"},
		"not a DSN":       {"postgres://host/db", mysql.Config{}, "neither mysql://"},
		"bad param":       {dsn + "?timeout=%zz", mysql.Config{}, "its parameters"},
		"database absent": {strings.TrimSuffix(mysqltest.URL(), "/") + "/pbtest_absent_db", mysql.Config{}, "pbtest_absent_db"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := mysql.Open(t.Context(), tc.dsn, tc.cfg)
			if err == nil {
				s.Close()
				t.Fatalf("opened, want an error naming %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to name %q", err, tc.want)
			}
		})
	}
}

// No password is in String or in any error: neither the URL's nor the
// driver's.
func TestNoPasswordInErrorsOrString(t *testing.T) {
	const password = "s3cr3t-Pa55"
	for _, dsn := range []string{
		"mysql://root:" + password + "@127.0.0.1:1/db",
		"root:" + password + "@tcp(127.0.0.1:1)/db",
		"mysql://nobody:" + password + "@" + hostOf(t) + "/db",
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		s, err := mysql.Open(ctx, dsn, mysql.Config{DialTimeout: time.Second})
		cancel()
		if err == nil {
			s.Close()
			t.Fatalf("opened %s", dsn)
		}
		if strings.Contains(err.Error(), password) {
			t.Fatalf("error holds the password: %v", err)
		}
		named, err := mysql.Redacted(dsn)
		if err != nil || strings.Contains(named, password) || !strings.Contains(named, "xxxxx") {
			t.Fatalf("the store's name %q, %v: want the password redacted", named, err)
		}
	}
	s := mysqltest.Store(t)
	if strings.Contains(s.String(), password) || !strings.HasPrefix(s.String(), "mysql mysql://") {
		t.Fatalf("String() = %q", s.String())
	}
}

// hostOf is the test server's host:port.
func hostOf(t *testing.T) string {
	u, err := url.Parse(mysqltest.URL())
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// The article's plain SQL insert works as it is, and gets a UUIDv7 and the
// defaults; rows that break the bounds are refused at insert.
func TestPlainSQLInsert(t *testing.T) {
	s := mysqltest.Store(t)
	ctx := t.Context()
	if _, err := s.DB().ExecContext(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key) values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42');`); err != nil {
		t.Fatal(err)
	}
	r, err := s.GetByDedupKey(ctx, "order.created:42")
	if err != nil {
		t.Fatal(err)
	}
	if r.ID.Version() != 7 || r.Status != store.StatusPending || r.Attempts != 0 || r.EventType != "order.created" ||
		string(r.Payload) != `{"order_id": 42}` || time.Since(r.CreatedAt).Abs() > time.Minute || r.AvailableAt.IsZero() {
		t.Fatalf("row %+v", r)
	}
	_, err = s.DB().ExecContext(ctx, `insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key) values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42');`)
	if err == nil {
		t.Fatal("a second row with the dedup key: inserted")
	}
	for _, bad := range []string{
		`insert into outbox_events(event_type, payload, retries) values ('x', '{}', -1)`,
		`insert into outbox_events(event_type, payload, status) values ('x', '{}', 'sent')`,
		`insert into outbox_events(id, event_type, payload) values ('01A23B06-0445-7ACA-90B0-F9A332CFE68C', 'x', '{}')`,
		`insert into outbox_events(event_type, payload) values ('x', 'not json')`,
	} {
		if _, err := s.DB().ExecContext(ctx, bad); err == nil {
			t.Errorf("%s: inserted, want refused", bad)
		}
	}
}

// A claim that outlives its deadline is stopped by the server (its
// statement time limit, within the deadline), not abandoned by the
// client: it fails as a timeout and leases nothing.
func TestClaimPastItsDeadlineIsStoppedByTheServer(t *testing.T) {
	s := mysqltest.Store(t)
	ctx := t.Context()
	for range 3 {
		if err := s.Enqueue(ctx, postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Another session holds the outbox's table lock: the claim waits.
	conn, err := s.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "lock tables outbox_events write"); err != nil {
		t.Fatal(err)
	}
	claimCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	began := time.Now()
	got, err := s.Driver().Claim(claimCtx, store.ClaimParams{Owner: "late", Limit: 10, Lease: time.Minute})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim past its deadline: %d events, %v; want a deadline error", len(got), err)
	}
	var me *mysqldriver.MySQLError
	if !errors.As(err, &me) || time.Since(began) > 1900*time.Millisecond {
		t.Fatalf("the claim was not stopped by the server (after %v): %v", time.Since(began), err)
	}
	if _, err := conn.ExecContext(ctx, "unlock tables"); err != nil {
		t.Fatal(err)
	}
	got, err = s.Driver().Claim(ctx, store.ClaimParams{Owner: "next", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("the next claim: %d events, %v; want all 3 (the late claim leased none)", len(got), err)
	}
}

// Events written by plain SQL (as another process would) wake a listener
// by its poll of the newest seq, within a second of an idle wait; its
// Listening says so.
func TestListenPollsForOtherWriters(t *testing.T) {
	s := mysqltest.Store(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ready := make(chan store.Listening, 1)
	woke := make(chan struct{}, 1)
	go s.Driver().Listen(ctx, func(l store.Listening) { ready <- l }, func() {
		select {
		case woke <- struct{}{}:
		default:
		}
	})
	l := <-ready
	if !strings.Contains(l.Channel, "poll") || l.Dozer != nil {
		t.Fatalf("listening on %q, dozer %v: want the poll named, no dozer", l.Channel, l.Dozer)
	}
	time.Sleep(600 * time.Millisecond) // idle: the poll has slowed down
	began := time.Now()
	if _, err := s.DB().ExecContext(ctx, `insert into outbox_events(event_type, payload) values ('x', '{}')`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woke:
		if time.Since(began) > time.Second {
			t.Fatalf("woken after %v", time.Since(began))
		}
	case <-ctx.Done():
		t.Fatal("not woken")
	}
}

// Relays claiming in ordered mode at once (SKIP LOCKED, heads read then
// locked) never hold two events of one aggregate, and deliver each
// aggregate's events in the order they were written.
func TestOrderedClaimsAtOnce(t *testing.T) {
	s := mysqltest.Store(t)
	ctx := t.Context()
	const aggregates, perAggregate = 20, 15
	var events []postbox.Event
	for a := range aggregates {
		for n := range perAggregate {
			events = append(events, postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: fmt.Sprint(a),
				EventType: "order.updated", Payload: fmt.Appendf(nil, `{"n": %d}`, n)})
		}
	}
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	inFlight := map[string]bool{}
	delivered := map[string][]int64{}
	total := 0
	var wg sync.WaitGroup
	for r := range 6 {
		wg.Go(func() {
			owner := fmt.Sprint("relay-", r)
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
				got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: owner, Limit: 8, Lease: time.Minute, Ordered: true})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, e := range got {
					if inFlight[e.AggregateID] {
						t.Errorf("aggregate %s: two events in flight", e.AggregateID)
					}
					inFlight[e.AggregateID] = true
					delivered[e.AggregateID] = append(delivered[e.AggregateID], e.OutboxSeq)
				}
				total += len(got)
				done := total == len(events)
				mu.Unlock()
				time.Sleep(time.Millisecond) // in flight: a relay sends them now
				// Out of flight before the settle commits: the next event
				// of the aggregate can only be claimed after it.
				mu.Lock()
				for _, e := range got {
					inFlight[e.AggregateID] = false
				}
				mu.Unlock()
				ids := make([]uuid.UUID, len(got))
				for i, e := range got {
					ids[i] = e.ID
				}
				if err := s.Driver().Settle(ctx, store.SettleParams{Owner: owner, Done: ids}); err != nil {
					t.Error(err)
					return
				}
				if done {
					return
				}
				if len(got) == 0 {
					mu.Lock()
					done = total == len(events)
					mu.Unlock()
					if done {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if total != len(events) {
		t.Fatalf("delivered %d of %d events", total, len(events))
	}
	for agg, seqs := range delivered {
		if len(seqs) != perAggregate || !slices.IsSorted(seqs) {
			t.Errorf("aggregate %s delivered in order %v", agg, seqs)
		}
	}
}

// Relays claiming one endpoint's lane at once take turns on the
// endpoint's row: no delivery is leased twice.
func TestLaneClaimsAtOnceNeverShare(t *testing.T) {
	s := mysqltest.Store(t)
	ctx := t.Context()
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "e", URL: "https://example.com/hook",
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	routes := make([]store.Route, n)
	for i := range routes {
		routes[i] = store.Route{Event: postbox.Event{ID: postbox.NewID(), AggregateID: fmt.Sprint(i % 13),
			EventType: "order.updated", Payload: []byte(`{}`)}, Endpoints: []uuid.UUID{e.ID}}
	}
	if got, err := s.Driver().DeliveryInsert(ctx, routes); err != nil || got != n {
		t.Fatalf("inserted %d, %v", got, err)
	}
	lane := s.Driver().EndpointLane(e)
	var mu sync.Mutex
	count := map[uuid.UUID]int{}
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Go(func() {
			owner := fmt.Sprint("relay-", r)
			for {
				got, err := lane.Claim(ctx, store.ClaimParams{Owner: owner, Limit: 7, Lease: time.Minute})
				if err != nil || len(got) == 0 {
					if err != nil {
						t.Error(err)
					}
					return
				}
				mu.Lock()
				for _, d := range got {
					count[d.ID]++
				}
				mu.Unlock()
				ids := make([]uuid.UUID, len(got))
				for i, d := range got {
					ids[i] = d.ID
				}
				if err := lane.Settle(ctx, store.SettleParams{Owner: owner, Done: ids, Ended: []int64{got[0].Lease}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(count) != n {
		t.Fatalf("claimed %d distinct deliveries, want %d", len(count), n)
	}
	for id, c := range count {
		if c != 1 {
			t.Fatalf("delivery %s claimed %d times", id, c)
		}
	}
}
