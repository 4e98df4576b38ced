package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// relkind is the kind of a table of s's schema: "p" partitioned, "r"
// plain.
func relkind(t *testing.T, s *postgres.Store, table string) string {
	t.Helper()
	var kind string
	if err := s.Pool().QueryRow(t.Context(), "select relkind::text from pg_class where oid = to_regclass($1)", s.Table(table)).Scan(&kind); err != nil {
		t.Fatal(err)
	}
	return kind
}

// partitionsOf names the partitions of a table of s's schema.
func partitionsOf(t *testing.T, s *postgres.Store, table string) []string {
	t.Helper()
	rows, err := s.Pool().Query(t.Context(), "select c.relname::text from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = to_regclass($1) order by 1", s.Table(table))
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// attemptsAt writes an attempt of endpoint e for each time of at.
func attemptsAt(t *testing.T, s *postgres.Store, e store.Endpoint, at ...time.Time) {
	t.Helper()
	var batch []store.Attempt
	for i, a := range at {
		batch = append(batch, store.Attempt{EndpointID: e.ID, EventID: postbox.NewID(), EventType: "order.paid", Attempt: 1, StatusCode: 200 + i%2*300, At: a})
		if len(batch) == 1000 || i == len(at)-1 {
			if err := s.Driver().AttemptInsert(t.Context(), batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
}

// endpoints creates n endpoints.
func endpoints(t *testing.T, s *postgres.Store, n int) []store.Endpoint {
	t.Helper()
	var out []store.Endpoint
	for i := range n {
		e, err := s.EndpointCreate(t.Context(), store.Endpoint{Name: fmt.Sprint("e", i), URL: "https://example.com/" + fmt.Sprint(i), Secret: "whsec_x", Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// The conversion of the attempts log keeps every attempt, with its id;
// the lists and summaries read the same; the identity continues; a
// partition per hour of the past holds them; running Partition again
// changes nothing.
func TestPartitionAttemptsConversionKeepsEveryAttempt(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	es := endpoints(t, s, 2)
	now := time.Now()
	var at []time.Time
	for i := range 600 {
		at = append(at, now.Add(-time.Duration(i)*time.Minute))
	}
	for _, e := range es {
		attemptsAt(t, s, e, at...)
	}
	list := func() [][]store.Attempt {
		var out [][]store.Attempt
		for _, e := range es {
			l, err := s.AttemptList(ctx, e.ID, 50)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		return out
	}
	summary := func() []store.AttemptSummary {
		sum, err := s.AttemptSummary(ctx, now.Add(-3*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	ids := "select coalesce(sum(id), 0) from {schema}.endpoint_attempts"
	beforeList, beforeSummary, beforeIDs := list(), summary(), countRows(t, s, ids)
	maxID := countRows(t, s, "select max(id) from {schema}.endpoint_attempts")

	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Tables, "endpoint_attempts") || rep.MovedRows != 2*len(at) || slices.Contains(rep.Tables, "inbox_events") {
		t.Fatalf("report %+v: want endpoint_attempts converted, its %d rows moved, the inbox left", rep, 2*len(at))
	}
	if relkind(t, s, "endpoint_attempts") != "p" || relkind(t, s, "inbox_events") != "r" {
		t.Fatal("endpoint_attempts not partitioned, or inbox_events partitioned without PartitionParams.Inbox")
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts"); n != 2*len(at) {
		t.Fatalf("%d attempts after the conversion, want %d", n, 2*len(at))
	}
	if got := countRows(t, s, ids); got != beforeIDs {
		t.Fatalf("sum of ids %d, want %d: ids changed", got, beforeIDs)
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts_default"); n != 0 {
		t.Fatalf("%d attempts in the DEFAULT partition, want every one in the partition of its hour", n)
	}
	// One per hour from the oldest attempt's to two ahead, and the DEFAULT.
	hours := int(now.Truncate(time.Hour).Sub(at[len(at)-1].Truncate(time.Hour))/time.Hour) + 3
	if parts := partitionsOf(t, s, "endpoint_attempts"); len(parts) != hours+1 {
		t.Fatalf("partitions %v: want one per hour of the past ten, and ahead: %d", parts, hours+1)
	}
	if got := list(); !equalAttempts(got, beforeList) {
		t.Fatalf("lists after the conversion differ:\n%v\nwant\n%v", got, beforeList)
	}
	if got := summary(); fmt.Sprint(got) != fmt.Sprint(beforeSummary) {
		t.Fatalf("summary after the conversion %+v, want %+v", got, beforeSummary)
	}
	// The identity continues the plain log's.
	attemptsAt(t, s, es[0], time.Now())
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts where id > $1", maxID); n != 1 {
		t.Fatalf("%d attempts after the last one's id; want the new one", n)
	}
	// Deleting an endpoint still cascades.
	if err := s.EndpointDelete(ctx, es[1].ID); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts where endpoint_id = $1", es[1].ID); n != 0 {
		t.Fatalf("%d attempts of a deleted endpoint", n)
	}
	parts := partitionsOf(t, s, "endpoint_attempts")
	rep, err = s.Partition(ctx, postgres.PartitionParams{})
	if err != nil || len(rep.Tables) != 0 || rep.MovedRows != 0 || len(rep.Created) != 0 {
		t.Fatalf("Partition again: %+v, %v; want nothing done", rep, err)
	}
	if got := partitionsOf(t, s, "endpoint_attempts"); !slices.Equal(got, parts) {
		t.Fatalf("partitions after a second run %v, want %v", got, parts)
	}
}

// equalAttempts compares attempt lists, times to the microsecond.
func equalAttempts(a, b [][]store.Attempt) bool {
	return slices.EqualFunc(a, b, func(x, y []store.Attempt) bool {
		return slices.EqualFunc(x, y, func(p, q store.Attempt) bool {
			p.At, q.At = p.At.Truncate(time.Microsecond), q.At.Truncate(time.Microsecond)
			return p.At.Equal(q.At) && p.EventID == q.EventID && p.StatusCode == q.StatusCode
		})
	})
}

// A lane's Expire drops the attempts' partitions whose range ended before
// its Before, and nothing newer; the attempts of the DEFAULT partition are
// deleted as before; another lane's Expire finds nothing left; the
// relay's step creates the partitions ahead.
func TestPartitionAttemptsDropEndedRanges(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	es := endpoints(t, s, 2)
	now := time.Now()
	var at []time.Time
	for i := range 300 {
		at = append(at, now.Add(-time.Duration(i)*time.Minute))
	}
	for _, e := range es {
		attemptsAt(t, s, e, at...)
	}
	partitioned(t, s, time.Hour)
	// An attempt older than every partition: the DEFAULT partition's.
	old := now.Add(-100 * time.Hour)
	attemptsAt(t, s, es[0], old)
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts_default"); n != 1 {
		t.Fatalf("%d attempts in the DEFAULT partition, want the old one", n)
	}
	before := now.Add(-150 * time.Minute)
	cut := before.Truncate(time.Hour) // the start of before's hour
	want := countRows(t, s, "select count(*) from {schema}.endpoint_attempts where at >= $1", cut)
	all := countRows(t, s, "select count(*) from {schema}.endpoint_attempts")

	res, err := s.Driver().EndpointLane(es[0]).Expire(ctx, store.ExpireParams{Before: before, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Dropped) == 0 || res.Events != all-want {
		t.Fatalf("lane Expire: %+v; want the ended partitions dropped, the DEFAULT's old attempt deleted: %d attempts", res, all-want)
	}
	for _, name := range res.Dropped {
		if !strings.HasPrefix(name, "endpoint_attempts_p") {
			t.Fatalf("dropped %s", name)
		}
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts"); n != want {
		t.Fatalf("%d attempts left, want %d (every one from the start of Before's hour)", n, want)
	}
	if n := countRows(t, s, "select count(*) from {schema}.endpoint_attempts where at < $1", cut); n != 0 {
		t.Fatalf("%d attempts of the ended ranges left", n)
	}
	res, err = s.Driver().EndpointLane(es[1]).Expire(ctx, store.ExpireParams{Before: before, Limit: 100})
	if err != nil || len(res.Dropped) != 0 || res.Events != 0 {
		t.Fatalf("the other lane's Expire: %+v, %v; want nothing left", res, err)
	}
	if l, err := s.AttemptList(ctx, es[1].ID, 10); err != nil || len(l) != 10 {
		t.Fatalf("list after the drop: %d, %v", len(l), err)
	}

	// The relay's retention step creates the partitions ahead: the last
	// one, dropped by hand, is created again.
	parts := partitionsOf(t, s, "endpoint_attempts")
	last := parts[len(parts)-1] // after "endpoint_attempts_default"
	if _, err := s.Pool().Exec(ctx, "drop table "+s.Table(last)); err != nil {
		t.Fatal(err)
	}
	res, err = s.Driver().Expire(ctx, store.ExpireParams{Before: now.Add(-24 * time.Hour), Limit: 100})
	if err != nil || !slices.Contains(res.Created, last) {
		t.Fatalf("outbox Expire: %+v, %v; want %s created ahead", res, err, last)
	}
}

// A plain attempts log and plain deliveries (Migrate alone) are left
// plain, and lanes delete their rows as before.
func TestPartitionAttemptsPlainSchemaUnchanged(t *testing.T) {
	s := pgtest.Store(t)
	e := endpoints(t, s, 1)[0]
	attemptsAt(t, s, e, time.Now().Add(-time.Hour), time.Now())
	res, err := s.Driver().EndpointLane(e).Expire(t.Context(), store.ExpireParams{Before: time.Now().Add(-time.Minute), Limit: 10})
	if err != nil || res.Events != 1 || len(res.Dropped) != 0 {
		t.Fatalf("lane Expire: %+v, %v; want the old attempt deleted", res, err)
	}
	if relkind(t, s, "endpoint_attempts") != "r" || relkind(t, s, "inbox_events") != "r" || relkind(t, s, "endpoint_deliveries") != "r" {
		t.Fatal("Migrate partitioned a table")
	}
}

// uuidTimeOf is the time of a UUIDv7.
func uuidTimeOf(id uuid.UUID) time.Time {
	sec, nsec := id.Time().UnixTime()
	return time.Unix(sec, nsec)
}

// processAt processes an inbox event of id id; fail makes its handler fail.
func processAt(t *testing.T, ib *inbox.Inbox[pgx.Tx], id uuid.UUID, fail bool) inbox.Outcome {
	t.Helper()
	out, err := ib.Process(t.Context(), &inbox.Event{ID: id, EventType: "order.paid", Payload: []byte(`{}`)}, func(context.Context, pgx.Tx, *inbox.Event) error {
		if fail {
			return errors.New("boom")
		}
		return nil
	})
	if err != nil && !fail {
		t.Fatal(err)
	}
	return out
}

// The inbox's conversion (PartitionParams.Inbox) keeps every row and the
// duplicates absorbed; its retention drops the partitions whose range
// ended, keeping their rows not done and their done rows processed since
// Before; running Partition again changes nothing.
func TestPartitionInbox(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	ib := inbox.New(s.Driver())
	now := time.Now()
	var done, failed []uuid.UUID
	for i := range 10 {
		id := v7At(now.Add(-time.Duration(i) * time.Hour))
		processAt(t, ib, id, false)
		done = append(done, id)
		id = v7At(now.Add(-time.Duration(i)*time.Hour - time.Minute))
		processAt(t, ib, id, true)
		failed = append(failed, id)
	}
	nonV7 := uuid.New()
	processAt(t, ib, nonV7, false)
	// Processed at their ids' time, but for one of five hours ago,
	// processed just now (a late delivery), and the non-v7 one.
	late := done[5]
	if _, err := s.Pool().Exec(ctx, s.Expand("update {schema}.inbox_events set processed_at = to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0) where handler_status = 'done' and id <> $1 and id <> $2"), late, nonV7); err != nil {
		t.Fatal(err)
	}
	rows := countRows(t, s, "select count(*) from {schema}.inbox_events")

	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour, Inbox: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(rep.Tables, "inbox_events") || relkind(t, s, "inbox_events") != "p" {
		t.Fatalf("report %+v: want inbox_events converted", rep)
	}
	if n := countRows(t, s, "select count(*) from {schema}.inbox_events"); n != rows {
		t.Fatalf("%d inbox rows after the conversion, want %d", n, rows)
	}
	if n := countRows(t, s, "select count(*) from {schema}.inbox_events_default"); n != 1 {
		t.Fatalf("%d rows in the DEFAULT partition, want the non-v7 one", n)
	}
	for _, id := range append(slices.Clone(done), nonV7) {
		if out := processAt(t, ib, id, false); out != inbox.Duplicate {
			t.Fatalf("event %s processed again after the conversion: %v", id, out)
		}
	}
	if out := processAt(t, ib, failed[3], false); out != inbox.Processed {
		t.Fatalf("a failed event after the conversion: %v, want processed", out)
	}
	parts := partitionsOf(t, s, "inbox_events")
	if rep, err := s.Partition(ctx, postgres.PartitionParams{Inbox: true}); err != nil || len(rep.Tables) != 0 || len(rep.Created) != 0 {
		t.Fatalf("Partition again: %+v, %v; want nothing done", rep, err)
	}
	if got := partitionsOf(t, s, "inbox_events"); !slices.Equal(got, parts) {
		t.Fatalf("partitions after a second run %v, want %v", got, parts)
	}

	// Retention 3h30m: the ranges that ended before are dropped.
	before := now.Add(-210 * time.Minute)
	if _, err := ib.DeleteProcessedBefore(ctx, before, 100); err != nil {
		t.Fatal(err)
	}
	for i, id := range done {
		_, err := ib.Get(ctx, id)
		gone := errors.Is(err, store.ErrNotFound)
		ended := !uuidTimeOf(id).Truncate(time.Hour).Add(time.Hour).After(before)
		if keep := !ended || id == late; gone == keep {
			t.Fatalf("done event %d hours old (late %v): gone %v (%v) after the retention of 3h30m", i, id == late, gone, err)
		}
	}
	for i, id := range failed {
		if r, err := ib.Get(ctx, id); err != nil || (i != 3 && r.Status != store.StatusFailed) {
			t.Fatalf("failed event %d hours old: %+v, %v; want kept", i, r, err)
		}
	}
	if _, err := ib.Get(ctx, nonV7); err != nil {
		t.Fatalf("the non-v7 done row, processed now: %v", err)
	}
	if out := processAt(t, ib, late, false); out != inbox.Duplicate {
		t.Fatalf("the late event kept: %v, want a duplicate", out)
	}
	if n := countRows(t, s, "select count(*) from {schema}.inbox_events where id < $1 and handler_status = 'done'", v7Bound(before.Truncate(time.Hour))); n != 1 {
		t.Fatalf("%d done rows of the dropped ranges left, want the late one", n)
	}
}

// While the conversion moves the done rows, a delivery of an event whose
// done row is not moved yet is absorbed as a duplicate all the same.
func TestPartitionInboxAbsorbsDuplicatesDuringTheMove(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	n := 3 * postgres.PartitionMoveBatch
	if _, err := s.Pool().Exec(ctx, s.Expand("insert into {schema}.inbox_events (id, handler_status, processed_at, event_type) select gen_random_uuid(), 'done', now(), 'x' from generate_series(1, $1)"), n); err != nil {
		t.Fatal(err)
	}
	rows, err := s.Pool().Query(ctx, s.Expand("select id from {schema}.inbox_events order by id limit 200"))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		t.Fatal(err)
	}
	ib := inbox.New(s.Driver())
	var ran atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ; i = (i + 4) % len(ids) {
				select {
				case <-stop:
					return
				default:
				}
				out, err := ib.Process(ctx, &inbox.Event{ID: ids[i]}, func(context.Context, pgx.Tx, *inbox.Event) error {
					ran.Add(1)
					return nil
				})
				if err != nil || out != inbox.Duplicate {
					t.Errorf("event %s during the conversion: %v, %v; want a duplicate", ids[i], out, err)
					return
				}
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	rep, err := s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour, Inbox: true})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 0 {
		t.Fatalf("handlers ran %d times on events processed before", ran.Load())
	}
	if c := countRows(t, s, "select count(*) from {schema}.inbox_events"); c != n || rep.MovedRows == 0 {
		t.Fatalf("%d rows after the conversion (%d moved after the switch), want %d", c, rep.MovedRows, n)
	}
	if c := countRows(t, s, "select count(*) from pg_trigger where tgrelid = to_regclass($1) and not tgisinternal", s.Table("inbox_events")); c != 0 {
		t.Fatalf("%d triggers left on the inbox", c)
	}
}

// A conversion of the attempts log whose lock is held longer than
// PartitionLockTimeout fails and leaves the log plain and whole; the next
// run converts it.
func TestPartitionAttemptsLockHeld(t *testing.T) {
	s := pgtest.Store(t)
	ctx := t.Context()
	e := endpoints(t, s, 1)[0]
	attemptsAt(t, s, e, time.Now().Add(-time.Hour), time.Now())
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "select count(*) from "+s.Table("endpoint_attempts")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.Partition(ctx, postgres.PartitionParams{Interval: time.Hour})
	if err == nil || !strings.Contains(err.Error(), "not granted") {
		t.Fatalf("Partition with the attempts log's lock held: %v; want its lock not granted", err)
	}
	if waited := time.Since(start); waited > postgres.PartitionLockTimeout+time.Second {
		t.Fatalf("waited %s for the lock", waited)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if relkind(t, s, "endpoint_attempts") != "r" || countRows(t, s, "select count(*) from {schema}.endpoint_attempts") != 2 {
		t.Fatal("the attempts log changed by a conversion that failed")
	}
	rep, err := s.Partition(ctx, postgres.PartitionParams{})
	if err != nil || !slices.Contains(rep.Tables, "endpoint_attempts") || rep.MovedRows != 2 {
		t.Fatalf("Partition again: %+v, %v; want the attempts log converted", rep, err)
	}
}
