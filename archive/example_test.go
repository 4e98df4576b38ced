package archive_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/google/uuid"
	_ "gocloud.dev/blob/memblob" // mem:// buckets; a program imports fileblob or s3blob

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// An archive keeps delivered events (what retention hands its Keep) and
// reads them back in id order, for a window, after an id.
func Example() {
	ctx := context.Background()
	a, err := archive.Open(ctx, "mem://?prefix=outbox/")
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()

	written := time.Date(2026, 3, 14, 15, 4, 5, 0, time.UTC)
	var delivered []store.HistoryEvent
	for i, typ := range []string{"order.created", "order.paid", "order.shipped"} {
		delivered = append(delivered, store.HistoryEvent{
			Event: postbox.Event{
				ID:        uuid.MustParse(fmt.Sprintf("019cecdc-8180-7000-8000-00000000000%d", i)),
				EventType: typ, AggregateType: "order", AggregateID: "42",
				Payload: []byte(`{"order":42}`),
			},
			CreatedAt:   written.Add(time.Duration(i) * time.Minute),
			ProcessedAt: written.Add(time.Duration(i)*time.Minute + time.Second),
		})
	}
	// The relay's retention calls Keep (relay.Config.Archive) before it
	// deletes the rows.
	if err := a.Keep(ctx, delivered); err != nil {
		log.Fatal(err)
	}

	err = a.Read(ctx, archive.ReadParams{
		Filter: store.HistoryFilter{Since: written, Until: written.Add(time.Hour), EventTypes: []string{"order.*"}},
		After:  delivered[0].ID, // resume after the first
	}, func(batch []store.HistoryEvent) error {
		for _, e := range batch {
			fmt.Println(e.ID, e.EventType, e.CreatedAt.Format(time.TimeOnly))
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// 019cecdc-8180-7000-8000-000000000001 order.paid 15:05:05
	// 019cecdc-8180-7000-8000-000000000002 order.shipped 15:06:05
}
