package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// One lease row covers a whole claimed batch; releasing or settling part of
// it keeps the rest leased.
func TestPartOfALeaseIsReleasedAndSettled(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	events := make([]postbox.Event, 10)
	for i := range events {
		events[i] = postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}
	}
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "a", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 10 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	check := func(pending, processing int64) {
		t.Helper()
		st, err := s.Stats(ctx)
		if err != nil || st.Pending != pending || st.Processing != processing {
			t.Fatalf("stats %+v, %v; want %d pending, %d processing", st, err, pending, processing)
		}
	}
	idsOf := func(ds []store.ClaimedEvent) []uuid.UUID {
		out := make([]uuid.UUID, len(ds))
		for i, d := range ds {
			out[i] = d.ID
		}
		return out
	}
	if err := s.Driver().Release(ctx, "a", idsOf(got[:4])); err != nil {
		t.Fatal(err)
	}
	check(4, 6)
	if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "a", Done: idsOf(got[4:7])}); err != nil {
		t.Fatal(err)
	}
	check(4, 3)
	if err := s.Driver().Release(ctx, "a", idsOf(got[7:])); err != nil {
		t.Fatal(err)
	}
	check(7, 0)
}

// Lease renewal, settling, releasing and reclaiming change the lease rows of
// one relay at the same time without deadlocking (they used to, under a
// drain: "deadlock detected (SQLSTATE 40P01)" from the lease renewal).
func TestLeaseStatementsNeverDeadlock(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	const owner, batches, perBatch = "relay", 20, 5
	for round := range 15 {
		events := make([]postbox.Event, batches*perBatch)
		for i := range events {
			events[i] = postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}
		}
		if err := s.Enqueue(ctx, events...); err != nil {
			t.Fatal(err)
		}
		var held []uuid.UUID
		for b := range batches {
			lease := time.Minute
			if b%4 == 0 {
				lease = 100 * time.Millisecond // these expire during the round: reclaimed
			}
			got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: owner, Limit: perBatch, Lease: lease})
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range got {
				held = append(held, d.ID)
			}
		}
		time.Sleep(100 * time.Millisecond)
		// Settle in chunks that cut across the lease rows (every fifth id),
		// release some, while renewals and reclaims run.
		errs := make(chan error, 64)
		var wg sync.WaitGroup
		for chunk := range perBatch {
			var ids []uuid.UUID
			for i := chunk; i < len(held); i += perBatch {
				ids = append(ids, held[i])
			}
			wg.Go(func() {
				if chunk == 0 {
					errs <- s.Driver().Release(ctx, owner, ids)
					return
				}
				retries := make([]store.Retry, 0, len(ids)/2)
				for _, id := range ids[len(ids)/2:] {
					retries = append(retries, store.Retry{ID: id, AvailableAt: time.Now(), LastError: "again"})
				}
				errs <- s.Driver().Settle(ctx, store.SettleParams{Owner: owner, Done: ids[:len(ids)/2], Retry: retries})
			})
		}
		for range 4 {
			wg.Go(func() {
				_, err := s.Driver().ExtendLease(ctx, owner, held, time.Minute)
				errs <- err
			})
			wg.Go(func() {
				_, err := s.Driver().ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: 25})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		// Leave nothing for the next round.
		if _, err := s.Pool().Exec(ctx, "delete from "+s.Table("outbox_leases")+"; delete from "+s.Table("outbox_events")); err != nil {
			t.Fatal(err)
		}
	}
}

// A claim whose answer the relay never received (its deadline passed, or
// its connection died, after the server committed it) leaves a lease row
// the relay does not know. Renewing the relay's own events must not renew
// that row: it expires, and its events go back to the queue, instead of
// staying leased for as long as the relay lives.
func TestExtendLeaseLeavesUnknownClaimsToExpire(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	events := make([]postbox.Event, 6)
	for i := range events {
		events[i] = postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}
	}
	if err := s.Enqueue(ctx, events...); err != nil {
		t.Fatal(err)
	}
	known, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "a", Limit: 3, Lease: time.Minute})
	if err != nil || len(known) != 3 {
		t.Fatalf("claim: %d, %v", len(known), err)
	}
	lost, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "a", Limit: 3, Lease: 300 * time.Millisecond})
	if err != nil || len(lost) != 3 {
		t.Fatalf("claim: %d, %v", len(lost), err)
	}
	ids := []uuid.UUID{known[0].ID, known[1].ID, known[2].ID}
	kept, err := s.Driver().ExtendLease(ctx, "a", ids, time.Minute)
	if err != nil || len(kept) != 3 {
		t.Fatalf("extend lease: kept %d, %v; want 3", len(kept), err)
	}
	time.Sleep(400 * time.Millisecond)
	reclaimed, err := s.Driver().ReclaimExpired(ctx, store.ReclaimParams{MaxAttempts: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(reclaimed) != 1 || reclaimed[0].Owner != "a" || reclaimed[0].Events != 3 {
		t.Fatalf("reclaimed %+v; want the 3 events of the claim relay a never knew of", reclaimed)
	}
	st, err := s.Stats(ctx)
	if err != nil || st.Pending != 3 || st.Processing != 3 {
		t.Fatalf("stats %+v, %v; want 3 pending (reclaimed), 3 processing (renewed)", st, err)
	}
}

// An outcome names the claim it comes from: the release of an event by an
// earlier claim (its lease lost, the event claimed again since by the same
// relay) leaves the newer claim's lease alone, so no other relay can take
// the event while the newer delivery goes on.
func TestStaleReleaseLeavesTheNewerClaim(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	e := postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}
	if err := s.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	claim := func() store.ClaimedEvent {
		t.Helper()
		got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "a", Limit: 1, Lease: time.Minute})
		if err != nil || len(got) != 1 || got[0].Lease == 0 {
			t.Fatalf("claim: %+v, %v; want the event, with its claim", got, err)
		}
		return got[0]
	}
	release := func(lease int64) {
		t.Helper()
		if err := s.Driver().Settle(ctx, store.SettleParams{Owner: "a", Release: []store.Released{{ID: e.ID, Lease: lease}}}); err != nil {
			t.Fatal(err)
		}
	}
	first := claim()
	release(first.Lease)
	second := claim()
	release(first.Lease) // the first claim's outcome, late
	if r, err := s.Get(ctx, e.ID); err != nil || r.LeaseOwner != "a" {
		t.Fatalf("after a late release of the first claim: %+v, %v; want leased to a by the second", r, err)
	}
	if got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "b", Limit: 1, Lease: time.Minute}); err != nil || len(got) != 0 {
		t.Fatalf("relay b claimed %+v, %v; want nothing", got, err)
	}
	release(second.Lease)
	if r, err := s.Get(ctx, e.ID); err != nil || r.LeaseOwner != "" {
		t.Fatalf("after the second claim's release: %+v, %v; want unleased", r, err)
	}
}
