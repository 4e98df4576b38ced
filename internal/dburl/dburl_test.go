package dburl_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/internal/dburl"
	"github.com/postbox-go/postbox/internal/pgtest"
)

func TestOpenEachKind(t *testing.T) {
	ctx := context.Background()
	pg, err := dburl.Open(ctx, pgtest.URL(), dburl.Options{Schema: "dburl_test_unused", ApplicationName: "dburl test"})
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	if pg.Postgres == nil || pg.SQLite != nil || pg.Outbox != pg.Postgres {
		t.Fatalf("postgres URL opened %+v", pg)
	}
	var app string
	if err := pg.Postgres.Pool().QueryRow(ctx, "select current_setting('application_name')").Scan(&app); err != nil || app != "dburl test" {
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
	if lite.SQLite == nil || lite.Postgres != nil || lite.Outbox != lite.SQLite {
		t.Fatalf("sqlite URL opened %+v", lite)
	}
}

func TestUnknownSchemeIsRedacted(t *testing.T) {
	_, err := dburl.Open(context.Background(), "mysql://app:hunter2@db/x", dburl.Options{})
	if !errors.Is(err, dburl.ErrUnknownScheme) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("unknown scheme: %v", err)
	}
}

func TestRedactHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cr@t@db:5432/x":                                          "postgres://app:xxxxx@db:5432/x",
		"postgres://app@db/x?password=hunter2&sslmode=no":                          "postgres://app@db/x?password=xxxxx&sslmode=no",
		"postgres://app@db/x?sslpassword=hunter2":                                  "postgres://app@db/x?sslpassword=xxxxx",
		"postgres://app:hunter2@db/x?sslmode=verify-full&sslrootcert=/missing.pem": "postgres://app:xxxxx@db/x?sslmode=verify-full&sslrootcert=/missing.pem",
		"postgres://db/x":                                      "postgres://db/x",
		"postgres://app:12/s3cr@db/x":                          "postgres://app:xxxxx@db/x",
		"postgres://app:12?s3cr@db/x":                          "postgres://app:xxxxx@db/x",
		"postgres://app:hun%zzter2@db/x":                       "postgres:(unparsable URL)",
		"sqlite:/tmp/x.db":                                     "sqlite:/tmp/x.db",
		"host=db user=app password=hunter2 dbname=x":           "host=db user=app password=xxxxx dbname=x",
		"host=db password='hunter2 s3cr' dbname=x":             "host=db password=xxxxx dbname=x",
		"host=db password = 'it\\'s s3cr' sslpassword=hunter2": "host=db password = xxxxx sslpassword=xxxxx",
	} {
		got := dburl.Redact(in)
		if strings.Contains(got, "s3cr") || strings.Contains(got, "hunter2") || got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// Scrub takes every form of the URL's passwords out of an error's text
// and keeps the error's chain.
func TestScrubHidesPasswordsInErrors(t *testing.T) {
	for dsn, pw := range map[string]string{
		"postgres://app:p%40ss@db/x":                "p@ss",
		"postgres://app:p%40ss@db/x?password=other": "other",
		"postgres://app:broken%zz@db/x":             "broken%zz",
		"host=db password='a b'":                    "a b",
	} {
		err := dburl.Scrub(fmt.Errorf("connect %s: %w", pw, os.ErrNotExist), dsn)
		if strings.Contains(err.Error(), pw) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Scrub(%q): %v (is ErrNotExist: %v)", dsn, err, errors.Is(err, os.ErrNotExist))
		}
	}
	if dburl.Scrub(nil, "postgres://a:b@c/d") != nil {
		t.Error("Scrub(nil) is not nil")
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
