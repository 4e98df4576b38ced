package mysql

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// Defaults of the Config fields.
const (
	// MaxOpenConnsDefault is Config.MaxOpenConns when zero.
	MaxOpenConnsDefault = 16
	// DialTimeoutDefault is Config.DialTimeout when zero.
	DialTimeoutDefault = 10 * time.Second
	// LockWaitTimeoutDefault is Config.LockWaitTimeout when zero.
	LockWaitTimeoutDefault = 10 * time.Second
)

// Config tunes the store. The zero value is ready to use.
type Config struct {
	// TablePrefix is put before the name of every table, index and trigger
	// the store creates ("" by default: outbox_events and inbox_events, as
	// in the article). Letters, digits and underscores, starting with a
	// letter or an underscore, at most 32 (MySQL names are at most 64
	// characters long).
	TablePrefix string

	// MaxOpenConns bounds the connection pool (MaxOpenConnsDefault, 16).
	MaxOpenConns int

	// DialTimeout bounds connecting to the server (DialTimeoutDefault,
	// 10s), unless the URL sets its own (timeout=).
	DialTimeout time.Duration

	// LockWaitTimeout bounds, as innodb_lock_wait_timeout, how long one
	// of the store's own statements waits for a row lock
	// (LockWaitTimeoutDefault, 10s; whole seconds, at least 1s). A claim
	// waits for no lock (SKIP LOCKED) and is bounded by its context's
	// deadline as well.
	LockWaitTimeout time.Duration
}

var tablePrefix = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]{0,31})?$`)

// withDefaults validates cfg and fills in its defaults.
func (cfg Config) withDefaults() (Config, error) {
	if !tablePrefix.MatchString(cfg.TablePrefix) {
		return cfg, fmt.Errorf("mysql: Config.TablePrefix %q: use letters, digits and underscores, starting with a letter or an underscore (at most 32)", cfg.TablePrefix)
	}
	switch {
	case cfg.MaxOpenConns == 0:
		cfg.MaxOpenConns = MaxOpenConnsDefault
	case cfg.MaxOpenConns < 0:
		return cfg, fmt.Errorf("mysql: Config.MaxOpenConns %d: must not be negative", cfg.MaxOpenConns)
	}
	switch {
	case cfg.DialTimeout == 0:
		cfg.DialTimeout = DialTimeoutDefault
	case cfg.DialTimeout < 0:
		return cfg, fmt.Errorf("mysql: Config.DialTimeout %v: must not be negative", cfg.DialTimeout)
	}
	switch {
	case cfg.LockWaitTimeout == 0:
		cfg.LockWaitTimeout = LockWaitTimeoutDefault
	case cfg.LockWaitTimeout < time.Second || cfg.LockWaitTimeout%time.Second != 0:
		return cfg, fmt.Errorf("mysql: Config.LockWaitTimeout %v: whole seconds, at least 1s", cfg.LockWaitTimeout)
	}
	return cfg, nil
}

// Store is the MySQL (MariaDB) outbox and inbox. It is safe for concurrent
// use.
type Store struct {
	db *sql.DB
	// conf is the driver's configuration, for Migrate's connections; name
	// is the server and database, for String and errors, without
	// credentials.
	conf   *mysql.Config
	name   string
	prefix string
	// mariadb is true on MariaDB, false on MySQL: the claim's statement
	// time limit is written differently (see claimBounds).
	mariadb bool
	sql     sqlstore.Queries
	stmts   sync.Map // query name -> *statement
	tx      sqlTransactor
	inbox   *sqlstore.Inbox[*sql.Tx]
	dead    *sqlstore.DeadLetters
	enqueue *sqlstore.Enqueue

	listenMu  sync.RWMutex
	listeners map[chan struct{}]struct{}

	closeOnce sync.Once
	closed    chan struct{}
}

// sessionSQLMode is the sql_mode of every connection of a store: strict, so
// that a value a column cannot hold is refused instead of cut or zeroed, and
// no zero dates.
const sessionSQLMode = "'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"

// Open connects to the MySQL or MariaDB database of dsn and returns a
// store on it. dsn is a URL, mysql://user:pass@host:port/db?params (port
// 3306 by default; params as the go-sql-driver/mysql DSN takes them), or a
// go-sql-driver/mysql DSN, user:pass@tcp(host:port)/db?params.
//
// Every connection reads and writes times in UTC (time_zone '+00:00',
// parseTime, loc=UTC), speaks utf8mb4, and runs in a strict sql_mode
// (sessionSQLMode); the store's own transactions run at READ COMMITTED.
// Open detects whether the server is MariaDB (10.6 or later) or MySQL (8.0
// or later). It does not create the tables: run Migrate (or `postbox
// migrate`) once. Close the store when done.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	conf, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if conf.DBName == "" {
		return nil, fmt.Errorf("mysql: %s names no database: add it to the URL (mysql://host:3306/name)", redact(conf))
	}
	conf.ParseTime = true
	conf.Loc = time.UTC
	conf.Collation = "utf8mb4_bin"
	if conf.Timeout == 0 {
		conf.Timeout = cfg.DialTimeout
	}
	if conf.Params == nil {
		conf.Params = map[string]string{}
	}
	conf.Params["time_zone"] = "'+00:00'"
	conf.Params["sql_mode"] = sessionSQLMode
	conf.Params["innodb_lock_wait_timeout"] = fmt.Sprint(int(cfg.LockWaitTimeout / time.Second))
	conf.MultiStatements = false
	connector, err := mysql.NewConnector(conf)
	if err != nil {
		return nil, fmt.Errorf("mysql: open %s: %w", redact(conf), err)
	}
	s := &Store{
		conf:      conf,
		name:      redact(conf),
		prefix:    cfg.TablePrefix,
		listeners: map[chan struct{}]struct{}{},
		closed:    make(chan struct{}),
	}
	s.sql = sqlstore.ParseQueries("mysql", s.expand, queriesSQL, inboxSQL, deadLettersSQL, endpointsSQL, presenceSQL)
	s.db = sql.OpenDB(connector)
	s.db.SetMaxOpenConns(cfg.MaxOpenConns)
	s.db.SetMaxIdleConns(cfg.MaxOpenConns)
	s.db.SetConnMaxIdleTime(5 * time.Minute)
	s.tx = sqlTransactor{s.db}
	s.inbox = sqlstore.NewInbox("mysql", inboxDialect{s}).RetryTakeOn(isDeadlock)
	s.dead = sqlstore.NewDeadLetters("mysql", deadLetterSQL{s})
	s.enqueue = sqlstore.NewEnqueue("mysql", enqueueSQL{s})
	var version string
	if err := s.db.QueryRowContext(ctx, "select version()").Scan(&version); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("mysql: open %s: %w", s.name, scrub(err, conf))
	}
	s.mariadb = strings.Contains(strings.ToLower(version), "mariadb")
	return s, nil
}

// parseDSN reads a mysql:// URL or a go-sql-driver/mysql DSN. Its errors
// never hold the password.
func parseDSN(dsn string) (*mysql.Config, error) {
	if !strings.HasPrefix(dsn, "mysql://") {
		conf, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, errors.New("mysql: the DSN is neither mysql://user:pass@host:port/db nor user:pass@tcp(host:port)/db (a go-sql-driver/mysql DSN)")
		}
		return conf, nil
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, errors.New("mysql: the URL does not parse: write it mysql://user:pass@host:port/db?params, with special characters of the password %-encoded")
	}
	if u.Host == "" {
		return nil, fmt.Errorf("mysql: %s names no host: write it mysql://user:pass@host:port/db", u.Redacted())
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "3306")
	}
	base := mysql.NewConfig()
	base.Net, base.Addr = "tcp", host
	base.DBName = strings.TrimPrefix(u.Path, "/")
	if u.User != nil {
		base.User = u.User.Username()
		base.Passwd, _ = u.User.Password()
	}
	if u.RawQuery == "" {
		return base, nil
	}
	// The parameters are the driver's: let it read them on a DSN without
	// credentials, then put those back.
	withParams, err := mysql.ParseDSN("tcp(" + host + ")/" + base.DBName + "?" + u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("mysql: %s: its parameters: %w", u.Redacted(), err)
	}
	withParams.User, withParams.Passwd = base.User, base.Passwd
	return withParams, nil
}

// redact names the server and database of conf, never the password.
func redact(conf *mysql.Config) string {
	u := url.URL{Scheme: "mysql", Host: conf.Addr, Path: "/" + conf.DBName}
	if conf.User != "" {
		u.User = url.User(conf.User)
		if conf.Passwd != "" {
			u.User = url.UserPassword(conf.User, "xxxxx")
		}
	}
	return u.String()
}

// scrub is err with conf's password, should the driver or the server ever
// quote it, replaced.
func scrub(err error, conf *mysql.Config) error {
	if err == nil || conf.Passwd == "" || !strings.Contains(err.Error(), conf.Passwd) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), conf.Passwd, "xxxxx"))
}

// DB returns the store's database handle, so producers can write their
// business rows and their events (EnqueueTx) in one transaction. Its
// connections run with the settings Open describes.
func (s *Store) DB() *sql.DB { return s.db }

// Table returns the quoted name of one of the store's tables (such as
// "outbox_events"), with Config.TablePrefix, for the caller's own SQL.
func (s *Store) Table(name string) string { return "`" + s.prefix + name + "`" }

// Close closes the database handle; Listen calls return.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.closed) })
	return s.db.Close()
}

// String names the store for logs: the server and database, the password
// redacted, and the table prefix.
func (s *Store) String() string {
	if s.prefix == "" {
		return "mysql " + s.name
	}
	return fmt.Sprintf("mysql %s table prefix %s", s.name, s.prefix)
}

// expand fills the placeholders of a query or migration.
func (s *Store) expand(sql string) string {
	return strings.ReplaceAll(sql, "{prefix}", s.prefix)
}

// inTx runs fn in a transaction of the store's own (READ COMMITTED).
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqlstore.InTx(ctx, s.tx, fn)
}

// sqlTransactor begins the store's transactions on its handle, at READ
// COMMITTED: a statement sees what committed before it began, and locks
// only the rows it changes (no gap locks), so claims of several relays
// skip each other's rows instead of waiting.
type sqlTransactor struct{ db *sql.DB }

func (t sqlTransactor) Begin(ctx context.Context) (*sql.Tx, error) {
	return t.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
}

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
