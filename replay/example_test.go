package replay_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// Replay the order events of the last hour to the outbox's queue: running
// relays deliver them again, each with its event id and the header
// Postbox-Replay. The events must have been kept when delivered (a
// relay's Retention), or archived (Config.Archive).
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "replay-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "postbox.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	outbox := s.Driver()
	deliverAndKeep(ctx, outbox, "order.created", "order.paid", "user.signed_up")

	p, err := replay.Run(ctx, replay.Config{Outbox: outbox}, replay.Params{
		Filter: store.HistoryFilter{Since: time.Now().Add(-time.Hour), EventTypes: []string{"order.*"}},
		Name:   "fix-1234",
	})
	if err != nil {
		log.Fatal(err) // resume with Params.After = p.Last, Filter.Until = p.Until
	}
	fmt.Printf("read %d, requeued %d, as %s\n", p.Read, p.Requeued, p.Name)
	st, err := outbox.Stats(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("pending %d, done %d\n", st.Pending, st.Done)
	// Output:
	// read 2, requeued 2, as fix-1234
	// pending 2, done 1
}

// deliverAndKeep writes an event of each type and marks them delivered and
// kept, as a relay with a Retention does.
func deliverAndKeep(ctx context.Context, s store.Outbox, types ...string) {
	for i, typ := range types {
		e := postbox.Event{AggregateType: "order", AggregateID: fmt.Sprint(i), EventType: typ, Payload: []byte(`{}`)}
		if err := s.Enqueue(ctx, e); err != nil {
			log.Fatal(err)
		}
	}
	claimed, err := s.Claim(ctx, store.ClaimParams{Owner: "example", Limit: len(types), Lease: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	p := store.SettleParams{Owner: "example", KeepDone: true, Ended: []int64{claimed[0].Lease}} // one lease per claim
	for _, c := range claimed {
		p.Done = append(p.Done, c.Event.ID)
	}
	if err := s.Settle(ctx, p); err != nil {
		log.Fatal(err)
	}
}
