// Package pgtest gives tests a real PostgreSQL: a connection pool and a
// fresh, migrated schema that is dropped when the test ends.
//
// The server is TEST_DATABASE_URL, by default
// postgres://postgres@127.0.0.1:5432/postgres, left with its settings as
// they are. The tests of WAL mode, which needs wal_level = logical, use a
// throwaway cluster of the test binary's own instead (LogicalURL), started
// from the installed PostgreSQL binaries. A missing server or missing
// binaries fail the test: it is never skipped.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store/postgres"
)

// URLDefault is the server tests use when TEST_DATABASE_URL is not set.
const URLDefault = "postgres://postgres@127.0.0.1:5432/postgres"

// URL returns the test server's connection string.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return URLDefault
}

// Pool connects to the test server; the pool is closed when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return PoolAt(t, URL())
}

// PoolAt connects to the server at url (the test server, or a throwaway
// cluster's: LogicalURL); the pool is closed when t ends.
func PoolAt(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", url, err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("pgtest: PostgreSQL is not reachable at %s (start it, or set TEST_DATABASE_URL): %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Schema returns a new unique schema name, dropped with its tables when t
// ends.
func Schema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "pbtest_" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "drop schema if exists "+pgx.Identifier{name}.Sanitize()+" cascade"); err != nil {
			t.Logf("pgtest: drop schema %s: %v", name, err)
		}
	})
	return name
}

// Store returns a migrated store in a fresh schema.
func Store(t testing.TB) *postgres.Store {
	t.Helper()
	return StoreIn(t, Pool(t))
}

// LogicalStore returns a migrated store in a fresh schema of the test
// binary's cluster with wal_level = logical (LogicalURL), for the tests of
// WAL mode.
func LogicalStore(t testing.TB) *postgres.Store {
	t.Helper()
	return StoreIn(t, PoolAt(t, LogicalURL(t)))
}

// StoreIn returns a migrated store in a fresh schema of pool's database.
func StoreIn(t testing.TB, pool *pgxpool.Pool) *postgres.Store {
	t.Helper()
	s, err := postgres.New(pool, postgres.Config{Schema: Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	return s
}

// OrderedStore returns a migrated store in a fresh schema with the index of
// ordered claims (Store.MigrateOrdered), for tests that claim in ordered
// mode.
func OrderedStore(t testing.TB) *postgres.Store {
	t.Helper()
	s := Store(t)
	if err := s.MigrateOrdered(context.Background()); err != nil {
		t.Fatalf("pgtest: migrate ordered: %v", err)
	}
	return s
}

// DropBounds drops the check constraints with which migration 0008 bounds
// outbox_events' retries and times, so that a test can write the values a
// table of an older schema (or one whose bounds were dropped by hand) may
// hold: every read and claim must still take them.
func DropBounds(t testing.TB, s *postgres.Store) {
	t.Helper()
	if _, err := s.Pool().Exec(context.Background(), "alter table "+s.Table("outbox_events")+
		" drop constraint outbox_events_retries_range, drop constraint outbox_events_times_range"); err != nil {
		t.Fatalf("pgtest: drop the bounds of migration 0008: %v", err)
	}
}

// Database creates a database on the test server and returns its URL; it
// is dropped (with force) when t ends.
func Database(t testing.TB) string {
	t.Helper()
	return DatabaseAt(t, URL())
}

// DatabaseAt creates a database on the server of the URL server and
// returns its URL; it is dropped (with force) when t ends.
func DatabaseAt(t testing.TB, server string) string {
	t.Helper()
	pool := PoolAt(t, server)
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "pbtest_" + hex.EncodeToString(b)
	if _, err := pool.Exec(context.Background(), "create database "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "drop database if exists "+pgx.Identifier{name}.Sanitize()+" with (force)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
