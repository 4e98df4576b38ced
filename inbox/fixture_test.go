package inbox_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store/postgres"
)

// Secrets of the tests: a Standard Webhooks secret and an article-style one.
const (
	standardSecret = "whsec_c2VjcmV0LWtleS1vZi10aGlydHktdHdvLWJ5dGVzIQ=="
	xSecret        = "article-secret-of-32-bytes-long!"
)

// fixture is a webhook handler on a real HTTP server, in front of an inbox
// on a fresh PostgreSQL schema, whose handler writes one business row per
// event into a table of its own.
type fixture struct {
	t       testing.TB
	store   *postgres.Store
	ib      *inbox.Inbox[pgx.Tx]
	srv     *httptest.Server
	signer  *signature.Signer
	scheme  signature.Scheme
	inbox   string // quoted inbox table
	effects string // quoted business table
	// failures is how many more handler runs fail.
	failures atomic.Int32
	// calls counts calls of HandlerConfig.Process.
	calls atomic.Int32
	logs  logbuf.Buffer
}

// newFixture starts a handler configured by cfg (Process, Secrets and
// Logger are filled in unless set).
func newFixture(t testing.TB, cfg inbox.HandlerConfig) *fixture {
	t.Helper()
	ctx := context.Background()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, store: s, ib: inbox.New(s.Driver()), scheme: cfg.Scheme}
	f.inbox = pgx.Identifier{schema, "inbox_events"}.Sanitize()
	f.effects = pgx.Identifier{schema, "effects"}.Sanitize()
	if _, err := pool.Exec(ctx, "create table "+f.effects+" (event_id uuid not null)"); err != nil {
		t.Fatal(err)
	}

	secret := standardSecret
	if cfg.Scheme == signature.XSignature {
		secret = xSecret
	}
	if cfg.Secrets == nil {
		cfg.Secrets = []string{secret}
	}
	if f.signer, err = signature.NewProfileSigner(signature.Profile{Scheme: cfg.Scheme, Names: cfg.HeaderNames}, secret); err != nil {
		t.Fatal(err)
	}
	if cfg.Process == nil {
		cfg.Process = func(ctx context.Context, ev *inbox.Event) (inbox.Outcome, error) {
			f.calls.Add(1)
			return f.ib.Process(ctx, ev, f.apply)
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(&f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h, err := inbox.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

// apply is the application's handler: one business row per event, unless
// a failure is due.
func (f *fixture) apply(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
	if _, err := tx.Exec(ctx, "insert into "+f.effects+" (event_id) values ($1)", ev.ID); err != nil {
		return err
	}
	if f.failures.Add(-1) >= 0 {
		return fmt.Errorf("ledger service unavailable (internal detail %s)", internalDetail)
	}
	return nil
}

// internalDetail is in the text of the handler's errors; it must reach the
// log, never a response.
const internalDetail = "db-host-10.1.2.3"

// payload returns a JSON body naming the event.
func payload(id uuid.UUID) []byte {
	return fmt.Appendf(nil, `{"event_id":%q,"order_id":42,"amount":9900}`, id)
}

// request returns a delivery of body as event id, signed at ts, with the
// metadata of order 42 and the headers of nameValues, set before it is
// signed.
func (f *fixture) request(id string, body []byte, ts time.Time, nameValues ...string) *http.Request {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL, bytes.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(inbox.HeaderEventType, "order.created")
	req.Header.Set(inbox.HeaderAggregateType, "order")
	req.Header.Set(inbox.HeaderAggregateID, "42")
	for i := 0; i+1 < len(nameValues); i += 2 {
		req.Header.Set(nameValues[i], nameValues[i+1])
	}
	if err := f.signer.Sign(req.Header, id, ts, body); err != nil {
		f.t.Fatal(err)
	}
	return req
}

// newRequest returns a fresh event's delivery, signed now.
func (f *fixture) newRequest() (*http.Request, uuid.UUID) {
	id := postbox.NewID()
	return f.request(id.String(), payload(id), time.Now()), id
}

// send sends req and returns the status code and body of the answer.
func (f *fixture) send(req *http.Request) (int, string) {
	f.t.Helper()
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// wantAnswer sends req and checks the answer.
func (f *fixture) wantAnswer(req *http.Request, code int, status string) {
	f.t.Helper()
	gotCode, gotBody := f.send(req)
	if want := `{"status":"` + status + `"}` + "\n"; gotCode != code || gotBody != want {
		f.t.Fatalf("answer %d %q, want %d %q", gotCode, gotBody, code, want)
	}
}

// effectsOf counts the business rows of event id.
func (f *fixture) effectsOf(id uuid.UUID) int {
	f.t.Helper()
	var n int
	if err := f.store.Pool().QueryRow(context.Background(), "select count(*) from "+f.effects+" where event_id = $1", id).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// wantNothingStored checks that the inbox and the business table are
// empty.
func (f *fixture) wantNothingStored() {
	f.t.Helper()
	var rows, effects int
	err := f.store.Pool().QueryRow(context.Background(),
		"select (select count(*) from "+f.inbox+"), (select count(*) from "+f.effects+")").Scan(&rows, &effects)
	if err != nil {
		f.t.Fatal(err)
	}
	if rows != 0 || effects != 0 {
		f.t.Fatalf("%d inbox rows and %d business rows stored, want none", rows, effects)
	}
}
