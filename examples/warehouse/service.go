package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/store/postgres"
)

// Timeouts of the HTTP server. The relay's webhook sink gives a request 10
// seconds by default; WriteTimeout leaves the handler's transaction room
// beyond that.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 15 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// shutdownTimeout is how long requests in flight may finish after a
	// signal.
	shutdownTimeout = 10 * time.Second
	// healthTimeout bounds the database ping of GET /.
	healthTimeout = 2 * time.Second
)

// eventOrderCreated is the event type the warehouse reserves stock for.
const eventOrderCreated = "order.created"

// errInjected is the handler's error when --fail-rate strikes.
var errInjected = errors.New("injected fault (--fail-rate)")

// orderCreated is the payload of an order.created event, the article's.
// The warehouse keeps its own copy of the contract rather than importing
// the producer's type: the two services share a wire format, not code.
type orderCreated struct {
	// EventID is the producer's copy of the event id. The reservation
	// records the signed webhook id, which is the inbox key, instead.
	EventID    string    `json:"event_id"`
	OrderID    uuid.UUID `json:"order_id"`
	UserID     string    `json:"user_id"`
	Amount     int64     `json:"amount"`
	OccurredAt time.Time `json:"occurred_at"`
}

// check reports what makes a decoded order.created payload unusable.
func (o orderCreated) check() error {
	switch {
	case o.OrderID == uuid.Nil:
		return errors.New(`"order_id" is missing`)
	case o.Amount <= 0:
		return fmt.Errorf(`"amount" %d is not positive`, o.Amount)
	}
	return nil
}

// service is the warehouse: the webhook endpoint of an inbox whose handler
// reserves stock. It is safe for concurrent use.
type service struct {
	pool         *pgxpool.Pool
	inbox        *inbox.Inbox[pgx.Tx]
	webhook      http.Handler
	log          *slog.Logger
	reservations string // quoted, schema-qualified table name
	// fail decides whether a handler run fails on purpose (--fail-rate).
	fail func() bool
	// faults counts the failures injected.
	faults atomic.Int64
}

// newService connects to cfg.DB, runs the postbox migrations, creates the
// reservations table and returns the service. Close it when done.
func newService(ctx context.Context, cfg config, log *slog.Logger) (*service, error) {
	pool, err := pgxpool.New(ctx, cfg.DB)
	if err != nil {
		return nil, fmt.Errorf("--db: %w", err)
	}
	s, err := setUp(ctx, pool, cfg, log)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func setUp(ctx context.Context, pool *pgxpool.Pool, cfg config, log *slog.Logger) (*service, error) {
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("cannot reach the database: %w", err)
	}
	st, err := postgres.New(pool, postgres.Config{Schema: cfg.Schema})
	if err != nil {
		return nil, err
	}
	if _, err := st.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("migrate: %w", err)
	}
	failRate := cfg.FailRate
	s := &service{
		pool:         pool,
		inbox:        inbox.New(st.Driver()),
		log:          log,
		reservations: st.Table("reservations"),
		fail:         func() bool { return rand.Float64() < failRate },
	}
	if err := s.createTable(ctx); err != nil {
		return nil, err
	}
	// One route: order.created reserves stock. Events of other types are
	// not for the warehouse: acknowledge them, so the sender does not
	// retry them, and keep them in the inbox for audit.
	routes := inbox.NewRouter[pgx.Tx]()
	routes.SetUnknown(inbox.UnknownIgnore)
	inbox.Handle(routes, eventOrderCreated, s.reserve)
	s.webhook, err = inbox.NewHandler(inbox.HandlerConfig{
		Process: s.inbox.Processor(routes.Apply),
		// Several secrets, separated by spaces or commas, during a
		// rotation: as the relay's --webhook-secret.
		Secrets: strings.FieldsFunc(cfg.Secret, func(r rune) bool { return r == ' ' || r == ',' }),
		Logger:  log,
	})
	if err != nil {
		return nil, fmt.Errorf("--secret: %w", err)
	}
	return s, nil
}

// createTable creates the reservations table if it is missing. It has
// deliberately no unique constraint: the inbox alone keeps an event from
// reserving twice, and a second reservation would show as a second row.
func (s *service) createTable(ctx context.Context) error {
	// The advisory lock lets several instances start at once: concurrent
	// "create table if not exists" of one table can otherwise collide.
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "select pg_advisory_xact_lock(hashtext($1))", "postbox example "+s.reservations); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `create table if not exists `+s.reservations+` (
  event_id   uuid not null,
  order_id   uuid not null,
  amount     bigint not null,
  created_at timestamptz not null default now()
)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create table reservations: %w", err)
	}
	return nil
}

// close releases the database connections.
func (s *service) close() { s.pool.Close() }

// routes returns the service's HTTP handler: POST /webhook and GET /.
func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", s.webhook)
	mux.HandleFunc("GET /{$}", s.health)
	return mux
}

// health answers 200 while the database is reachable, 503 otherwise.
func (s *service) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
	defer cancel()
	w.Header().Set("Content-Type", "application/json")
	if err := s.pool.Ping(ctx); err != nil {
		s.log.Warn("health check: database unreachable", "error", err)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"database unreachable"}`+"\n")
		return
	}
	_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
}

// reserve reserves stock for an order.created event, in the transaction
// that writes the event's inbox row: both commit, or neither does. The
// inbox handler turns its result into the HTTP answer: 200, 400 for a
// rejected payload (no retry can fix it), 500 for a failure (retried).
func (s *service) reserve(ctx context.Context, tx pgx.Tx, ev *inbox.Event, o orderCreated) error {
	if err := o.check(); err != nil {
		return inbox.Reject(err)
	}
	_, err := tx.Exec(ctx, "insert into "+s.reservations+" (event_id, order_id, amount) values ($1, $2, $3)",
		ev.ID, o.OrderID, o.Amount)
	if err != nil {
		return fmt.Errorf("reserve stock: %w", err)
	}
	// The fault strikes after the inbox row and the reservation were
	// written: the rollback must take both away, and the sender's retry
	// must then be processed, not answered as a duplicate.
	if s.fail() {
		s.faults.Add(1)
		return errInjected
	}
	s.log.Info("reserving stock", "event_id", ev.ID, "order_id", o.OrderID, "amount", o.Amount)
	return nil
}

// serve answers HTTP requests on ln until ctx ends, then shuts the server
// down gracefully: it stops accepting connections and lets the requests in
// flight finish, for up to shutdownTimeout.
func (s *service) serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.routes(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("warehouse stopping")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	s.log.Info("warehouse stopped", "faults_injected", s.faults.Load())
	return nil
}

// run is the whole command: set up, listen on cfg.Addr, serve until ctx
// ends.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	s, err := newService(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer s.close()
	// Done inbox rows are kept for inbox.RetentionKeepDefault (7 days),
	// far beyond the relay's retries, then deleted, hourly, until ctx ends.
	retained := make(chan struct{})
	defer func() { <-retained }() // before the pool closes
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // also when serve fails
	go func() {
		defer close(retained)
		_ = s.inbox.RunRetention(ctx, inbox.Retention{Logger: log}) // valid: errors only for a bad Retention
	}()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Addr)
	if err != nil {
		return err
	}
	// Never log cfg itself: it holds the secret and the database URL.
	log.Info("warehouse listening", "addr", ln.Addr().String(), "schema", cfg.Schema, "fail_rate", cfg.FailRate)
	return s.serve(ctx, ln)
}
