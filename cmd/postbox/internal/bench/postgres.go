package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// relayAppName is the application_name of the connections of the relays
// that run in the bench's process.
const relayAppName = "postbox-bench-relay"

// workPoolSize bounds the connections of producers and clients.
const workPoolSize = 64

// pgSettingNames are the server settings the report shows.
var pgSettingNames = []string{"autovacuum", "fsync", "max_connections", "shared_buffers", "synchronous_commit", "wal_level"}

// pgBackend runs the scenarios on a PostgreSQL server.
type pgBackend struct {
	run string
	// url is the database URL the bench was given.
	url string
	// processURL is the URL given to `postbox relay` processes: the
	// bench's, with the application_name processAppName, which finds
	// their server processes for the idle CPU measure.
	processURL string
	// relayPool serves the relays that run in the bench's process. It is
	// configured as `postbox relay` configures its own (the URL's
	// settings), plus an application_name.
	relayPool *pgxpool.Pool
	// workPool serves producers, clients, fills and raw drains.
	workPool *pgxpool.Pool

	mu      sync.Mutex
	schemas []string // created and not dropped yet
	// databases are the scratch databases created and not dropped yet
	// (the sources scenario's).
	databases []string
}

func openPostgres(ctx context.Context, dbURL, run string) (*pgBackend, error) {
	relayCfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, fmt.Errorf("bench: database URL: %w", err)
	}
	relayCfg.ConnConfig.RuntimeParams["application_name"] = relayAppName
	workCfg := relayCfg.Copy()
	workCfg.ConnConfig.RuntimeParams["application_name"] = "postbox-bench"
	workCfg.MaxConns = workPoolSize
	processURL, err := withAppName(dbURL, processAppName(run))
	if err != nil {
		return nil, fmt.Errorf("bench: database URL: %w", err)
	}
	b := &pgBackend{run: run, url: dbURL, processURL: processURL}
	if b.relayPool, err = pgxpool.NewWithConfig(ctx, relayCfg); err != nil {
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	if b.workPool, err = pgxpool.NewWithConfig(ctx, workCfg); err != nil {
		b.relayPool.Close()
		return nil, fmt.Errorf("bench: connect: %w", err)
	}
	for _, pool := range []*pgxpool.Pool{b.workPool, b.relayPool} {
		if err := pool.Ping(ctx); err != nil {
			b.close()
			return nil, fmt.Errorf("bench: cannot reach the database: %w", err)
		}
	}
	return b, nil
}

// processAppName is the application_name of the connections of the
// `postbox relay` processes of the run named run.
func processAppName(run string) string { return run + "_relay" }

// withAppName is the postgres:// URL rawURL with its application_name
// parameter set to name.
func withAppName(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("application_name", name)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func (b *pgBackend) kind() string { return "postgres" }

func (b *pgBackend) close() {
	b.relayPool.Close()
	b.workPool.Close()
}

func (b *pgBackend) info(ctx context.Context) (string, map[string]string) {
	version := "PostgreSQL"
	var v string
	if err := b.workPool.QueryRow(ctx, pgServerVersion).Scan(&v); err == nil {
		version += " " + v
	}
	settings := map[string]string{}
	rows, err := b.workPool.Query(ctx, pgSettings, pgSettingNames)
	if err == nil {
		var name, value string
		_, _ = pgx.ForEachRow(rows, []any{&name, &value}, func() error {
			settings[name] = value
			return nil
		})
	}
	return version, settings
}

func (b *pgBackend) newScratch(ctx context.Context, label string) (scratch, error) {
	schema := b.run + "_" + label
	b.mu.Lock()
	b.schemas = append(b.schemas, schema)
	b.mu.Unlock()
	relayStore, err := postgres.New(b.relayPool, postgres.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	workStore, err := postgres.New(b.workPool, postgres.Config{Schema: schema})
	if err != nil {
		return nil, err
	}
	if _, err := workStore.Migrate(ctx); err != nil {
		return nil, fmt.Errorf("bench: migrate %s: %w", schema, err)
	}
	return &pgScratch{b: b, schema: schema, relayStore: relayStore, workStore: workStore}, nil
}

func (b *pgBackend) dropAll(ctx context.Context) error {
	b.mu.Lock()
	left := slices.Clone(b.schemas)
	dbs := slices.Clone(b.databases)
	b.mu.Unlock()
	var errs []error
	for _, schema := range left {
		errs = append(errs, b.dropSchema(ctx, schema))
	}
	for _, db := range dbs {
		errs = append(errs, b.dropDatabase(ctx, db))
	}
	return errors.Join(errs...)
}

// createDatabase creates the scratch database <run>_<label> on the server
// and returns its name; dropAll drops it.
func (b *pgBackend) createDatabase(ctx context.Context, label string) (string, error) {
	name := b.run + "_" + label
	b.mu.Lock()
	b.databases = append(b.databases, name)
	b.mu.Unlock()
	if _, err := b.workPool.Exec(ctx, "create database "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("bench: create database %s: %w", name, err)
	}
	return name, nil
}

// dropDatabase drops the scratch database name, ending the sessions still
// in it, even when it refuses connections.
func (b *pgBackend) dropDatabase(ctx context.Context, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	if _, err := b.workPool.Exec(ctx, "drop database if exists "+id+" with (force)"); err != nil {
		return fmt.Errorf("bench: drop database %s: %w", name, err)
	}
	b.mu.Lock()
	b.databases = slices.DeleteFunc(b.databases, func(s string) bool { return s == name })
	b.mu.Unlock()
	return nil
}

// databaseURL is the bench's URL with the database name instead of its
// own, and, unless appName is empty, the application_name appName.
func (b *pgBackend) databaseURL(name, appName string) (string, error) {
	u, err := url.Parse(b.url)
	if err != nil {
		return "", err
	}
	if u.Scheme == "" || u.Opaque != "" {
		return "", fmt.Errorf("bench: database URL: the sources scenario needs a postgres:// URL")
	}
	u.Path = "/" + name
	u.RawPath = ""
	if appName != "" {
		q := u.Query()
		q.Set("application_name", appName)
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

func (b *pgBackend) dropSchema(ctx context.Context, schema string) error {
	// The slot and the publication of WAL mode, if a scenario made them:
	// they outlive the schema, and a slot left behind keeps the server's
	// WAL from being recycled.
	st, err := postgres.New(b.workPool, postgres.Config{Schema: schema})
	if err != nil {
		return err
	}
	w, err := st.WAL(postgres.WALConfig{})
	if err != nil {
		return err
	}
	if err := dropSlot(ctx, w); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if _, err := b.workPool.Exec(ctx, strings.ReplaceAll(pgDropSchema, "{schema}", pgx.Identifier{schema}.Sanitize())); err != nil {
		return fmt.Errorf("bench: drop schema %s: %w", schema, err)
	}
	b.mu.Lock()
	b.schemas = slices.DeleteFunc(b.schemas, func(s string) bool { return s == schema })
	b.mu.Unlock()
	return nil
}

// slotReleaseTimeout bounds the wait for a stopped relay's walsender to
// let its slot go.
const slotReleaseTimeout = 10 * time.Second

// dropSlot drops w's slot and publication once no walsender holds the slot
// (that of a relay just stopped ends a moment after the relay).
func dropSlot(ctx context.Context, w *postgres.WAL) error {
	deadline := time.Now().Add(slotReleaseTimeout)
	for {
		err := w.Drop(ctx)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" || time.Now().After(deadline) { // object_in_use
			return err
		}
		if !sleep(ctx, 20*time.Millisecond) {
			return err
		}
	}
}

func (b *pgBackend) leftovers(ctx context.Context) ([]string, error) {
	rows, err := b.workPool.Query(ctx, pgLeftovers, strings.ReplaceAll(b.run, "_", `\_`)+`\_%`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// pgScratch is a scratch schema.
type pgScratch struct {
	b          *pgBackend
	schema     string
	relayStore *postgres.Store
	workStore  *postgres.Store
}

func (s *pgScratch) name() string         { return s.schema }
func (s *pgScratch) outbox() store.Outbox { return s.relayStore.Driver() }

func (s *pgScratch) sql(query string) string { return withTables(query, s.workStore.Table) }

func (s *pgScratch) enqueue(ctx context.Context, e postbox.Event) error {
	return s.workStore.Enqueue(ctx, e)
}

func (s *pgScratch) fill(ctx context.Context, from, to, aggregates int) error {
	_, err := s.b.workPool.Exec(ctx, s.sql(pgFill), from, to, fillAggregates(aggregates))
	return err
}

func (s *pgScratch) migrateOrdered(ctx context.Context) error {
	if err := s.workStore.MigrateOrdered(ctx); err != nil {
		return fmt.Errorf("bench: migrate %s for ordered claims: %w", s.schema, err)
	}
	return nil
}

func (s *pgScratch) prepare(ctx context.Context) error {
	rows, err := s.b.workPool.Query(ctx, pgSchemaTables, s.schema)
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		q := strings.ReplaceAll(pgVacuumAnalyze, "{table}", pgx.Identifier{s.schema, t}.Sanitize())
		if _, err := s.b.workPool.Exec(ctx, q); err != nil {
			return fmt.Errorf("vacuum analyze %s: %w", t, err)
		}
	}
	if _, err := s.b.workPool.Exec(ctx, pgCheckpoint); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
			return nil
		}
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func (s *pgScratch) rawBatch(ctx context.Context, q rawQuery) (int64, error) {
	query := pgRawDelete
	if q == rawUpdate {
		query = pgRawUpdate
	}
	tag, err := s.b.workPool.Exec(ctx, s.sql(query))
	return tag.RowsAffected(), err
}

func (s *pgScratch) createOrders(ctx context.Context) error {
	_, err := s.b.workPool.Exec(ctx, s.sql(pgCreateOrders))
	return err
}

func (s *pgScratch) order(ctx context.Context, amount int64, mode orderMode) error {
	insert := s.sql(pgInsertOrder)
	if mode == orderTransact {
		return s.workStore.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
			var id int64
			if err := tx.QueryRow(ctx, insert, amount).Scan(&id); err != nil {
				return err
			}
			return out.Add(orderEvent(id))
		})
	}
	return pgx.BeginFunc(ctx, s.b.workPool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, insert, amount).Scan(&id); err != nil {
			return err
		}
		if mode == orderPlain {
			return nil
		}
		return s.workStore.EnqueueTx(ctx, tx, orderEvent(id))
	})
}

// walMode makes the outbox ready for WAL mode as `postbox migrate --wal`
// does (SetProducerNotify: producers' commits skip the notify trigger), and
// returns the stream of a relay in this process (its slot and publication
// are named after the schema, as `postbox relay --wal` names them; they are
// dropped with the schema).
func (s *pgScratch) walMode(ctx context.Context) (*postgres.WAL, error) {
	if err := s.workStore.SetProducerNotify(ctx, false); err != nil {
		return nil, err
	}
	return s.relayStore.WAL(postgres.WALConfig{})
}

func (s *pgScratch) relayFlags() []string {
	return []string{"--db", s.b.processURL, "--schema", s.schema}
}

func (s *pgScratch) drop(ctx context.Context) error { return s.b.dropSchema(ctx, s.schema) }

// processBackendPIDs are the server processes of the connections of the
// run's `postbox relay` processes.
func (b *pgBackend) processBackendPIDs(ctx context.Context) ([]int, error) {
	return b.backendPIDs(ctx, processAppName(b.run))
}

// backendPIDs are the server processes of the connections opened under the
// application_name name.
func (b *pgBackend) backendPIDs(ctx context.Context, name string) ([]int, error) {
	rows, err := b.workPool.Query(ctx, pgBackendPIDs, name)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

// partitionIntervalDefault is the partitions' interval of `postbox migrate
// --partitioned`: a day.
const partitionIntervalDefault = 24 * time.Hour

// newLayoutScratch returns a new scratch outbox laid out as l; a
// partitioned one is made as `postbox migrate --partitioned` makes it
// (Migrate, then Partition), with partitions of interval (zero:
// partitionIntervalDefault).
func (b *pgBackend) newLayoutScratch(ctx context.Context, label string, l outboxLayout, interval time.Duration) (*pgScratch, error) {
	sc, err := b.newScratch(ctx, label)
	if err != nil {
		return nil, err
	}
	pg := sc.(*pgScratch)
	if l == layoutPartitioned {
		if interval == 0 {
			interval = partitionIntervalDefault
		}
		if _, err := pg.workStore.Partition(ctx, postgres.PartitionParams{Interval: interval}); err != nil {
			return nil, fmt.Errorf("bench: partition %s: %w", pg.schema, err)
		}
	}
	return pg, nil
}
