package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// A claim that cannot take its turn before its deadline is cancelled by
// the server (lock_timeout, within the deadline), not abandoned by the
// client: it fails as a timeout and leases nothing. (A claim the client
// gave up on may have committed, its events then held until their lease
// ended.)
func TestClaimPastItsDeadlineIsCancelledByTheServer(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	for range 3 {
		if err := s.Enqueue(ctx, postbox.Event{ID: postbox.NewID(), EventType: "x", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// Another transaction holds the claims' turn.
	tx, err := s.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock($1)", s.LockKey("claim")); err != nil {
		t.Fatal(err)
	}
	claimCtx, cancel := context.WithTimeout(ctx, time.Second)
	got, err := s.Driver().Claim(claimCtx, store.ClaimParams{Owner: "late", Limit: 10, Lease: time.Minute})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("claim past its deadline: %d events, %v; want a deadline error", len(got), err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("the claim was not cancelled by the server's lock_timeout: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = s.Driver().Claim(ctx, store.ClaimParams{Owner: "next", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("the next claim: %d events, %v; want all 3 (the late claim leased none)", len(got), err)
	}
}
