package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
)

// chargeCard stands for a call to a payment provider, which takes an
// idempotency key: a repeated call with the same key charges once.
func chargeCard(ctx context.Context, idempotencyKey string, amount int) (receipt string, err error) {
	return "rcpt_" + idempotencyKey[:8], nil
}

// Work outside the database: claim the event, call the provider, then
// complete the claim and record the result in one transaction.
func ExampleInbox_Claim() {
	pgStore, close := exampleStore()
	defer close()
	ctx := context.Background()
	ib := inbox.New(pgStore.Driver())

	process := func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
		c, err := ib.Claim(ctx, ev, 2*time.Minute)
		if err != nil {
			return 0, err // ErrDuplicate, ErrInProgress, ...: the HTTP handler answers them
		}
		work, cancel := context.WithDeadline(ctx, c.ExpiresAt)
		defer cancel()
		receipt, err := chargeCard(work, ev.ID.String(), 9900)
		if err != nil {
			return 0, ib.Fail(ctx, c, err) // the next delivery tries again
		}
		return inbox.Processed, ib.Complete(ctx, c, func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
			fmt.Println("charged:", receipt)
			return nil // e.g. tx.Exec("update orders set receipt = $1 ...", receipt)
		})
	}

	ev := &inbox.Event{ID: uuid.MustParse("0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e"), EventType: "order.placed"}
	for range 2 { // at-least-once delivery: the same event twice
		out, err := process(ctx, ev)
		switch {
		case errors.Is(err, inbox.ErrDuplicate):
			fmt.Println("duplicate")
		case err != nil:
			log.Fatal(err)
		default:
			fmt.Println(out)
		}
	}
	// Output:
	// charged: rcpt_0190f0b2
	// processed
	// duplicate
}
