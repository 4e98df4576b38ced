package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/internal/pgtest"
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
	got, err := s.Claim(ctx, store.ClaimParams{Owner: "a", Limit: 10, Lease: time.Minute})
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
	idsOf := func(ds []store.Delivery) []uuid.UUID {
		out := make([]uuid.UUID, len(ds))
		for i, d := range ds {
			out[i] = d.ID
		}
		return out
	}
	if err := s.Release(ctx, "a", idsOf(got[:4])); err != nil {
		t.Fatal(err)
	}
	check(4, 6)
	if err := s.Settle(ctx, store.SettleParams{Owner: "a", Done: idsOf(got[4:7])}); err != nil {
		t.Fatal(err)
	}
	check(4, 3)
	if err := s.Release(ctx, "a", idsOf(got[7:])); err != nil {
		t.Fatal(err)
	}
	check(7, 0)
}
