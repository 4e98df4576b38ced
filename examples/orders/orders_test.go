package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseConfig(t *testing.T) {
	cfg, err := parseConfig([]string{"--db", "postgres://flag"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if want := (config{DB: "postgres://flag", Schema: "public", Rate: 10, Count: 0}); cfg != want {
		t.Errorf("defaults: %+v, want %+v", cfg, want)
	}

	cfg, err = parseConfig(nil, env(map[string]string{"DB_DSN": "postgres://env"}), io.Discard)
	if err != nil || cfg.DB != "postgres://env" {
		t.Errorf("DB_DSN: %+v, %v", cfg, err)
	}
	cfg, err = parseConfig([]string{"--db", "postgres://flag", "--rate", "2.5", "--count", "7", "--schema", "shop"},
		env(map[string]string{"DB_DSN": "postgres://env"}), io.Discard)
	if want := (config{DB: "postgres://flag", Schema: "shop", Rate: 2.5, Count: 7}); err != nil || cfg != want {
		t.Errorf("flags over the environment: %+v, %v; want %+v", cfg, err, want)
	}

	for _, args := range [][]string{
		{},
		{"--db", "postgres://x", "--rate", "0"},
		{"--db", "postgres://x", "--rate", "-3"},
		{"--db", "postgres://x", "--rate", "NaN"},
		{"--db", "postgres://x", "--count", "-1"},
		{"--db", "postgres://x", "extra"},
		{"--db", "postgres://x", "--nope"},
	} {
		if _, err := parseConfig(args, env(nil), io.Discard); err == nil {
			t.Errorf("parseConfig(%q) succeeded", args)
		}
	}

	var usage bytes.Buffer
	_, err = parseConfig([]string{"-h"}, env(map[string]string{"DB_DSN": "postgres://u:hunter2@db/x"}), &usage)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	if !strings.Contains(usage.String(), "--rate") || strings.Contains(usage.String(), "hunter2") {
		t.Errorf("usage text:\n%s", usage.String())
	}
}

// The whole command against PostgreSQL: it creates its table, writes the
// orders with their events, and prints a line a second.
func TestRunCreatesOrdersAndPrintsProgress(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	var out bytes.Buffer
	// 30 orders at 25/s take 1.16s: one progress line.
	if err := run(context.Background(), config{DB: pgtest.URL(), Schema: schema, Rate: 25, Count: 30}, &out); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^1s created \d+ orders \(\d+ in total\)$`).Match(out.Bytes()) ||
		!strings.HasSuffix(out.String(), "\n30 orders created\n") {
		t.Errorf("output:\n%s", out.String())
	}
	var orders, events int
	err := pool.QueryRow(context.Background(), "select (select count(*) from "+schema+".orders), (select count(*) from "+
		schema+".outbox_events where event_type = 'order.created')").Scan(&orders, &events)
	if err != nil {
		t.Fatal(err)
	}
	if orders != 30 || events != 30 {
		t.Fatalf("%d orders and %d events, want 30 of each", orders, events)
	}
}

func TestRunReportsAnUnreachableDatabase(t *testing.T) {
	err := run(context.Background(), config{DB: "postgres://postgres@127.0.0.1:1/postgres?connect_timeout=2", Schema: "public", Rate: 1, Count: 1}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the database") {
		t.Fatalf("run: %v", err)
	}
}
