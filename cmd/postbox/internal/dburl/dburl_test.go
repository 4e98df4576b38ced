package dburl_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

func TestOpenEachKind(t *testing.T) {
	ctx := context.Background()
	pg, err := dburl.Open(ctx, pgtest.URL(), dburl.Options{Schema: "dburl_test_unused", ApplicationName: "dburl test"})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	p, isPG := pg.Postgres()
	if _, isLite := pg.SQLite(); !isPG || isLite {
		t.Fatalf("postgres URL opened %+v", pg)
	}
	// The contracts are the store's driver (the console's, the store
	// itself), never a wrapper that could hide a capability.
	for _, c := range []any{pg.Outbox, pg.Endpoints, pg.Presence} {
		if d, ok := c.(*postgres.Driver); !ok || d.Store != p {
			t.Fatalf("postgres URL: %T is not the store's driver", c)
		}
	}
	if pg.Console != console.Store(p) {
		t.Fatalf("postgres URL: console %T is not the store", pg.Console)
	}
	var app string
	if err := p.Pool().QueryRow(ctx, "select current_setting('application_name')").Scan(&app); err != nil || app != "dburl test" {
		t.Fatalf("application_name %q, %v", app, err)
	}

	path := filepath.Join(t.TempDir(), "x.db")
	if _, err := dburl.Open(ctx, "sqlite:"+path, dburl.Options{MustExist: true}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("MustExist on a missing file: %v", err)
	}
	lite, err := dburl.Open(ctx, "sqlite://"+path, dburl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	l, isLite := lite.SQLite()
	if _, isPG := lite.Postgres(); !isLite || isPG {
		t.Fatalf("sqlite URL opened %+v", lite)
	}
	for _, c := range []any{lite.Outbox, lite.Endpoints, lite.Presence} {
		if d, ok := c.(*sqlite.Driver); !ok || d.Store != l {
			t.Fatalf("sqlite URL: %T is not the store's driver", c)
		}
	}
	if lite.Console != console.Store(l) {
		t.Fatalf("sqlite URL: console %T is not the store", lite.Console)
	}
}

func TestUnknownSchemeIsRedacted(t *testing.T) {
	_, err := dburl.Open(context.Background(), "oracle://app:hunter2@db/x", dburl.Options{})
	if !errors.Is(err, dburl.ErrUnknownScheme) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("unknown scheme: %v", err)
	}
}

// A mysql:// URL opens the MariaDB/MySQL store; a server that does not
// answer is an error that names it without the password, whether the
// database would be created or must exist.
func TestMySQLUnreachableIsRedacted(t *testing.T) {
	for _, mustExist := range []bool{false, true} {
		_, err := dburl.Open(context.Background(), "mysql://app:hunter2@127.0.0.1:1/x", dburl.Options{MustExist: mustExist})
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("MustExist %v: %v, want an error naming the server without the password", mustExist, err)
		}
	}
}

// A sqlite:PATH holds no password: it is printed as it is (the rest of
// the redaction is internal/redact's, tested there).
func TestRedactLeavesSQLitePaths(t *testing.T) {
	if got := dburl.Redact("sqlite:/tmp/x.db"); got != "sqlite:/tmp/x.db" {
		t.Errorf("Redact(sqlite:/tmp/x.db) = %q", got)
	}
	if got := dburl.Redact("postgres://app:hunter2@db/x"); got != "postgres://app:xxxxx@db/x" {
		t.Errorf("Redact of a PostgreSQL URL = %q, want its password hidden", got)
	}
}

// Open's errors on every path a password-bearing URL can take never hold
// the password: a missing TLS file, an unreachable host, a database that
// does not exist, a bad schema name, a keyword/value DSN.
func TestOpenErrorsHideThePassword(t *testing.T) {
	const pw = "Pw-s3cret-7d1"
	host := "127.0.0.1:5432"
	if u, err := url.Parse(pgtest.URL()); err == nil {
		host = u.Host
	}
	for _, c := range []struct{ dsn, schema string }{
		{"postgres://u:" + pw + "@" + host + "/postgres?sslmode=verify-full&sslrootcert=/missing.pem", ""},
		{"postgres://u:" + pw + "@127.0.0.1:1/postgres?connect_timeout=5", ""},
		{"postgres://postgres:" + pw + "@" + host + "/no_such_db_pbtest", ""},
		{"postgres://postgres:" + pw + "@" + host + "/postgres", "bad-schema"},
		{"postgres://postgres@" + host + "/postgres?password=" + pw + "&sslmode=verify-full&sslrootcert=/missing.pem", ""},
		{"host=127.0.0.1 port=1 user=u password=" + pw + " dbname=x", ""},
		{"postgres://u:" + pw + "@" + host + "/postgres?sslmode=bogus", ""},
	} {
		s, err := dburl.Open(context.Background(), c.dsn, dburl.Options{Schema: c.schema, MustExist: true})
		if err == nil {
			s.Close()
			t.Errorf("Open(%s) succeeded", dburl.Redact(c.dsn))
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("Open(%s): the error holds the password: %v", dburl.Redact(c.dsn), err)
		}
	}
}

// The stores of two schemas of one database share one pool, which closes
// with the last of them; an unreachable database fails alone, its
// password never in the error.
func TestPoolsShareOnePoolPerDatabase(t *testing.T) {
	ctx := context.Background()
	pools := dburl.NewPools(dburl.Options{ApplicationName: "dburl pools test"}, 3)
	a, err := pools.Open(ctx, pgtest.URL(), "pools_test_a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := pools.Open(ctx, pgtest.URL(), "pools_test_b")
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := a.Postgres()
	pb, _ := b.Postgres()
	if pa.Pool() != pb.Pool() || pa.Schema() == pb.Schema() {
		t.Fatalf("two schemas of one database: pools %p, %p; schemas %s, %s", pa.Pool(), pb.Pool(), pa.Schema(), pb.Schema())
	}
	if got := pa.Pool().Config().MaxConns; got != 3 {
		t.Errorf("pool of %d connections, want 3", got)
	}
	if pools.Databases() != 1 {
		t.Errorf("%d pools open, want 1", pools.Databases())
	}
	_, err = pools.Open(ctx, "postgres://postgres:pools-s3cret@127.0.0.1:1/postgres", "x")
	if err == nil || strings.Contains(err.Error(), "pools-s3cret") {
		t.Fatalf("an unreachable database: %v", err)
	}
	a.Close()
	a.Close() // twice is once
	if err := pb.Pool().Ping(ctx); err != nil {
		t.Fatalf("the pool closed with one of its two stores: %v", err)
	}
	b.Close()
	if pools.Databases() != 0 {
		t.Errorf("%d pools open after every store closed", pools.Databases())
	}
	if err := pb.Pool().Ping(ctx); err == nil {
		t.Error("the pool is still open after its last store closed")
	}
}
