package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store/postgres"
)

// source is one outbox of the tests of --sources: a schema migrated by
// the command, in a database.
type source struct {
	name, url, schema string
	store             *postgres.Store
}

// newSource migrates a fresh schema in the database of url.
func newSource(t *testing.T, name, url string) source {
	t.Helper()
	pool := pgtest.PoolAt(t, url)
	schema := pgtest.Schema(t, pool)
	runOK(t, "migrate", "--db", url, "--schema", schema)
	s, err := postgres.New(pool, postgres.Config{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	return source{name: name, url: url, schema: schema, store: s}
}

func (s source) yaml() string {
	return fmt.Sprintf("  - name: %s\n    db: %s\n    schema: %s\n", s.name, s.url, s.schema)
}

// writeSources writes the sources file the relay re-reads.
func writeSources(t *testing.T, path string, extra string, srcs ...source) {
	t.Helper()
	var b strings.Builder
	b.WriteString("sources:\n")
	for _, s := range srcs {
		b.WriteString(s.yaml())
	}
	b.WriteString(extra)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// The shipped relay over a sources file: sources in two databases deliver
// events written by plain SQL, listening (the poll is an hour); a source
// whose database refuses connections and one not migrated fail alone, each
// logged once; a source added to the file is picked up and a source
// removed is stopped, without a restart; the process takes one pool per
// database, not one per source.
func TestShippedRelayOverSources(t *testing.T) {
	second := pgtest.Database(t)
	a := newSource(t, "a", pgtest.URL())
	b := newSource(t, "b", pgtest.URL())
	c := newSource(t, "c", second)
	d := newSource(t, "d", second)
	unmigrated := "  - name: unmigrated\n    db: " + pgtest.URL() + "\n    schema: pbtest_never_migrated\n"
	refused := "  - name: refused\n    db: postgres://postgres:s3cr3t-pw@127.0.0.1:1/postgres\n"
	file := filepath.Join(t.TempDir(), "sources.yaml")
	writeSources(t, file, unmigrated+refused, a, b, c)

	rcv := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, "--sources", file, "--sources-every", "200ms", "--poll", "1h",
		"--webhook-url", rcv.URL, "--webhook-secret", secret, "--source-conns", "4")
	waitFor(t, "a, b and c delivering", 15*time.Second, func() bool {
		return strings.Count(logs.String(), `msg="fleet: source delivering"`) == 3
	})
	want := map[string]bool{}
	for i, s := range []source{a, b, c} {
		want[insertArticleEvent(t, s.store, fmt.Sprint(i))] = true
	}
	rcv.WaitAccepted(t, 3, 5*time.Second)
	for _, d := range rcv.Accepted() {
		if !want[d.ID] {
			t.Errorf("delivered %s, not one of the events written", d.ID)
		}
	}

	// One pool per database, at most --source-conns each, and one
	// listening connection however many schemas listen in it.
	relayConns(t, a.store, 4+1)

	// d is added; a is removed.
	writeSources(t, file, unmigrated+refused, b, c, d)
	waitFor(t, "d delivering and a stopped", 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, `msg="fleet: source delivering" source=d`) &&
			strings.Contains(l, `msg="fleet: source stopped: no longer listed for this process" source=a`)
	})
	insertArticleEvent(t, d.store, "d")
	orphan := insertArticleEvent(t, a.store, "a")
	rcv.WaitAccepted(t, 4, 5*time.Second)
	time.Sleep(500 * time.Millisecond) // a stopped: its event stays
	for _, got := range rcv.Accepted() {
		if got.ID == orphan {
			t.Errorf("the event of a, removed from the list, was delivered")
		}
	}

	log := logs.String()
	for name, want := range map[string]string{
		"unmigrated": "not migrated",
		"refused":    "cannot reach the database",
	} {
		if n := strings.Count(log, "source="+name); n != 1 {
			t.Errorf("source %s: %d lines, want its failure once:\n%s", name, n, log)
		}
		if !strings.Contains(log, want) {
			t.Errorf("source %s: its failure (%q) is not logged", name, want)
		}
	}

	// postbox status --sources: one row a source, the relay live in each
	// running one, the broken ones saying why; --check fails on them.
	var rows []struct {
		Name, Error     string
		Pending, Relays int
	}
	if err := json.Unmarshal([]byte(runOK(t, "status", "--sources", file, "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r.Name] = fmt.Sprintf("pending=%d relays=%d error=%v", r.Pending, r.Relays, r.Error != "")
	}
	wantRows := map[string]string{
		"b": "pending=0 relays=1 error=false", "c": "pending=0 relays=1 error=false", "d": "pending=0 relays=1 error=false",
		"unmigrated": "pending=0 relays=0 error=true", "refused": "pending=0 relays=0 error=true",
	}
	if !maps.Equal(got, wantRows) {
		t.Errorf("status --sources:\n got %v\nwant %v", got, wantRows)
	}
	runFailsWith(t, command("status", "--sources", file, "--check"), 3)
	out, _ := command("status", "--sources", file).CombinedOutput()
	for what, text := range map[string]string{"the relay's log": logs.String(), "status": string(out)} {
		if strings.Contains(text, "s3cr3t-pw") {
			t.Errorf("%s shows the password of a source's URL", what)
		}
	}

	relayConns(t, a.store, 4+1)
}

// relayConns fails unless the relays' connections to the database of s
// are at most max.
func relayConns(t *testing.T, s *postgres.Store, max int) {
	t.Helper()
	var conns int
	err := s.Pool().QueryRow(context.Background(),
		"select count(*) from pg_stat_activity where application_name = 'postbox relay' and datname = current_database()").Scan(&conns)
	if err != nil {
		t.Fatal(err)
	}
	if conns > max {
		t.Errorf("%d connections of postbox relay to the database, want at most %d", conns, max)
	}
}

// The flags that do not go with --sources are refused, naming the flag
// and saying what to do instead.
func TestRelaySourcesFlagRefusals(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sources.yaml")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sources", file, "--endpoints"}, "--endpoints does not apply with --sources or --sources-query: say endpoints: true"},
		{[]string{"--sources", file, "--wal"}, "--wal does not apply"},
		{[]string{"--sources", file, "--archive", "file:///tmp/x", "--retention", "1h"}, "--archive does not apply"},
		{[]string{"--sources", file, "--db", pgtest.URL()}, "--db is only the registry of --sources-query"},
		{[]string{"--sources", file, "--sources-query", "select 1"}, "give --sources or --sources-query, not both"},
		{[]string{"--sources-query", "select db from t"}, "give --db"},
		{[]string{"--sources-query", "select db from t", "--db", "sqlite:x.db"}, "needs a PostgreSQL --db"},
		{[]string{"--db", pgtest.URL(), "--sink", "http://127.0.0.1:1/", "--source-conns", "3"}, "--source-conns applies only with --sources"},
	} {
		last := runFailsWith(t, command(append([]string{"relay"}, c.args...)...), 2)
		if !strings.Contains(last, c.want) {
			t.Errorf("postbox relay %s: %q, want %q", strings.Join(c.args, " "), last, c.want)
		}
	}
	// A file that cannot be read, or that holds no valid list, is the
	// first listing's failure: the command exits at once.
	if err := os.WriteFile(file, []byte("sources:\n  - name: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	last := runFailsWith(t, command("relay", "--sources", file, "--sink", "http://127.0.0.1:1/"), 1)
	if !strings.Contains(last, "db is required") {
		t.Errorf("a source without db: %q", last)
	}
}

// The shipped relay over a registry query: the sources are rows of a table
// of the registry (--db), re-read while it runs.
func TestShippedRelayOverSourcesQuery(t *testing.T) {
	a := newSource(t, "a", pgtest.URL())
	b := newSource(t, "b", pgtest.URL())
	pool := a.store.Pool()
	reg := pgtest.Schema(t, pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, "create schema "+reg+"; create table "+reg+".tenants (name text, url text, sch text, active bool)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "insert into "+reg+".tenants values ('a', $1, $2, true), ('b', $1, $3, false)", pgtest.URL(), a.schema, b.schema); err != nil {
		t.Fatal(err)
	}
	rcv := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, "--db", pgtest.URL(), "--sources-every", "200ms",
		"--sources-query", "select name, url as db, sch as schema from "+reg+".tenants where active",
		"--webhook-url", rcv.URL, "--webhook-secret", secret)
	waitFor(t, "a delivering", 15*time.Second, func() bool {
		return strings.Contains(logs.String(), `msg="fleet: source delivering" source=a`)
	})
	idA := insertArticleEvent(t, a.store, "a")
	rcv.WaitAccepted(t, 1, 5*time.Second)

	if _, err := pool.Exec(ctx, "update "+reg+".tenants set active = not active"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b delivering, a stopped", 10*time.Second, func() bool {
		l := logs.String()
		return strings.Contains(l, `msg="fleet: source delivering" source=b`) &&
			strings.Contains(l, `msg="fleet: source stopped: no longer listed for this process" source=a`)
	})
	idB := insertArticleEvent(t, b.store, "b")
	rcv.WaitAccepted(t, 2, 5*time.Second)
	if got := rcv.Accepted(); got[0].ID != idA || got[1].ID != idB {
		t.Errorf("delivered %s, %s; want %s, %s", got[0].ID, got[1].ID, idA, idB)
	}

	// The registry's query failing keeps b running, logged once.
	if _, err := pool.Exec(ctx, "alter table "+reg+".tenants rename column url to u"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failure logged", 5*time.Second, func() bool { return strings.Contains(logs.String(), "cannot list the sources") })
	insertArticleEvent(t, b.store, "b2")
	rcv.WaitAccepted(t, 3, 5*time.Second)
	if n := strings.Count(logs.String(), "cannot list the sources"); n != 1 {
		t.Errorf("the listing failure logged %d times, want once", n)
	}
}

// delivering returns the sources a relay's log says are delivering and
// not stopped since.
func delivering(log string) map[string]bool {
	on := map[string]bool{}
	for _, line := range strings.Split(log, "\n") {
		_, name, ok := strings.Cut(line, " source=")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, " ")
		switch {
		case strings.Contains(line, `msg="fleet: source delivering"`):
			on[name] = true
		case strings.Contains(line, `msg="fleet: source stopped`):
			delete(on, name)
		}
	}
	return on
}

// Two relay processes share the sources through advisory locks on the
// fleet database: each drains its share, none drains a source twice; one
// killed, the other takes its sources over, and their events are
// delivered; a third joining takes a share.
func TestShippedRelaysShareSources(t *testing.T) {
	var srcs []source
	for i := range 6 {
		srcs = append(srcs, newSource(t, fmt.Sprintf("s%d", i), pgtest.URL()))
	}
	file := filepath.Join(t.TempDir(), "sources.yaml")
	writeSources(t, file, "", srcs...)
	rcv := receiver.New(t, secret, nil)
	fleetName := fmt.Sprintf("test-%d", time.Now().UnixNano())
	args := []string{"--sources", file, "--fleet-db", pgtest.URL(), "--fleet", fleetName,
		"--webhook-url", rcv.URL, "--webhook-secret", secret}

	logs1, pid1 := startRelayLogged(t, args...)
	logs2, _ := startRelayLogged(t, args...)
	split := func(logs ...string) bool {
		all := map[string]int{}
		for _, l := range logs {
			for n := range delivering(l) {
				all[n]++
			}
		}
		if len(all) != len(srcs) {
			return false
		}
		for _, c := range all {
			if c != 1 {
				return false
			}
		}
		return true
	}
	waitFor(t, "the sources split between the two, each once", 20*time.Second, func() bool {
		return split(logs1.String(), logs2.String()) && len(delivering(logs1.String())) > 0 && len(delivering(logs2.String())) > 0
	})
	for i, s := range srcs {
		insertArticleEvent(t, s.store, fmt.Sprint(i))
	}
	rcv.WaitAccepted(t, len(srcs), 10*time.Second)

	// The first is killed: its slot vanishes with its session.
	if err := syscall.Kill(pid1, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second drains every source", 20*time.Second, func() bool { return len(delivering(logs2.String())) == len(srcs) })
	for i, s := range srcs {
		insertArticleEvent(t, s.store, fmt.Sprint(100+i))
	}
	rcv.WaitAccepted(t, 2*len(srcs), 10*time.Second)

	logs3, _ := startRelayLogged(t, args...)
	waitFor(t, "the third takes a share", 20*time.Second, func() bool {
		return len(delivering(logs3.String())) > 0 && split(logs2.String(), logs3.String())
	})
}

// A source in endpoints mode delivers to the endpoints kept in its own
// schema, one in WAL mode streams its inserts from its slot, beside a
// source with the command's sink.
func TestShippedRelayOverSourcesOfEachMode(t *testing.T) {
	plain := newSource(t, "plain", pgtest.URL())
	fanned := newSource(t, "fanned", pgtest.URL())
	partner := receiver.New(t, secret, nil)
	addEndpointCmd(t, []string{"--db", fanned.url, "--schema", fanned.schema}, "--url", partner.URL, "--allow-private", "--secret", secret)
	walStore, _, walDB := walSchemaStore(t)
	streamed := source{name: "streamed", url: walDB[1], schema: walDB[3], store: walStore}

	file := filepath.Join(t.TempDir(), "sources.yaml")
	writeSources(t, file, fanned.yaml()+"    endpoints: true\n"+streamed.yaml()+"    wal: true\n", plain)
	rcv := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, "--sources", file, "--poll", "1h", "--webhook-url", rcv.URL, "--webhook-secret", secret)
	waitFor(t, "three sources delivering", 20*time.Second, func() bool {
		return strings.Count(logs.String(), `msg="fleet: source delivering"`) == 3
	})
	idPlain := insertArticleEvent(t, plain.store, "p")
	idStreamed := insertArticleEvent(t, streamed.store, "s")
	idFanned := insertArticleEvent(t, fanned.store, "f")
	rcv.WaitAccepted(t, 2, 10*time.Second)
	partner.WaitAccepted(t, 1, 10*time.Second)
	got := map[string]bool{}
	for _, d := range rcv.Accepted() {
		got[d.ID] = true
	}
	if !got[idPlain] || !got[idStreamed] || partner.Accepted()[0].ID != idFanned {
		t.Errorf("the sink got %v (want %s, %s), the endpoint %s (want %s)", got, idPlain, idStreamed, partner.Accepted()[0].ID, idFanned)
	}
	// Each says at start what it does, on a line of its own source.
	for src, says := range map[string]string{
		"streamed": "streaming the outbox's inserts from",
		"fanned":   "endpoints mode: the relay drains the outbox into the fan-out",
		"plain":    "listening for new events on postbox_" + plain.schema,
	} {
		found := false
		for _, line := range strings.Split(logs.String(), "\n") {
			found = found || strings.Contains(line, says) && strings.Contains(line, "source="+src)
		}
		if !found {
			t.Errorf("no line of source %s says %q", src, says)
		}
	}
}
