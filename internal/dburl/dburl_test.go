package dburl_test

import (
	"context"
	"errors"
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
		"postgres://app:s3cr@t@db:5432/x":                 "postgres://app:xxxxx@db:5432/x",
		"postgres://app@db/x?password=hunter2&sslmode=no": "postgres://app@db/x?password=xxxxx&sslmode=no",
		"postgres://db/x":                                 "postgres://db/x",
		"sqlite:/tmp/x.db":                                "sqlite:/tmp/x.db",
	} {
		got := dburl.Redact(in)
		if strings.Contains(got, "s3cr") || strings.Contains(got, "hunter2") || got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}
