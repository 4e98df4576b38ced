package inbox_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// orderCreated and orderCancelled are the payloads of the routes under
// test.
type orderCreated struct {
	OrderID int64 `json:"order_id"`
	Amount  int64 `json:"amount"`
}

type orderCancelled struct {
	OrderID int64  `json:"order_id"`
	Reason  string `json:"reason"`
}

// routed is an inbox on a fresh schema with a router of two routes,
// order.created and order.cancelled, which write what they were given into
// the table "applied" of the schema.
type routed struct {
	t       *testing.T
	store   *postgres.Store
	ib      *inbox.Inbox[pgx.Tx]
	r       *inbox.Router[pgx.Tx]
	applied string // quoted table: event_id, route, order_id, detail
	// fail, when set, makes the order.created route fail after writing.
	fail error
	// runs counts the runs of each route.
	runs map[string]int
}

func newRouted(t *testing.T) *routed {
	t.Helper()
	s := pgtest.Store(t)
	x := &routed{
		t:       t,
		store:   s,
		ib:      inbox.New(s.Driver()),
		r:       inbox.NewRouter[pgx.Tx](),
		applied: s.Table("applied"),
		runs:    map[string]int{},
	}
	if _, err := s.Pool().Exec(context.Background(),
		"create table "+x.applied+" (event_id uuid not null, route text not null, order_id bigint not null, detail text not null)"); err != nil {
		t.Fatal(err)
	}
	inbox.Handle(x.r, "order.created", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, p orderCreated) error {
		x.runs["order.created"]++
		if _, err := tx.Exec(ctx, "insert into "+x.applied+" values ($1, 'created', $2, $3)", ev.ID, p.OrderID, fmt.Sprint(p.Amount)); err != nil {
			return err
		}
		return x.fail
	})
	inbox.Handle(x.r, "order.cancelled", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, p orderCancelled) error {
		x.runs["order.cancelled"]++
		if p.Reason == "" {
			return inbox.Reject(errors.New(`"reason" is missing`))
		}
		_, err := tx.Exec(ctx, "insert into "+x.applied+" values ($1, 'cancelled', $2, $3)", ev.ID, p.OrderID, p.Reason)
		return err
	})
	return x
}

// event returns a new event of the type, with the payload.
func event(eventType, payload string) *inbox.Event {
	return &inbox.Event{ID: postbox.NewID(), EventType: eventType, Payload: []byte(payload)}
}

// process processes ev through the router.
func (x *routed) process(ev *inbox.Event) (inbox.Outcome, error) {
	return x.ib.Process(context.Background(), ev, x.r.Apply)
}

// appliedRows returns the rows "route order_id detail" written for id.
func (x *routed) appliedRows(id uuid.UUID) []string {
	x.t.Helper()
	rows, err := x.store.Pool().Query(context.Background(),
		"select route || ' ' || order_id || ' ' || detail from "+x.applied+" where event_id = $1 order by 1", id)
	if err != nil {
		x.t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		x.t.Fatal(err)
	}
	return got
}

// row returns the inbox row of id.
func (x *routed) row(id uuid.UUID) inbox.Record {
	x.t.Helper()
	r, err := x.ib.Get(context.Background(), id)
	if err != nil {
		x.t.Fatal(err)
	}
	return r
}

func TestRouterRoutesByTypeWithDecodedPayload(t *testing.T) {
	t.Parallel()
	x := newRouted(t)
	created := event("order.created", `{"order_id": 42, "amount": 9900}`)
	cancelled := event("order.cancelled", `{"order_id": 43, "reason": "out of stock"}`)
	for _, ev := range []*inbox.Event{created, cancelled} {
		if out, err := x.process(ev); err != nil || out != inbox.Processed {
			t.Fatalf("%s: %v, %v; want processed", ev.EventType, out, err)
		}
	}
	if got, want := x.appliedRows(created.ID), []string{"created 42 9900"}; !slices.Equal(got, want) {
		t.Errorf("order.created applied %q, want %q", got, want)
	}
	if got, want := x.appliedRows(cancelled.ID), []string{"cancelled 43 out of stock"}; !slices.Equal(got, want) {
		t.Errorf("order.cancelled applied %q, want %q", got, want)
	}
	if x.runs["order.created"] != 1 || x.runs["order.cancelled"] != 1 {
		t.Errorf("route runs %v, want one each", x.runs)
	}
	if got, want := x.r.EventTypes(), []string{"order.cancelled", "order.created"}; !slices.Equal(got, want) {
		t.Errorf("EventTypes() = %q, want %q", got, want)
	}
}

// Fields the payload has and the type lacks are ignored; an empty payload
// is the zero value.
func TestRouterDecodingIsLenient(t *testing.T) {
	t.Parallel()
	x := newRouted(t)
	extra := event("order.created", `{"order_id": 7, "amount": 5, "currency": "EUR", "lines": [1, 2]}`)
	empty := event("order.created", "")
	for _, ev := range []*inbox.Event{extra, empty} {
		if _, err := x.process(ev); err != nil {
			t.Fatalf("payload %q: %v", ev.Payload, err)
		}
	}
	if got, want := x.appliedRows(extra.ID), []string{"created 7 5"}; !slices.Equal(got, want) {
		t.Errorf("payload with unknown fields applied %q, want %q", got, want)
	}
	if got, want := x.appliedRows(empty.ID), []string{"created 0 0"}; !slices.Equal(got, want) {
		t.Errorf("empty payload applied %q, want %q", got, want)
	}
}

func TestRouterPayloadThatDoesNotDecodeIsRejected(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string]string{
		"string for a number": `{"order_id": "42", "amount": 1}`,
		"array for an object": `[42, 1]`,
		"fraction for an int": `{"order_id": 4.2}`,
	} {
		t.Run(name, func(t *testing.T) {
			x := newRouted(t)
			ev := event("order.created", payload)
			_, err := x.process(ev)
			if !errors.Is(err, inbox.ErrRejected) || !errors.Is(err, inbox.ErrInvalidEvent) {
				t.Fatalf("Process: %v; want an error matching ErrRejected and ErrInvalidEvent", err)
			}
			if !strings.Contains(err.Error(), "does not decode into inbox_test.orderCreated") {
				t.Errorf("error %q does not say what failed to decode", err)
			}
			if x.runs["order.created"] != 0 {
				t.Errorf("the route ran %d times on a payload that does not decode", x.runs["order.created"])
			}
			r := x.row(ev.ID)
			if r.Status != store.StatusFailed || r.Attempts != 1 || !strings.Contains(r.LastError, "rejected") {
				t.Errorf("inbox row %s, %d attempts, last error %q; want failed, 1, the rejection", r.Status, r.Attempts, r.LastError)
			}
		})
	}
}

// A route's own Reject is a rejection like a decoding failure, and rolls
// back what the route wrote.
func TestRouterRouteRejects(t *testing.T) {
	t.Parallel()
	x := newRouted(t)
	ev := event("order.cancelled", `{"order_id": 43}`)
	_, err := x.process(ev)
	if !errors.Is(err, inbox.ErrRejected) || !errors.Is(err, inbox.ErrInvalidEvent) {
		t.Fatalf("Process: %v; want a rejection", err)
	}
	if !strings.Contains(err.Error(), `"reason" is missing`) {
		t.Errorf("error %q lacks the route's reason", err)
	}
	if r := x.row(ev.ID); r.Status != store.StatusFailed || !strings.Contains(r.LastError, `"reason" is missing`) {
		t.Errorf("inbox row %s with last error %q; want failed with the reason", r.Status, r.LastError)
	}
	if rows := x.appliedRows(ev.ID); len(rows) != 0 {
		t.Errorf("a rejected event left %q", rows)
	}
}

func TestRouterUnknownType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy inbox.UnknownPolicy
		set    bool // call SetUnknown; else the default
		// wantErr: the error must match these (nil: Process succeeds).
		wantErr []error
		// notErr: the error must not match these.
		notErr     []error
		wantStatus string
	}{
		{policy: inbox.UnknownReject, wantErr: []error{inbox.ErrNoRoute, inbox.ErrRejected, inbox.ErrInvalidEvent}, wantStatus: store.StatusFailed},
		{policy: inbox.UnknownReject, set: true, wantErr: []error{inbox.ErrNoRoute, inbox.ErrRejected, inbox.ErrInvalidEvent}, wantStatus: store.StatusFailed},
		{policy: inbox.UnknownIgnore, set: true, wantStatus: store.StatusDone},
		{policy: inbox.UnknownRetry, set: true, wantErr: []error{inbox.ErrNoRoute}, notErr: []error{inbox.ErrRejected, inbox.ErrInvalidEvent}, wantStatus: store.StatusFailed},
	} {
		name := tc.policy.String()
		if !tc.set {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			x := newRouted(t)
			if tc.set {
				x.r.SetUnknown(tc.policy)
			}
			ev := event("order.shipped", `{"order_id": 42}`)
			out, err := x.process(ev)
			for _, want := range tc.wantErr {
				if !errors.Is(err, want) {
					t.Errorf("Process: %v; want an error matching %v", err, want)
				}
			}
			for _, not := range tc.notErr {
				if errors.Is(err, not) {
					t.Errorf("Process: %v matches %v", err, not)
				}
			}
			if tc.wantErr == nil && (err != nil || out != inbox.Processed) {
				t.Errorf("Process: %v, %v; want processed", out, err)
			}
			if r := x.row(ev.ID); r.Status != tc.wantStatus {
				t.Errorf("inbox row %s, want %s", r.Status, tc.wantStatus)
			}
			if len(x.runs) != 0 {
				t.Errorf("routes ran: %v", x.runs)
			}
			if tc.wantErr == nil { // ignored and recorded: a redelivery is a duplicate
				if out, err := x.process(ev); err != nil || out != inbox.Duplicate {
					t.Errorf("second delivery: %v, %v; want duplicate", out, err)
				}
			}
		})
	}
}

// A route's plain error is temporary: nothing is kept, the row is not done,
// and the next delivery runs the route again.
func TestRouterHandlerErrorIsRetried(t *testing.T) {
	t.Parallel()
	x := newRouted(t)
	x.fail = errors.New("stock service unavailable")
	ev := event("order.created", `{"order_id": 42, "amount": 100}`)
	_, err := x.process(ev)
	if !errors.Is(err, x.fail) || errors.Is(err, inbox.ErrInvalidEvent) || errors.Is(err, inbox.ErrRejected) {
		t.Fatalf("Process: %v; want the route's error, not a rejection", err)
	}
	if r := x.row(ev.ID); r.Status == store.StatusDone {
		t.Fatal("the inbox row is done after the route failed")
	}
	if rows := x.appliedRows(ev.ID); len(rows) != 0 {
		t.Fatalf("the failed run left %q", rows)
	}

	x.fail = nil
	if out, err := x.process(ev); err != nil || out != inbox.Processed {
		t.Fatalf("retry: %v, %v; want processed", out, err)
	}
	if r := x.row(ev.ID); r.Status != store.StatusDone || r.Attempts != 2 {
		t.Errorf("inbox row %s after %d attempts, want done after 2", r.Status, r.Attempts)
	}
	if got, want := x.appliedRows(ev.ID), []string{"created 42 100"}; !slices.Equal(got, want) {
		t.Errorf("applied %q, want %q", got, want)
	}
}

func TestRouterDuplicateDoesNotRunTheRoute(t *testing.T) {
	t.Parallel()
	x := newRouted(t)
	ev := event("order.created", `{"order_id": 42, "amount": 100}`)
	for i, want := range []inbox.Outcome{inbox.Processed, inbox.Duplicate, inbox.Duplicate} {
		if out, err := x.process(ev); err != nil || out != want {
			t.Fatalf("delivery %d: %v, %v; want %v", i+1, out, err, want)
		}
	}
	if n := x.runs["order.created"]; n != 1 {
		t.Errorf("the route ran %d times for three deliveries, want 1", n)
	}
	if rows := x.appliedRows(ev.ID); len(rows) != 1 {
		t.Errorf("applied %q, want one row", rows)
	}
}

// The router behind the webhook handler, through Inbox.Processor.
func TestRouterBehindWebhookHandler(t *testing.T) {
	t.Parallel()
	x := newRouted(t)
	var logs logbuf.Buffer
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Secrets: []string{standardSecret},
		Process: x.ib.Processor(x.r.Apply),
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	signer, err := signature.NewSigner(signature.Standard, standardSecret)
	if err != nil {
		t.Fatal(err)
	}
	send := func(id uuid.UUID, eventType, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte(body)))
		req.Header.Set(inbox.HeaderEventType, eventType)
		if err := signer.Sign(req.Header, id.String(), time.Now(), []byte(body)); err != nil {
			t.Fatal(err)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}

	ok := postbox.NewID()
	for _, want := range []string{`{"status":"processed"}`, `{"status":"duplicate"}`} {
		if code, body := send(ok, "order.created", `{"order_id": 1, "amount": 2}`); code != http.StatusOK || body != want {
			t.Errorf("routed event: %d %s, want 200 %s", code, body, want)
		}
	}
	if got, want := x.appliedRows(ok), []string{"created 1 2"}; !slices.Equal(got, want) {
		t.Errorf("applied %q, want %q", got, want)
	}

	for name, tc := range map[string]struct{ eventType, body string }{
		"payload that does not decode": {"order.created", `{"order_id": "one"}`},
		"rejected by the route":        {"order.cancelled", `{"order_id": 1}`},
		"unknown event type":           {"order.shipped", `{"order_id": 1}`},
	} {
		id := postbox.NewID()
		if code, body := send(id, tc.eventType, tc.body); code != http.StatusBadRequest || body != `{"status":"bad_request"}` {
			t.Errorf("%s: %d %s, want 400 bad_request", name, code, body)
		}
		if r := x.row(id); r.Status != store.StatusFailed {
			t.Errorf("%s: inbox row %s, want failed", name, r.Status)
		}
	}

	x.fail = errors.New("stock service unavailable")
	if code, body := send(postbox.NewID(), "order.created", `{"order_id": 3, "amount": 4}`); code != http.StatusInternalServerError {
		t.Errorf("failing route: %d %s, want 500", code, body)
	}
	if !strings.Contains(logs.String(), "stock service unavailable") || !strings.Contains(logs.String(), "rejected") {
		t.Errorf("the failures are not logged:\n%s", logs.String())
	}
}

func TestRejectMatches(t *testing.T) {
	cause := errors.New("amount is negative")
	err := inbox.Reject(cause)
	for _, target := range []error{inbox.ErrRejected, inbox.ErrInvalidEvent, cause} {
		if !errors.Is(err, target) {
			t.Errorf("Reject(cause) does not match %v", target)
		}
	}
	if got, want := err.Error(), "rejected: amount is negative"; got != want {
		t.Errorf("Reject(cause).Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("order 42: %w", err)
	if !errors.Is(wrapped, inbox.ErrRejected) || !errors.Is(wrapped, cause) {
		t.Errorf("a wrapped rejection %v lost its matches", wrapped)
	}
	bare := inbox.Reject(nil)
	if !errors.Is(bare, inbox.ErrRejected) || !errors.Is(bare, inbox.ErrInvalidEvent) || bare.Error() != "rejected" {
		t.Errorf("Reject(nil) = %v, want a bare rejection", bare)
	}
	if errors.Is(errors.New("other"), inbox.ErrRejected) || errors.Is(inbox.ErrInvalidEvent, inbox.ErrRejected) {
		t.Error("ErrRejected matches errors that are not rejections")
	}
}

func TestRouterPanicsOnProgrammingErrors(t *testing.T) {
	route := func(context.Context, pgx.Tx, *inbox.Event, orderCreated) error { return nil }
	for name, f := range map[string]func(){
		"empty type": func() { inbox.Handle(inbox.NewRouter[pgx.Tx](), "", route) },
		"nil route": func() {
			inbox.Handle[pgx.Tx, orderCreated](inbox.NewRouter[pgx.Tx](), "order.created", nil)
		},
		"second route of a type": func() {
			r := inbox.NewRouter[pgx.Tx]()
			inbox.Handle(r, "order.created", route)
			inbox.Handle(r, "order.created", route)
		},
		"policy out of range": func() { inbox.NewRouter[pgx.Tx]().SetUnknown(inbox.UnknownPolicy(7)) },
		"nil ProcessFunc":     func() { inbox.New[pgx.Tx](nil).Processor(nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			f()
		})
	}
}
