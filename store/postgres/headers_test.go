package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// A plain-SQL producer may write headers that are not an object of
// strings. The claim must still lease and return every event (a claim that
// failed after leasing would strand them all until their leases expire,
// counting an attempt each time, and dead-letter events never sent).
func TestClaimTakesHeadersThatAreNotStrings(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	tbl := s.Table("outbox_events")
	for _, headers := range []string{`{"traceparent": "00-1-2-01", "retries": 1, "flag": true}`, `["not", "an", "object"]`, `{}`} {
		if _, err := s.Pool().Exec(ctx, `insert into `+tbl+` (aggregate_type, aggregate_id, event_type, payload, headers)
			values ('order', '1', 'order.created', '{}', $1::jsonb)`, headers); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Driver().Claim(ctx, store.ClaimParams{Owner: "t", Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if len(got) != 3 {
		t.Fatalf("claimed %d events, want 3", len(got))
	}
	h := got[0].Headers
	if h["traceparent"] != "00-1-2-01" || h["retries"] != "1" || h["flag"] != "true" {
		t.Errorf("headers %v: want the string kept and the others as their JSON text", h)
	}
	if got[1].Headers != nil || got[2].Headers != nil {
		t.Errorf("headers %v and %v, want none", got[1].Headers, got[2].Headers)
	}
}
