// Package mysqltest gives tests a real MariaDB or MySQL: a fresh database,
// and a migrated store on one, dropped when the test ends.
//
// The server is TEST_MYSQL_URL, by default mysql://root@127.0.0.1:3306/,
// left with its settings as they are (nothing here sets a global
// variable). A missing server fails the test: it is never skipped.
package mysqltest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	mysqlstore "github.com/postbox-go/postbox/store/mysql"
)

// URLDefault is the server tests use when TEST_MYSQL_URL is not set.
const URLDefault = "mysql://root@127.0.0.1:3306/"

// URL returns the test server's URL (mysql://user:pass@host:port/).
func URL() string {
	if u := os.Getenv("TEST_MYSQL_URL"); u != "" {
		return u
	}
	return URLDefault
}

// Database creates a database on the test server and returns its URL,
// mysql://user:pass@host:port/name; it is dropped when t ends.
func Database(t testing.TB) string {
	t.Helper()
	server, err := url.Parse(URL())
	if err != nil || server.Scheme != "mysql" {
		t.Fatalf("mysqltest: TEST_MYSQL_URL %q: want mysql://user:pass@host:port/", URL())
	}
	cfg := mysql.NewConfig()
	cfg.User = server.User.Username()
	cfg.Passwd, _ = server.User.Password()
	cfg.Net, cfg.Addr = "tcp", server.Host
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatalf("mysqltest: %v", err)
	}
	db := sql.OpenDB(connector)
	t.Cleanup(func() { db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("mysqltest: MariaDB or MySQL is not reachable at %s (start it, or set TEST_MYSQL_URL): %v", server.Redacted(), err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "pbtest_" + hex.EncodeToString(b)
	if _, err := db.ExecContext(ctx, "create database "+name+" character set utf8mb4 collate utf8mb4_bin"); err != nil {
		t.Fatalf("mysqltest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "drop database if exists "+name); err != nil {
			t.Errorf("mysqltest: drop database %s: %v", name, err)
		}
	})
	u := *server
	u.Path = "/" + name
	return u.String()
}

// Store returns a migrated store on a fresh database, closed and dropped
// when t ends.
func Store(t testing.TB) *mysqlstore.Store {
	t.Helper()
	return StoreWith(t, mysqlstore.Config{})
}

// StoreWith is Store with cfg (a table prefix, ...).
func StoreWith(t testing.TB, cfg mysqlstore.Config) *mysqlstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mysqlstore.Open(ctx, Database(t), cfg)
	if err != nil {
		t.Fatalf("mysqltest: open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("mysqltest: migrate: %v", err)
	}
	return s
}
