// Package postgres is the PostgreSQL store of postbox, on pgx v5: the outbox
// and inbox tables, their embedded migrations, the relay's claim and settle
// statements, and LISTEN/NOTIFY wake-ups.
//
// A Store is what applications call: producers' writes (EnqueueTx,
// Transact), migrations, and what tools read and change (Stats, the dead
// letters, the webhook endpoints). The engine's side, the claims and
// settles of the relay, the endpoints' deliveries, the relays' heartbeats
// and the inbox's steps, is its Driver, which applications hand to
// packages relay, endpoint, relay/presence and inbox without calling it.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// SchemaDefault is the schema of the tables when Config.Schema is empty.
const SchemaDefault = "public"

// Config chooses where the store's tables live.
type Config struct {
	// Schema holds the outbox and inbox tables (default SchemaDefault). It is
	// created by Migrate if missing. Letters, digits and underscores only.
	Schema string
	// Listener, when set, is the listening connection the store's
	// Driver.Listen shares with the stores of other schemas on the same
	// pool (see Listener): Listen subscribes the store's channel on it
	// instead of opening a connection of its own. Make it with
	// NewListener on the store's pool: New refuses a Listener of another
	// pool. Nil (the default): each Listen opens its own connection.
	Listener *Listener
}

// Store is the PostgreSQL outbox and inbox. It is safe for concurrent use.
type Store struct {
	pool    *pgxpool.Pool
	schema  string
	channel string
	// listener is Config.Listener: nil when Listen connects on its own.
	listener *Listener
	sql      sqlstore.Queries
	tx       pgxTransactor
	inbox    *sqlstore.Inbox[pgx.Tx]
	dead     *sqlstore.DeadLetters
	// orderedReady remembers that the index of ordered claims was found
	// valid (see checkOrdered).
	orderedReady atomic.Bool
	// walkedTo is the last aggregate an ordered claim's walk for heads
	// took: the next walk starts after it (nil: at the first aggregate).
	walkedTo atomic.Pointer[aggregateKey]
	// placeholders replaces the {names} of the SQL (expand).
	placeholders *strings.Replacer
	// insertOne is insertSQL(1, false) and insertSQL(1, true): the INSERT
	// of a transaction with one event, built once.
	insertOne [2]string
	// outboxKindSeen is whether outbox_events is partitioned, as the
	// store's enqueues learned it (see skipInsertSQL).
	outboxKindSeen atomic.Int32
	// keep is where the Keep of a partition to drop is (partition.go).
	keep keepState
	// attemptsPartitioned, inboxPartitioned and deliveriesPartitioned
	// remember that endpoint_attempts, inbox_events and
	// endpoint_deliveries were found partitioned (partition_delivered.go).
	attemptsPartitioned, inboxPartitioned, deliveriesPartitioned atomic.Bool
}

var schemaName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// New returns a store on pool. It does not touch the database: run Migrate
// (or `postbox migrate`) once before use.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("postgres: pool is nil")
	}
	if cfg.Schema == "" {
		cfg.Schema = SchemaDefault
	}
	if !schemaName.MatchString(cfg.Schema) {
		return nil, fmt.Errorf("postgres: Config.Schema %q: use letters, digits and underscores (at most 48)", cfg.Schema)
	}
	if cfg.Listener != nil && cfg.Listener.pool != pool {
		return nil, errors.New("postgres: Config.Listener was made for another pool: make it with NewListener on the store's pool (one Listener per pool)")
	}
	s := &Store{pool: pool, schema: cfg.Schema, channel: "postbox_" + cfg.Schema, listener: cfg.Listener, tx: pgxTransactor{pool}}
	s.placeholders = strings.NewReplacer(
		"{schema}", pgx.Identifier{s.schema}.Sanitize(),
		"{channel}", s.channel,
		"{doze_lock}", strconv.Itoa(dozeLock),
		"{doze_barrier_lock}", strconv.Itoa(dozeBarrierLock),
	)
	s.insertOne = [2]string{s.buildInsertSQL(1, false), s.buildInsertSQL(1, true)}
	s.sql = sqlstore.ParseQueries("postgres", s.expand, queriesSQL, inboxSQL, deadLettersSQL, endpointsSQL, walSQL, partitionSQL, partitionDeliveredSQL)
	s.inbox = sqlstore.NewInbox("postgres", inboxDialect{s.tx, s})
	s.dead = sqlstore.NewDeadLetters("postgres", deadLetterSQL{s})
	return s, nil
}

// Schema is the schema that holds the store's tables.
func (s *Store) Schema() string { return s.schema }

// Pool returns the connection pool the store uses.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// String names the store for logs: the server, the database and the
// schema, without credentials.
func (s *Store) String() string {
	cc := s.pool.Config().ConnConfig
	return fmt.Sprintf("postgres %s:%d/%s schema %s", cc.Host, cc.Port, cc.Database, s.schema)
}

// expand fills the placeholders of a query or migration.
func (s *Store) expand(sql string) string {
	return s.placeholders.Replace(sql)
}

//go:embed queries.sql
var queriesSQL string

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Table returns the quoted, schema-qualified name of one of the store's
// tables, for the caller's own SQL.
func (s *Store) Table(name string) string {
	return pgx.Identifier{s.schema, name}.Sanitize()
}

// pgxTransactor begins the store's transactions on its pool.
type pgxTransactor struct{ pool *pgxpool.Pool }

func (t pgxTransactor) Begin(ctx context.Context) (pgx.Tx, error) { return t.pool.Begin(ctx) }

func (pgxTransactor) Commit(ctx context.Context, tx pgx.Tx) error { return tx.Commit(ctx) }

func (pgxTransactor) Rollback(ctx context.Context, tx pgx.Tx) error {
	if err := tx.Rollback(ctx); !errors.Is(err, pgx.ErrTxClosed) {
		return err
	}
	return nil
}
