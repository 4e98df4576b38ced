package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/mysql"
)

// mySettingNames are the server settings the report shows.
var mySettingNames = []string{
	"binlog_format", "innodb_buffer_pool_size", "innodb_flush_log_at_trx_commit",
	"log_bin", "max_connections", "sync_binlog",
}

// fillDigits is how many decimal digits myFill's generated numbers span:
// one statement writes at most 10^fillDigits events.
const fillDigits = 5

// myBackend runs the scenarios on a MariaDB or MySQL server. Each scratch
// outbox is a database of its own on the server, <run>_<label>, created
// with mysql.CreateDatabase and dropped with mysql.DropDatabase: in MySQL a
// database is what a schema is in PostgreSQL. The database the URL names,
// if any, is not touched.
type myBackend struct {
	run string
	// base is the bench's URL; a scratch database's URL is base with its
	// name as the path.
	base *url.URL
	// server is a connection pool to the server naming no database, for
	// the report's version and settings and for the leftovers.
	server *sql.DB

	mu  sync.Mutex
	dbs []string // created and not dropped yet
}

func openMySQL(ctx context.Context, rawURL, run string) (*myBackend, error) {
	base, err := url.Parse(rawURL)
	if err != nil || base.Scheme != "mysql" || base.Host == "" {
		return nil, fmt.Errorf("bench: database URL %s: write it mysql://user:pass@host:port/ (the scratch databases are created on that server)", dburl.Redact(rawURL))
	}
	server, err := mysql.OpenServer(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	b := &myBackend{run: run, base: base, server: server}
	if err := b.server.PingContext(ctx); err != nil {
		b.server.Close()
		return nil, fmt.Errorf("bench: cannot reach the database %s: %w", base.Redacted(), err)
	}
	return b, nil
}

func (b *myBackend) kind() string { return "mysql" }
func (b *myBackend) close()       { b.server.Close() }

func (b *myBackend) info(ctx context.Context) (string, map[string]string) {
	version := "MySQL"
	var v string
	if err := b.server.QueryRowContext(ctx, myServerVersion).Scan(&v); err == nil {
		if strings.Contains(strings.ToLower(v), "mariadb") {
			version = "MariaDB"
		}
		version += " " + v
	}
	settings := map[string]string{"databases": b.run + "_*"}
	rows, err := b.server.QueryContext(ctx, mySettings)
	if err != nil {
		return version, settings
	}
	defer rows.Close()
	for rows.Next() {
		var name, value string
		if rows.Scan(&name, &value) == nil && slices.Contains(mySettingNames, strings.ToLower(name)) {
			settings[strings.ToLower(name)] = value
		}
	}
	return version, settings
}

// databaseURL is the URL of the scratch database name.
func (b *myBackend) databaseURL(name string) string {
	u := *b.base
	u.Path, u.RawPath = "/"+name, ""
	return u.String()
}

func (b *myBackend) newScratch(ctx context.Context, label string) (scratch, error) {
	name := b.run + "_" + label
	b.mu.Lock()
	b.dbs = append(b.dbs, name)
	b.mu.Unlock()
	s := &myScratch{b: b, db: name, url: b.databaseURL(name)}
	if _, err := mysql.CreateDatabase(ctx, s.url); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	var err error
	// The relays' store is configured as `postbox relay` configures its
	// own; producers, fills and raw drains have a pool of their own.
	if s.relayStore, err = mysql.Open(ctx, s.url, mysql.Config{}); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if s.workStore, err = mysql.Open(ctx, s.url, mysql.Config{MaxOpenConns: workPoolSize}); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if _, err := s.workStore.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("bench: migrate %s: %w", name, err)
	}
	return s, nil
}

func (b *myBackend) dropAll(ctx context.Context) error {
	b.mu.Lock()
	left := slices.Clone(b.dbs)
	b.mu.Unlock()
	var errs []error
	for _, name := range left {
		errs = append(errs, b.dropDatabase(ctx, name))
	}
	return errors.Join(errs...)
}

// dropDatabase drops the scratch database name.
func (b *myBackend) dropDatabase(ctx context.Context, name string) error {
	if err := mysql.DropDatabase(ctx, b.databaseURL(name)); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	b.mu.Lock()
	b.dbs = slices.DeleteFunc(b.dbs, func(s string) bool { return s == name })
	b.mu.Unlock()
	return nil
}

func (b *myBackend) leftovers(ctx context.Context) ([]string, error) {
	rows, err := b.server.QueryContext(ctx, myLeftovers, strings.ReplaceAll(b.run, "_", `\_`)+`\_%`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, err
		}
		names = append(names, "database "+name)
	}
	return names, rows.Err()
}

// myScratch is a scratch database.
type myScratch struct {
	b   *myBackend
	db  string
	url string
	// relayStore serves the relays that run in the bench's process;
	// workStore producers, fills and raw drains.
	relayStore *mysql.Store
	workStore  *mysql.Store
}

func (s *myScratch) name() string         { return s.db }
func (s *myScratch) outbox() store.Outbox { return s.relayStore.Driver() }

func (s *myScratch) sql(query string) string { return withTables(query, s.workStore.Table) }

func (s *myScratch) enqueue(ctx context.Context, e postbox.Event) error {
	return s.workStore.Enqueue(ctx, e)
}

// fill writes the events from..to in statements of at most 10^fillDigits
// events each.
func (s *myScratch) fill(ctx context.Context, from, to, aggregates int) error {
	const most = 100_000 // 10^fillDigits
	query := s.sql(myFill)
	for lo := from; lo <= to; lo += most {
		hi := min(lo+most-1, to)
		if _, err := s.workStore.DB().ExecContext(ctx, query, fillAggregates(aggregates), lo, hi); err != nil {
			return err
		}
	}
	return nil
}

// migrateOrdered does nothing: MySQL's migrations keep the index ordered
// claims need.
func (s *myScratch) migrateOrdered(context.Context) error { return nil }

// prepare analyzes the outbox table: InnoDB needs no vacuum, and has no
// checkpoint to ask for.
func (s *myScratch) prepare(ctx context.Context) error {
	rows, err := s.workStore.DB().QueryContext(ctx, s.sql(myAnalyze))
	if err != nil {
		return fmt.Errorf("analyze table: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	return rows.Err()
}

func (s *myScratch) rawBatch(ctx context.Context, q rawQuery) (int64, error) {
	query := myRawDelete
	if q == rawUpdate {
		query = myRawUpdate
	}
	res, err := s.workStore.DB().ExecContext(ctx, s.sql(query))
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s *myScratch) createOrders(ctx context.Context) error {
	_, err := s.workStore.DB().ExecContext(ctx, s.sql(myCreateOrders))
	return err
}

// order writes the event with EnqueueTx in both event modes: the MySQL
// store has no Transact.
func (s *myScratch) order(ctx context.Context, amount int64, mode orderMode) error {
	tx, err := s.workStore.DB().BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, s.sql(myInsertOrder), amount)
	if err != nil {
		return err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return err
	}
	if mode != orderPlain {
		if err := s.workStore.EnqueueTx(ctx, tx, orderEvent(id)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (s *myScratch) relayFlags() []string { return []string{"--db", s.url} }

// drop closes the stores and drops the database.
func (s *myScratch) drop(ctx context.Context) error {
	var errs []error
	for _, st := range []*mysql.Store{s.relayStore, s.workStore} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.b.dropDatabase(ctx, s.db))
	return errors.Join(errs...)
}
