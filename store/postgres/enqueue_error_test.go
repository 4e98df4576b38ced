package postgres_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/postgres"
)

// The unique violation EnqueueTx can meet on a dedup key (the trigger's,
// for a key held by a settle that committed while the insert ran: the
// window is too short to provoke from a test) aborted the transaction: it
// is no skipped duplicate. One on the id is.
func TestEnqueueErrorTellsAnAbortFromADuplicate(t *testing.T) {
	held := &pgconn.PgError{Code: "23505", ConstraintName: "outbox_events_dedup_key_uq",
		Message: `duplicate key value violates unique constraint "outbox_events_dedup_key_uq"`}
	if err := postgres.EnqueueError(held); errors.Is(err, postbox.ErrDuplicate) || !strings.Contains(err.Error(), "the transaction is aborted") {
		t.Errorf("a held key's violation: %v, want an error saying the transaction is aborted", err)
	}
	id := &pgconn.PgError{Code: "23505", ConstraintName: "outbox_events_pkey",
		Message: `duplicate key value violates unique constraint "outbox_events_pkey"`}
	if err := postgres.EnqueueError(id); !errors.Is(err, postbox.ErrDuplicate) {
		t.Errorf("a repeated id: %v, want ErrDuplicate", err)
	}
}
