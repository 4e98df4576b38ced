package demo_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/cmd/postbox/internal/demo"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

func checkReport(t *testing.T, rep demo.Report, events int, out string) {
	t.Helper()
	if rep.Created != int64(events) || rep.AppliedOnce != int64(events) || rep.Lost != 0 || rep.AppliedTwice != 0 || !rep.OK() {
		t.Fatalf("reconciliation %+v, want %d created and applied exactly once\n%s", rep, events, out)
	}
	if rep.Duplicates == 0 {
		t.Fatalf("no duplicate absorbed: the faults (duplicated deliveries, answers lost after the effect, the relay crash) did not happen\n%s", out)
	}
	if !strings.Contains(out, "created") || !strings.Contains(out, "duplicates absorbed") {
		t.Fatalf("no progress lines:\n%s", out)
	}
}

func TestDemoOnSQLite(t *testing.T) {
	var out bytes.Buffer
	rep, err := demo.Run(context.Background(), demo.Config{
		DB: "sqlite:" + filepath.Join(t.TempDir(), "demo.db"), Events: 300, FaultRate: 0.2, Rate: 3000, Out: &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	checkReport(t, rep, 300, out.String())
}

// The demo on PostgreSQL drops its schema at the end of a successful run.
func TestDemoOnPostgres(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var out bytes.Buffer
	rep, err := demo.Run(context.Background(), demo.Config{
		DB: pgtest.URL(), Schema: schema, Events: 300, FaultRate: 0.2, Rate: 3000, Out: &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	checkReport(t, rep, 300, out.String())
	if schemaExists(t, pool, schema) {
		t.Fatalf("the demo left its schema %s behind", schema)
	}
}

// Config.Keep keeps the schema, and the run says so.
func TestDemoOnPostgresKeep(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var out bytes.Buffer
	_, err := demo.Run(context.Background(), demo.Config{
		DB: pgtest.URL(), Schema: schema, Events: 20, FaultRate: -1, Rate: 3000, Keep: true, Out: &out,
	})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if !schemaExists(t, pool, schema) || !strings.Contains(out.String(), "kept") {
		t.Fatalf("Keep: schema %s exists %v, output:\n%s", schema, schemaExists(t, pool, schema), out.String())
	}
}

func schemaExists(t *testing.T, pool *pgxpool.Pool, schema string) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), "select count(*) from pg_namespace where nspname = $1", schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestDemoRefusesAnExistingSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	if _, err := demo.Run(context.Background(), demo.Config{DB: "sqlite:" + path, Events: 5, Rate: 1000, Out: &bytes.Buffer{}}); err != nil {
		t.Fatal(err)
	}
	_, err := demo.Run(context.Background(), demo.Config{DB: "sqlite:" + path, Events: 5, Out: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "new file") {
		t.Fatalf("second run on the same file: %v, want a refusal", err)
	}
}
