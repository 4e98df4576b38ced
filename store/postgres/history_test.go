package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
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
			where datname = current_database() and wait_event_type = 'Lock' and query like '-- Requeue:%')`).Scan(&waiting)
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
