package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/signature"
)

// OrderPaid and OrderCancelled are the payloads of two event types, as the
// consumer reads them: fields it does not name are ignored.
type OrderPaid struct {
	OrderID int64 `json:"order_id"`
}

type OrderCancelled struct {
	OrderID int64  `json:"order_id"`
	Reason  string `json:"reason"`
}

// shippingRoutes returns the consumer's router: order.paid ships the
// order, order.cancelled takes its shipment back. Both run in the inbox
// transaction.
func shippingRoutes() *inbox.Router[pgx.Tx] {
	r := inbox.NewRouter[pgx.Tx]()
	inbox.Handle(r, "order.paid", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, p OrderPaid) error {
		if p.OrderID <= 0 {
			// No retry can fix this payload: reject it for good.
			return inbox.Reject(fmt.Errorf("order_id %d is not positive", p.OrderID))
		}
		_, err := tx.Exec(ctx, "insert into shipments (order_id) values ($1)", p.OrderID)
		return err // an error of the database: retried
	})
	inbox.Handle(r, "order.cancelled", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, p OrderCancelled) error {
		_, err := tx.Exec(ctx, "delete from shipments where order_id = $1", p.OrderID)
		return err
	})
	return r
}

// A consumer with two typed routes: each event reaches the route of its
// type with its payload decoded; a payload that does not decode, an event
// type without a route, and an event the route rejects are rejected for
// good.
func ExampleRouter() {
	pgStore, close := exampleStore()
	defer close()
	ctx := context.Background()
	ib := inbox.New(pgStore.Driver())
	r := shippingRoutes()

	for _, ev := range []*inbox.Event{
		{ID: uuid.New(), EventType: "order.paid", Payload: []byte(`{"order_id": 42, "currency": "EUR"}`)},
		{ID: uuid.New(), EventType: "order.paid", Payload: []byte(`{"order_id": 43}`)},
		{ID: uuid.New(), EventType: "order.cancelled", Payload: []byte(`{"order_id": 43, "reason": "customer"}`)},
		{ID: uuid.New(), EventType: "order.paid", Payload: []byte(`{"order_id": -1}`)},
		{ID: uuid.New(), EventType: "order.paid", Payload: []byte(`{"order_id": "44"}`)},
		{ID: uuid.New(), EventType: "order.refunded", Payload: []byte(`{"order_id": 42}`)},
	} {
		out, err := ib.Process(ctx, ev, r.Apply)
		switch {
		case errors.Is(err, inbox.ErrRejected): // webhook answer 400; a broker consumer drops it
			rec, _ := ib.Get(ctx, ev.ID)
			fmt.Printf("%s: rejected, inbox row %s\n", ev.EventType, rec.Status)
		case err != nil: // webhook answer 500; a broker consumer redelivers it
			log.Fatal(err)
		default:
			fmt.Printf("%s: %v\n", ev.EventType, out)
		}
	}

	rows, _ := pgStore.Pool().Query(ctx, "select order_id from shipments order by order_id")
	shipped, _ := pgx.CollectRows(rows, pgx.RowTo[int64])
	fmt.Println("shipped:", shipped)
	// Output:
	// order.paid: processed
	// order.paid: processed
	// order.cancelled: processed
	// order.paid: rejected, inbox row failed
	// order.paid: rejected, inbox row failed
	// order.refunded: rejected, inbox row failed
	// shipped: [42]
}

// A stream that carries types this consumer does not care about: ignore
// them, and record them done, rather than reject them.
func ExampleRouter_SetUnknown() {
	pgStore, close := exampleStore()
	defer close()
	ctx := context.Background()
	ib := inbox.New(pgStore.Driver())
	r := shippingRoutes()
	r.SetUnknown(inbox.UnknownIgnore)

	ev := &inbox.Event{ID: uuid.New(), EventType: "invoice.sent", Payload: []byte(`{"invoice": 7}`)}
	out, err := ib.Process(ctx, ev, r.Apply)
	fmt.Println(out, err)
	// Output:
	// processed <nil>
}

// The router behind the webhook endpoint: Inbox.Processor turns it into
// HandlerConfig.Process.
func ExampleInbox_Processor() {
	pgStore, close := exampleStore()
	defer close()
	ib := inbox.New(pgStore.Driver())

	secret := "whsec_c2VjcmV0LWtleS1vZi10aGlydHktdHdvLWJ5dGVzIQ==" // os.Getenv("WEBHOOK_SECRET")
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets: []string{secret},
		Process: ib.Processor(shippingRoutes().Apply),
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	// What the sender does (see ExampleNewHandler).
	signer, err := signature.NewSigner(signature.Standard, secret)
	if err != nil {
		log.Fatal(err)
	}
	paid, invalid := uuid.New(), uuid.New()
	for _, d := range []struct {
		id   uuid.UUID
		body string
	}{
		{paid, `{"order_id": 42}`},
		{paid, `{"order_id": 42}`}, // delivered again
		{invalid, `{"order_id": 0}`},
	} {
		id, body := d.id, d.body
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte(body)))
		req.Header.Set(inbox.HeaderEventType, "order.paid")
		if err := signer.Sign(req.Header, id.String(), time.Now(), []byte(body)); err != nil {
			log.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			log.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Print(resp.StatusCode, " ", string(answer))
	}
	// Output:
	// 200 {"status":"processed"}
	// 200 {"status":"duplicate"}
	// 400 {"status":"bad_request"}
}

// Retention in the consumer service: done rows older than two weeks are
// deleted at start and every hour, until the service stops.
func ExampleInbox_RunRetention() {
	pgStore, close := exampleStore()
	defer close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ib := inbox.New(pgStore.Driver())

	go func() {
		// Longer than the sender's retries and dead-letter time.
		err := ib.RunRetention(ctx, inbox.Retention{Keep: 14 * 24 * time.Hour, Every: time.Hour})
		if err != nil {
			log.Fatal(err) // only an invalid Retention
		}
	}()
	// ... serve the webhook until ctx ends.
}
