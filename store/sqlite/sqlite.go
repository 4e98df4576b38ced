package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Defaults of the Config fields.
const (
	// SynchronousDefault is Config.Synchronous when empty: with WAL, a
	// commit survives a crash of the process but not necessarily a power
	// loss or an operating system crash.
	SynchronousDefault = "NORMAL"
	// BusyTimeoutDefault is Config.BusyTimeout when zero.
	BusyTimeoutDefault = 5 * time.Second
	// MaxOpenConnsDefault is Config.MaxOpenConns when zero.
	MaxOpenConnsDefault = 8
)

// Config tunes the database connection. The zero value is ready to use.
type Config struct {
	// TablePrefix is put before the name of every table and index the store
	// creates ("" by default: outbox_events and inbox_events, as in the
	// article). Letters, digits and underscores, starting with a letter or
	// an underscore, at most 48.
	TablePrefix string

	// Synchronous is SQLite's PRAGMA synchronous, applied to every
	// connection: "NORMAL" (SynchronousDefault), "FULL" or "EXTRA"
	// ("OFF" is refused). In WAL mode, NORMAL syncs the log only at
	// checkpoints: a transaction is safe once committed if the process
	// crashes, and the database is never corrupted, but a power loss or an
	// operating system crash can undo the transactions committed since the
	// last checkpoint. Such a transaction goes away whole, business rows and
	// events together, but its events may already have been delivered. FULL
	// syncs the log at every commit, which makes commits durable at the
	// cost of one fsync each.
	Synchronous string

	// BusyTimeout is how long a write transaction waits for the write lock
	// held by another transaction, of this process or another one, before
	// it fails with "database is locked" (BusyTimeoutDefault, 5s). At least
	// a millisecond.
	BusyTimeout time.Duration

	// MaxOpenConns bounds the connection pool (MaxOpenConnsDefault, 8).
	// Readers use connections of their own and run beside the one writer;
	// a transaction waiting for the write lock holds its connection.
	MaxOpenConns int
	// MustExist makes Open fail, with an error wrapping os.ErrNotExist,
	// when the database file does not exist, instead of creating it (for
	// tools that only read, such as postbox status).
	MustExist bool
}

var tablePrefix = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,47})?$`)

// withDefaults validates cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if !tablePrefix.MatchString(cfg.TablePrefix) {
		return cfg, fmt.Errorf("sqlite: Config.TablePrefix %q: use letters, digits and underscores, starting with a letter or an underscore (at most 48)", cfg.TablePrefix)
	}
	if cfg.Synchronous == "" {
		cfg.Synchronous = SynchronousDefault
	}
	cfg.Synchronous = strings.ToUpper(cfg.Synchronous)
	switch cfg.Synchronous {
	case "NORMAL", "FULL", "EXTRA":
	default:
		return cfg, fmt.Errorf("sqlite: Config.Synchronous %q: use NORMAL, FULL or EXTRA", cfg.Synchronous)
	}
	switch {
	case cfg.BusyTimeout == 0:
		cfg.BusyTimeout = BusyTimeoutDefault
	case cfg.BusyTimeout < time.Millisecond:
		return cfg, fmt.Errorf("sqlite: Config.BusyTimeout %v: at least 1ms", cfg.BusyTimeout)
	}
	switch {
	case cfg.MaxOpenConns == 0:
		cfg.MaxOpenConns = MaxOpenConnsDefault
	case cfg.MaxOpenConns < 0:
		return cfg, fmt.Errorf("sqlite: Config.MaxOpenConns %d: must not be negative", cfg.MaxOpenConns)
	}
	return cfg, nil
}

// Store is the SQLite outbox and inbox. It is safe for concurrent use. Open one Store
// per database file in a process: its write lock and its wake-ups are its
// own.
type Store struct {
	db *sql.DB
	// path is the database file, for String.
	path   string
	prefix string
	// outboxTable is the outbox's table name, which the connection hooks
	// watch for inserts.
	outboxTable string
	sql         sqlstore.Queries
	tx          sqlTransactor
	inbox       *sqlstore.Inbox[*inboxTx]
	dead        *sqlstore.DeadLetters
	enqueue     *sqlstore.Enqueue

	// writeLock admits one write transaction of this Store at a time, in
	// arrival order, so that the writers of one process queue in Go instead
	// of polling SQLite's lock (see conn.go).
	writeLock   chan struct{}
	busyTimeout time.Duration

	listenMu  sync.RWMutex
	listeners map[chan struct{}]struct{}

	closeOnce sync.Once
	closed    chan struct{}
}

// Open opens (creating it if missing) the SQLite database file at path and
// returns a store on it. path is a file name or a "file:" URI; in-memory
// databases are refused, because every pooled connection would see a
// database of its own.
//
// Every connection runs in WAL mode (readers and the writer do not block
// each other) with foreign keys on, cfg.Synchronous and cfg.BusyTimeout, and
// begins its read-write transactions with BEGIN IMMEDIATE, so a transaction
// waits for the write lock when it begins instead of failing with
// SQLITE_BUSY at its first write. Open does not create the tables: run
// Migrate (or `postbox migrate`) once. Close the store when done.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dsn, err := dataSourceName(path, cfg)
	if err != nil {
		return nil, err
	}
	if cfg.MustExist {
		if _, err := os.Stat(fileName(path)); err != nil {
			return nil, fmt.Errorf("sqlite: no database at %s: %w", fileName(path), err)
		}
	}
	base, err := sqlite.NewConnector(dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s := &Store{
		path:        fileName(path),
		prefix:      cfg.TablePrefix,
		outboxTable: cfg.TablePrefix + "outbox_events",
		writeLock:   make(chan struct{}, 1),
		busyTimeout: cfg.BusyTimeout,
		listeners:   map[chan struct{}]struct{}{},
		closed:      make(chan struct{}),
	}
	s.sql = sqlstore.ParseQueries("sqlite", s.expand, queriesSQL, inboxSQL, deadLettersSQL, endpointsSQL)
	s.db = sql.OpenDB(&connector{base: base, store: s})
	s.tx = sqlTransactor{s.db}
	s.inbox = sqlstore.NewInbox("sqlite", inboxDialect{s})
	s.dead = sqlstore.NewDeadLetters("sqlite", deadLetterSQL{s})
	s.enqueue = sqlstore.NewEnqueue("sqlite", enqueueSQL{s})
	s.db.SetMaxOpenConns(cfg.MaxOpenConns)
	s.db.SetMaxIdleConns(cfg.MaxOpenConns)
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return s, nil
}

// fileName is the file of path, a file name or a "file:" URI.
func fileName(path string) string {
	if rest, ok := strings.CutPrefix(path, "file:"); ok {
		name, _, _ := strings.Cut(rest, "?")
		return name
	}
	return path
}

// dataSourceName is path with the connection settings of modernc.org/sqlite.
func dataSourceName(path string, cfg Config) (string, error) {
	if path == "" || path == ":memory:" || strings.Contains(path, "mode=memory") {
		return "", fmt.Errorf("sqlite: path %q: in-memory databases are not supported, use a file (a temporary one for tests)", path)
	}
	sep := "?"
	if strings.Contains(path, "?") {
		if !strings.HasPrefix(path, "file:") {
			return "", fmt.Errorf("sqlite: path %q contains '?': write it as a file: URI", path)
		}
		sep = "&"
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+cfg.Synchronous+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	return path + sep + q.Encode(), nil
}

// DB returns the store's database handle, so producers can write their
// business rows and their events (EnqueueTx) in one transaction.
//
// Its read-write transactions begin with BEGIN IMMEDIATE and take the
// store's write lock: they wait for each other, in turn, up to
// Config.BusyTimeout, instead of failing. Do not start a second write
// transaction, such as an Enqueue, from inside one on the same goroutine: it
// would wait for the first to end and fail after the busy timeout.
// Read-only transactions (sql.TxOptions{ReadOnly: true}) and statements
// outside a transaction do not take the store's write lock (a write
// statement outside a transaction waits for SQLite's lock instead).
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the quoted name of one of the store's tables (such as
// "outbox_events"), with Config.TablePrefix, for the caller's own SQL.
func (s *Store) Table(name string) string { return `"` + s.prefix + name + `"` }

// Close closes the database handle; Listen calls return.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.db.Close()
}

// String names the store for logs: the database file and the table prefix.
func (s *Store) String() string {
	if s.prefix == "" {
		return "sqlite " + s.path
	}
	return fmt.Sprintf("sqlite %s table prefix %s", s.path, s.prefix)
}

// expand fills the placeholders of a query or migration.
func (s *Store) expand(sql string) string {
	return strings.ReplaceAll(sql, "{prefix}", s.prefix)
}

// inTx runs fn in a write transaction of the store's own.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqlstore.InTx(ctx, s.tx, fn)
}

// sqlTransactor begins the store's write transactions on its handle.
type sqlTransactor struct{ db *sql.DB }

func (t sqlTransactor) Begin(ctx context.Context) (*sql.Tx, error) { return t.db.BeginTx(ctx, nil) }

func (sqlTransactor) Commit(_ context.Context, tx *sql.Tx) error { return tx.Commit() }

func (sqlTransactor) Rollback(_ context.Context, tx *sql.Tx) error {
	if err := tx.Rollback(); !errors.Is(err, sql.ErrTxDone) {
		return err
	}
	return nil
}

//go:embed queries.sql
var queriesSQL string

//go:embed migrations/*.sql
var migrationFiles embed.FS
