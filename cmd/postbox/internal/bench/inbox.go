package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store/postgres"
)

// inboxRatioGoal is the goal of the inbox scenario: signed requests/s into
// the inbox's handler, as a share of the pgx client's transactions/s.
const inboxRatioGoal = 0.7

// inboxTimeout bounds one request or transaction of the inbox scenario.
const inboxTimeout = 10 * time.Second

// inboxOrder is the payload of the inbox scenario's events: the warehouse
// example's order.created.
type inboxOrder struct {
	EventID    string    `json:"event_id"`
	OrderID    uuid.UUID `json:"order_id"`
	UserID     string    `json:"user_id"`
	Amount     int64     `json:"amount"`
	OccurredAt time.Time `json:"occurred_at"`
}

// runInbox measures the consumer's side, as the warehouse example runs it:
// Config.InboxClients senders (default: as many as the relay's webhook sink
// sends at once) post signed webhook requests (Standard Webhooks,
// a whsec_ secret, one new event each) over loopback HTTP into
// inbox.NewHandler, whose Process is an Inbox.Processor of a Router with
// one typed route that inserts one reservation row: the inbox row and the
// reservation commit in one transaction. Beside it, its limit: as many
// pgx clients, no HTTP, each committing transactions of the same two
// inserts (the inbox row with the article's insert ... on conflict do
// nothing, and the reservation) with the same payloads. Both run on one
// pool opened from the URL as the warehouse example opens its own (pgx's
// default size, the greater of 4 and the number of CPUs, unless the URL
// sets pool_max_conns), for Config.Duration each, in turns of a second.
// The handler logs its warnings and errors among the progress lines.
func runInbox(ctx context.Context, e *env, p *progress) error {
	pg, ok := e.b.(*pgBackend)
	if !ok {
		return errors.New("the inbox scenario needs PostgreSQL")
	}
	sc, err := e.b.newScratch(ctx, "inbox")
	if err != nil {
		return err
	}
	schema := sc.name()
	clients := e.cfg.InboxClients
	cfg, err := pgxpool.ParseConfig(pg.url)
	if err != nil {
		return err
	}
	appName := e.rep.Run + "_inbox"
	cfg.ConnConfig.RuntimeParams["application_name"] = appName
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		return err
	}
	reservations := st.Table("reservations")
	if _, err := pool.Exec(ctx, strings.ReplaceAll(pgCreateReservations, "{reservations}", reservations)); err != nil {
		return fmt.Errorf("create the reservations table: %w", err)
	}

	secret := newSecret()
	srv, url, err := startInboxServer(st, reservations, secret, relayLogger(p))
	if err != nil {
		return err
	}
	defer srv.Close()
	signer, err := signature.NewSigner(signature.Standard, secret)
	if err != nil {
		return err
	}
	transport := &http.Transport{MaxIdleConns: clients, MaxIdleConnsPerHost: clients, IdleConnTimeout: 90 * time.Second}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: inboxTimeout}

	_, _, sigHeader := signature.Standard.HeaderNames()
	sendHTTP := func(ctx context.Context, i int64) error {
		return postInbox(ctx, client, signer, url, newInboxOrder(i))
	}
	insertInbox := strings.ReplaceAll(pgInsertInbox, "{inbox}", st.Table("inbox_events"))
	insertReservation := strings.ReplaceAll(pgInsertReservation, "{reservations}", reservations)
	sendSQL := func(ctx context.Context, i int64) error {
		o := newInboxOrder(i)
		body, err := json.Marshal(o.payload)
		if err != nil {
			return err
		}
		// The signature the handler's row keeps, made as the sender makes it.
		h := http.Header{}
		if err := signer.Sign(h, o.id.String(), time.Now(), body); err != nil {
			return err
		}
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, insertInbox, o.id, body, h.Get(sigHeader), "order.created", "order", o.payload.OrderID.String())
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("inbox row of %s: not inserted", o.id)
			}
			_, err = tx.Exec(ctx, insertReservation, o.id, o.payload.OrderID, o.payload.Amount)
			return err
		})
	}
	warm := min(e.cfg.Duration/4, time.Second)
	p.printf("warming up both for %s", warm)
	var seq atomic.Int64
	for _, send := range []func(context.Context, int64) error{sendHTTP, sendSQL} {
		if _, _, err := loadRun(ctx, &seq, clients, warm, send); err != nil {
			return err
		}
	}
	p.printf("%d clients for %s each, in turns: signed requests into inbox.NewHandler (one-insert handler), and pgx transactions of the same two inserts", clients, e.cfg.Duration)
	cpu := func(ctx context.Context) (self, server time.Duration) {
		self = selfCPU()
		pids, _ := pg.backendPIDs(ctx, appName)
		server, _ = serverCPU(pids)
		return self, server
	}
	costs, err := loadRounds(ctx, &seq, clients, e.cfg.Duration, cpu, []func(context.Context, int64) error{sendHTTP, sendSQL})
	if err != nil {
		return err
	}
	web, bare := costs[0], costs[1]
	handler := web.rate()
	p.printf("  %.0f requests/s, %.0f transactions/s; CPU per operation: this process %.0f and %.0f µs, the server %.0f and %.0f µs",
		handler, bare.rate(), web.perOp(web.self), bare.perOp(bare.self), web.perOp(web.server), bare.perOp(bare.server))
	var rows int64
	if err := pool.QueryRow(ctx, "select count(*) from "+reservations).Scan(&rows); err != nil {
		return err
	}
	if rows != seq.Load() {
		return fmt.Errorf("%d reservations for %d events", rows, seq.Load())
	}
	if err := e.release(ctx, sc); err != nil {
		return err
	}
	c := fmt.Sprint(clients)
	r := e.rep
	r.addNoRelay(ScenarioInbox, "inbox.handler", "signed webhooks into inbox.NewHandler, one-insert handler ("+c+" clients)", handler, UnitEventsPerSec, nil)
	r.addNoRelay(ScenarioInbox, "inbox.pgx", "pgx transactions of the same two inserts, no HTTP ("+c+" clients)", bare.rate(), UnitTxPerSec, nil)
	r.addNoRelay(ScenarioInbox, "inbox.ratio", "inbox handler / pgx", handler/bare.rate(), UnitRatio, atLeast(inboxRatioGoal))
	if web.self > 0 && bare.self > 0 {
		// The bench's process holds the senders, the server and the pgx
		// clients: CPU per operation is the cost that a noisy machine
		// blurs least.
		r.addNoRelay(ScenarioInbox, "inbox.cpu_handler", "CPU per request, bench process (senders + handler)", web.perOp(web.self), UnitMicros, nil)
		r.addNoRelay(ScenarioInbox, "inbox.cpu_pgx", "CPU per transaction, bench process (pgx clients)", bare.perOp(bare.self), UnitMicros, nil)
	}
	if web.server > 0 && bare.server > 0 {
		r.addNoRelay(ScenarioInbox, "inbox.server_cpu_handler", "CPU per request, the pool's server processes", web.perOp(web.server), UnitMicros, nil)
		r.addNoRelay(ScenarioInbox, "inbox.server_cpu_pgx", "CPU per transaction, the pool's server processes", bare.perOp(bare.server), UnitMicros, nil)
	}
	return nil
}

// inboxEvent is one event of the inbox scenario.
type inboxEvent struct {
	id      uuid.UUID
	payload inboxOrder
}

func newInboxOrder(i int64) inboxEvent {
	id := postbox.NewID()
	return inboxEvent{id: id, payload: inboxOrder{
		EventID: id.String(), OrderID: postbox.NewID(), UserID: fmt.Sprintf("user-%d", i%9973),
		Amount: 1 + i*7919%100000, OccurredAt: time.Now().UTC(),
	}}
}

// startInboxServer serves the warehouse example's webhook endpoint on
// 127.0.0.1: inbox.NewHandler, an Inbox.Processor of a Router whose
// order.created route inserts a reservation.
func startInboxServer(st *postgres.Store, reservations, secret string, logger *slog.Logger) (*http.Server, string, error) {
	ib := inbox.New(st.Driver())
	routes := inbox.NewRouter[pgx.Tx]()
	insert := strings.ReplaceAll(pgInsertReservation, "{reservations}", reservations)
	inbox.Handle(routes, "order.created", func(ctx context.Context, tx pgx.Tx, ev *inbox.Event, o inboxOrder) error {
		_, err := tx.Exec(ctx, insert, ev.ID, o.OrderID, o.Amount)
		return err
	})
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Process: ib.Processor(routes.Apply), Secrets: []string{secret}, Logger: logger,
	})
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: inboxTimeout, ReadTimeout: inboxTimeout, WriteTimeout: 3 * inboxTimeout}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String() + "/webhook", nil
}

// postInbox posts ev signed, as the relay's webhook sink does, and wants
// 200.
func postInbox(ctx context.Context, client *http.Client, signer *signature.Signer, url string, ev inboxEvent) error {
	body, err := json.Marshal(ev.payload)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	h := req.Header
	h.Set(postbox.HeaderContentType, postbox.ContentTypeJSON)
	h.Set(postbox.HeaderEventType, "order.created")
	h.Set(postbox.HeaderAggregateType, "order")
	h.Set(postbox.HeaderAggregateID, ev.payload.OrderID.String())
	h.Set(postbox.HeaderAttempt, "1")
	if err := signer.Sign(h, ev.id.String(), time.Now(), body); err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("inbox request: %w", err)
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("inbox request: answered %s: %s", resp.Status, answer)
	}
	return nil
}

// loadCost is what one side of the inbox scenario did: operations, the
// time they took, and the CPU that this process and the pool's server
// processes used meanwhile.
type loadCost struct {
	n                  int64
	took, self, server time.Duration
}

func (c loadCost) rate() float64 { return float64(c.n) / c.took.Seconds() }

// perOp is d per operation, in microseconds.
func (c loadCost) perOp(d time.Duration) float64 {
	return float64(d) / float64(time.Microsecond) / float64(c.n)
}

// loadRounds runs each of sends for d in all, in turns of at most
// writeRoundMax, and returns what each one did. cpu reads the CPU time used
// so far by this process and by the server processes of the pool.
func loadRounds(ctx context.Context, seq *atomic.Int64, clients int, d time.Duration, cpu func(context.Context) (self, server time.Duration), sends []func(context.Context, int64) error) ([]loadCost, error) {
	rounds := max(1, int((d+writeRoundMax-1)/writeRoundMax))
	turn := d / time.Duration(rounds)
	costs := make([]loadCost, len(sends))
	for range rounds {
		for i, send := range sends {
			self0, server0 := cpu(ctx)
			n, took, err := loadRun(ctx, seq, clients, turn, send)
			if err != nil {
				return nil, err
			}
			self1, server1 := cpu(ctx)
			c := &costs[i]
			c.n += n
			c.took += took
			c.self += self1 - self0
			c.server += server1 - server0
		}
	}
	return costs, nil
}
