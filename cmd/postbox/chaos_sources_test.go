package main_test

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// A short chaos run over three sources, in two scratch databases, drained
// by relay processes running postbox relay --sources: one source's database
// is cut off (source-outage) while the others keep delivering, a relay
// process is killed (under its alias relay-kill), and every event of every
// source is applied exactly once, in order per aggregate.
func TestChaosSources(t *testing.T) {
	var out bytes.Buffer
	cmd := command("chaos", "--db", pgtest.URL(), "--sources", "3", "--duration", "12s", "--events-per-second", "150",
		"--ordered", "--faults", "source-outage,relay-kill")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("postbox chaos --sources 3: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^OK: every event of every source \(3\) applied exactly once, in order per aggregate$`),
		regexp.MustCompile(`(?m)^source-outage at [0-9.]+s for [0-9.]+s \(source-0, database postbox_chaos_\w+_victim\): the other sources produced [1-9][0-9]* events during it, applied \d+ \(\d+ before it ended, \d+ within 5s of their production, the slowest after [0-9.]+s, produced at [0-9.]+s\): OK$`),
		regexp.MustCompile(`(?m)^\s+source-0 \(source-outage\)\s+postbox_chaos_\w+_victim\s.*\sOK$`),
		regexp.MustCompile(`(?m)^\s+source-2\s+postbox_chaos_\w+_others\s.*\sOK$`),
		regexp.MustCompile(`(?m)^\s+kill\s+1\s`),
		regexp.MustCompile(`relay --sources`),
	} {
		if !want.MatchString(text) {
			t.Errorf("the report has no line matching %s:\n%s", want, text)
		}
	}
	// The scratch databases are dropped after a run that passed.
	name := regexp.MustCompile(`postbox_chaos_(\w+)_victim`).FindStringSubmatch(text)
	if name == nil {
		return
	}
	conn, err := pgx.Connect(context.Background(), pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(context.Background(), `select count(*) from pg_database where datname like $1`,
		"postbox_chaos_"+name[1]+"_%").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d scratch databases of the run left (%v), want none", left, err)
	}
}

// source-outage is a fault of runs over many sources, and --sources wants
// at least two of them, and neither endpoints mode nor a partitioned outbox
// yet: usage errors (exit status 2) that name what is wrong.
func TestChaosSourcesUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--faults", "source-outage"}, "source-outage needs --sources"},
		{[]string{"--faults", "kill,source-outage"}, "source-outage needs --sources"},
		{[]string{"--sources", "1"}, "--sources 1"},
		{[]string{"--sources", "3", "--endpoints", "2"}, "--endpoints"},
		{[]string{"--sources", "3", "--partitioned"}, "--partitioned"},
	} {
		out, err := command(append([]string{"chaos", "--db", pgtest.URL()}, c.args...)...).CombinedOutput()
		if code := exitCodeOf(err); code != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("postbox chaos %v: exit code %d, %q; want 2 and %q", c.args, code, out, c.want)
		}
	}
}
