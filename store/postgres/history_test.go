package postgres_test

import (
	"context"
	"math/rand"
	"path"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// A Requeue that meets a kept row while a retention step is deleting it
// waits for that delete, then writes the event again: it is Inserted,
// never Skipped as a row that is there.
func TestRequeueDuringRetentionDeleteInserts(t *testing.T) {
	s := pgtest.Store(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ev := postbox.Event{ID: postbox.NewID(), EventType: "order.paid", Payload: []byte(`{"n": 1}`)}
	if err := s.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	d := s.Driver()
	got, err := d.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 1, Lease: time.Minute})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v, %v", got, err)
	}
	if err := d.Settle(ctx, store.SettleParams{Owner: "r", Done: []uuid.UUID{ev.ID}, Ended: []int64{got[0].Lease}, KeepDone: true}); err != nil {
		t.Fatal(err)
	}
	kept, err := s.HistoryRead(ctx, store.HistoryParams{Limit: 10})
	if err != nil || len(kept) != 1 {
		t.Fatalf("history: %v, %v", kept, err)
	}
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "delete from "+s.Schema()+".outbox_events where id = $1", ev.ID); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res store.RequeueResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.Requeue(ctx, kept, "race")
		done <- result{res, err}
	}()
	// The requeue waits for the row the delete holds.
	for waiting := false; !waiting; {
		err := s.Pool().QueryRow(ctx, `select exists (select 1 from pg_stat_activity
			where datname = current_database() and wait_event_type = 'Lock' and query like '-- Requeue, first statement%')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			t.Fatalf("Requeue returned %+v, %v while the delete held the row: want it to wait", r.res, r.err)
		default:
		}
		if !waiting {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if want := (store.RequeueResult{Inserted: 1}); r.err != nil || r.res != want {
		t.Fatalf("Requeue during the delete = %+v, %v; want %+v", r.res, r.err, want)
	}
	rec, err := s.Get(ctx, ev.ID)
	if err != nil || rec.Status != store.StatusPending || rec.Headers[postbox.HeaderReplay] != "race" {
		t.Fatalf("row after the requeue: %+v, %v; want pending, marked", rec, err)
	}
}

// typesMatch asks PostgreSQL whether the regular expression of globs
// matches each of names.
func typesMatch(t *testing.T, ctx context.Context, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, globs []string, names []string) []bool {
	t.Helper()
	re, err := postgres.TypesRegexp(globs)
	if err != nil {
		t.Fatalf("TypesRegexp(%q): %v", globs, err)
	}
	var got []bool
	if err := pool.QueryRow(ctx, `select array_agg(n ~ $1 order by i) from unnest($2::text[]) with ordinality as x(n, i)`, re, names).Scan(&got); err != nil {
		t.Fatalf("regexp %q of %q: %v", re, globs, err)
	}
	return got
}

// The regular expression of a type glob matches, in PostgreSQL, the types
// that path.Match matches: globs and types of an alphabet of the special
// characters ('*', '?', classes, '\\', '/', '-', '^') and letters, at
// random.
func TestTypesRegexpMatchesAsPathMatch(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	const alphabet = `abc.*?[]^\/-`
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rng.Intn(len(alphabet))])
		}
		return b.String()
	}
	// Globs are drawn until enough pairs match (how many a glob matches
	// varies with the seed), 3,000 at most.
	matched, tried := 0, 0
	for globs := 0; (matched < 500 || tried < 10_000) && globs < 3000; globs++ {
		glob := word(1 + rng.Intn(7))
		if _, err := path.Match(glob, ""); err != nil {
			continue
		}
		names := make([]string, 200)
		for i := range names {
			names[i] = word(rng.Intn(7))
		}
		got := typesMatch(t, ctx, pool, []string{glob}, names)
		for i, name := range names {
			want, _ := path.Match(glob, name)
			if got[i] != want {
				t.Fatalf("glob %q, type %q: PostgreSQL %t, path.Match %t (seed %d)", glob, name, got[i], want, seed)
			}
			tried++
			if want {
				matched++
			}
		}
	}
	if matched < 500 || tried < 10_000 {
		t.Fatalf("%d pairs tried, %d matching: too few (seed %d)", tried, matched, seed)
	}
}

// Cases of the translation: quoting, classes (ranges, negation, '/', a
// range that holds nothing), several globs, characters beyond ASCII, NUL.
func TestTypesRegexpCases(t *testing.T) {
	pool := pgtest.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range []struct {
		globs []string
		names []string
	}{
		{[]string{"*.paid"}, []string{"order.paid", ".paid", "a/b.paid", "order.paid.v2", "order.paidx"}},
		{[]string{"order.*", "pay?ent.done"}, []string{"order.x", "payment.done", "pay/ent.done", "other"}},
		{[]string{`a\*b`, `\[x\]`, `c\\d`}, []string{"a*b", "axb", "[x]", `c\d`, "cd"}},
		{[]string{`[\]\-\\]`}, []string{"]", "-", `\`, "a"}},
		{[]string{"[^a]", "[/]"}, []string{"/", "a", "b", "é", ""}},
		{[]string{"[c-a]x"}, []string{"ax", "bx", "cx", "x"}},
		{[]string{"[^c-a]x"}, []string{"ax", "/x", "éx", "x"}},
		{[]string{"é*", "?ü", "[à-é]"}, []string{"été", "aü", "éü", "è", "z"}},
		{[]string{"(a|b)+$^.{1}"}, []string{"(a|b)+$^.{1}", "a"}},
		{[]string{"a\x00b", "\x00*"}, []string{"ab", "a"}},
	} {
		got := typesMatch(t, ctx, pool, c.globs, c.names)
		for i, name := range c.names {
			want := false
			for _, g := range c.globs {
				ok, _ := path.Match(g, name)
				want = want || ok
			}
			if got[i] != want {
				t.Errorf("globs %q, type %q: PostgreSQL %t, path.Match %t", c.globs, name, got[i], want)
			}
		}
	}
	if _, err := postgres.TypesRegexp([]string{"a\xffb"}); err == nil {
		t.Error("TypesRegexp of a glob that is not UTF-8: no error")
	}
}

// historyReads counts the statements of history_read a pool runs.
type historyReads struct{ n atomic.Int64 }

func (h *historyReads) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "A page of HistoryRead") {
		h.n.Add(1)
	}
	return ctx
}

func (h *historyReads) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A type glob without a literal beginning ("*.paid") is matched by the
// database: HistoryRead of one event behind many delivered events of
// other types runs one statement, not a page after page of them.
func TestHistoryReadGlobIsOneStatement(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	reads := &historyReads{}
	cfg.ConnConfig.Tracer = reads
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the schema's drop
	s := pgtest.StoreIn(t, pool)
	var ids []uuid.UUID
	for i := range 60 {
		typ := "order.created"
		if i == 59 {
			typ = "order.paid"
		}
		ev := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "1", EventType: typ, Payload: []byte(`{}`)}
		if err := s.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	d := s.Driver()
	got, err := d.Claim(ctx, store.ClaimParams{Owner: "r", Limit: 100, Lease: time.Minute})
	if err != nil || len(got) != len(ids) {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	p := store.SettleParams{Owner: "r", Done: ids, KeepDone: true}
	for _, c := range got {
		p.Ended = append(p.Ended, c.Lease)
	}
	if err := d.Settle(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1, 2} {
		reads.n.Store(0)
		page, err := s.HistoryRead(ctx, store.HistoryParams{Filter: store.HistoryFilter{EventTypes: []string{"*.paid"}}, Limit: limit})
		if err != nil || len(page) != 1 || page[0].ID != ids[59] {
			t.Fatalf("HistoryRead *.paid, limit %d: %d events, %v; want the one paid", limit, len(page), err)
		}
		if n := reads.n.Load(); n != 1 {
			t.Errorf("HistoryRead *.paid, limit %d: %d statements, want 1", limit, n)
		}
	}
}
