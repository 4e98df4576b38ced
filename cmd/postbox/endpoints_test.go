package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
	"github.com/postbox-go/postbox/store/sqlite"
)

var endpointIDLine = regexp.MustCompile(`endpoint ([0-9a-f-]{36}) added`)

// addEndpointCmd runs postbox endpoints add and returns the new id.
func addEndpointCmd(t *testing.T, db []string, args ...string) uuid.UUID {
	t.Helper()
	out := runOK(t, append(append([]string{"endpoints", "add"}, db...), args...)...)
	m := endpointIDLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("endpoints add printed %q, want the id", out)
	}
	return uuid.MustParse(m[1])
}

func TestEndpointsCommandsAddListShowRotateRemove(t *testing.T) {
	_, db := schemaStore(t)
	out := runOK(t, append([]string{"endpoints", "add", "--url", "https://partner.example/hooks", "--name", "partner",
		"--types", "order.*,payment.succeeded", "--rate", "20/s", "--concurrency", "3"}, db...)...)
	secretLine := regexp.MustCompile(`secret (whsec_\S+)`).FindStringSubmatch(out)
	if secretLine == nil {
		t.Fatalf("add printed %q, want the generated secret", out)
	}
	id := uuid.MustParse(endpointIDLine.FindStringSubmatch(out)[1])
	given := addEndpointCmd(t, db, "--url", "https://b.example/", "--secret", secret, "--shadow")

	list := runOK(t, append([]string{"endpoints", "list"}, db...)...)
	for _, want := range []string{id.String(), "partner", "order.*,payment.succeeded", "20/s", given.String(), "enabled,shadow"} {
		if !strings.Contains(list, want) {
			t.Errorf("list lacks %q:\n%s", want, list)
		}
	}
	for _, s := range []string{secretLine[1], secret} {
		if strings.Contains(list, s) {
			t.Errorf("list prints a secret:\n%s", list)
		}
	}
	var shown struct {
		Name          string                `json:"name"`
		Types         []string              `json:"types"`
		Concurrency   int                   `json:"concurrency"`
		RatePerSecond float64               `json:"rate_per_second"`
		Secret        string                `json:"secret_fingerprint"`
		Deliveries    *store.DeliveryCounts `json:"deliveries"`
	}
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "show", "--json", id.String()}, db...)...)), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.Name != "partner" || shown.Concurrency != 3 || shown.RatePerSecond != 20 || shown.Deliveries == nil ||
		!slices.Equal(shown.Types, []string{"order.*", "payment.succeeded"}) || !strings.HasPrefix(shown.Secret, "sha256:") {
		t.Errorf("show --json = %+v", shown)
	}

	rotated := runOK(t, append([]string{"endpoints", "rotate-secret", "--grace", "1h", id.String()}, db...)...)
	if !strings.Contains(rotated, "secret whsec_") {
		t.Errorf("rotate-secret printed %q, want the new secret", rotated)
	}
	if show := runOK(t, append([]string{"endpoints", "show", id.String()}, db...)...); !strings.Contains(show, "old secret") {
		t.Errorf("show after a rotation lacks the old secret's grace:\n%s", show)
	}
	runOK(t, append([]string{"endpoints", "disable", id.String()}, db...)...)
	if show := runOK(t, append([]string{"endpoints", "show", id.String()}, db...)...); !strings.Contains(show, "state        disabled") {
		t.Errorf("show after disable:\n%s", show)
	}
	runOK(t, append([]string{"endpoints", "remove", id.String()}, db...)...)
	errText := runFails(t, command(append([]string{"endpoints", "show", id.String()}, db...)...))
	if !strings.Contains(errText, "no endpoint "+id.String()) {
		t.Errorf("show of a removed endpoint said %q", errText)
	}
	if list := runOK(t, append([]string{"endpoints", "list"}, db...)...); strings.Contains(list, id.String()) || !strings.Contains(list, given.String()) {
		t.Errorf("list after remove:\n%s", list)
	}
	for _, bad := range [][]string{{"--url", "ftp://x"}, {"--url", "https://x", "--types", "[a"}, {"--url", "https://x", "--secret", "short"}} {
		out, err := command(append(append([]string{"endpoints", "add"}, db...), bad...)...).CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") != 0 || !strings.Contains(string(out), "--") {
			t.Errorf("endpoints add %q: %v, %q; want one line naming the flag, and a failure", bad, err, out)
		}
	}
	if list := runOK(t, append([]string{"endpoints", "list"}, db...)...); strings.Count(list, "\n") != 2 {
		t.Errorf("refused adds added endpoints:\n%s", list)
	}
}

// The shipped relay in endpoints mode delivers events written by plain SQL
// to two endpoints with different filters: each receives exactly its own,
// the attempts are listed, and the metrics count each endpoint's
// deliveries under its name and the fan-out apart. An endpoint that
// answers 410 dead-letters only its own deliveries, which endpoints retry
// sends back; one that refuses connections is an outage of its lane: its
// deliveries wait, burning no attempt.
func TestEndpointsRelayDeliversByFilter(t *testing.T) {
	s, db := schemaStore(t)
	orders := receiver.New(t, secret, nil)
	all := receiver.New(t, secret, nil)
	ordersID := addEndpointCmd(t, db, "--url", orders.URL, "--allow-private", "--name", "orders", "--types", "order.*", "--secret", secret)
	allID := addEndpointCmd(t, db, "--url", all.URL, "--allow-private", "--name", "all", "--secret", secret)
	gone := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int { return http.StatusGone })
	goneID := addEndpointCmd(t, db, "--url", gone.URL, "--allow-private", "--name", "gone", "--secret", secret)
	dead := receiver.New(t, secret, nil)
	dead.Server.Close() // refuses connections from now on
	deadID := addEndpointCmd(t, db, "--url", dead.URL, "--allow-private", "--name", "dead", "--secret", secret)
	// --retention keeps the delivered events, and so the delivered
	// deliveries, which this test counts.
	logs, _ := startRelayLogged(t, append(db, "--endpoints", "--poll", "100ms", "--metrics-addr", "127.0.0.1:0", "--retention", "1h",
		"--max-attempts", "2", "--backoff-min", "10ms", "--backoff-max", "20ms", "--breaker-failures", "1000")...)
	want := map[string][]string{}
	for i := range 20 {
		typ := []string{"order.created", "payment.succeeded"}[i%2]
		id := insertTyped(t, s, fmt.Sprint(i), typ)
		want["all"] = append(want["all"], id)
		if typ == "order.created" {
			want["orders"] = append(want["orders"], id)
		}
	}
	for name, rc := range map[string]*receiver.Receiver{"orders": orders, "all": all} {
		rc.WaitAccepted(t, len(want[name]), 30*time.Second)
		var got []string
		for _, d := range rc.Accepted() {
			got = append(got, d.ID)
		}
		slices.Sort(got)
		slices.Sort(want[name])
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s received %d events, want exactly its %d", name, len(got), len(want[name]))
		}
	}
	for _, line := range []string{"endpoints mode", "endpoints=4", "fan-out", "ssrf_guard="} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("the relay did not say at start %q:\n%s", line, logs)
		}
	}
	deliveries := func(id uuid.UUID) store.DeliveryCounts {
		var shown struct {
			Deliveries store.DeliveryCounts `json:"deliveries"`
		}
		if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "show", "--json", id.String()}, db...)...)), &shown); err != nil {
			t.Fatal(err)
		}
		return shown.Deliveries
	}
	waitFor(t, "the gone endpoint's deliveries dead-lettered", 20*time.Second, func() bool { return deliveries(goneID).Failed == 20 })
	for id, n := range map[uuid.UUID]int64{ordersID: 10, allID: 20} {
		if c := deliveries(id); c != (store.DeliveryCounts{Done: n}) {
			t.Errorf("a live endpoint's deliveries: %+v, want %d done and nothing failed", c, n)
		}
	}
	// By now a refused connection counted as an attempt would have failed
	// the dead endpoint's deliveries (2 attempts, 20ms apart) as the gone
	// one's were.
	if c := deliveries(deadID); c.Failed != 0 || c.Pending+c.Processing != 20 {
		t.Errorf("the endpoint refusing connections: %+v, want its 20 deliveries waiting, none failed", c)
	}
	gone.Server.Close()
	if out := runOK(t, append([]string{"endpoints", "retry", goneID.String()}, db...)...); !strings.Contains(out, "retried 20 failed deliveries") {
		t.Errorf("endpoints retry printed %q", out)
	}
	var url string
	waitFor(t, "the metrics address in the log", 10*time.Second, func() bool {
		m := metricsLine.FindStringSubmatch(logs.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	delivered := map[string]string{"outcome": "delivered"}
	waitFor(t, "the deliveries counted", 10*time.Second, func() bool {
		return sum(scrape(t, url), "postbox_deliveries_total", delivered) == 30
	})
	m := scrape(t, url)
	if n := sum(m, "postbox_deliveries_total", map[string]string{"outcome": "delivered", "endpoint": "orders"}); n != 10 {
		t.Errorf("postbox_deliveries_total{endpoint=\"orders\",outcome=\"delivered\"} = %v, want 10", n)
	}
	if n := sum(m, "postbox_deliveries_total", map[string]string{"outcome": "failed", "endpoint": "gone"}); n != 20 {
		t.Errorf("postbox_deliveries_total{endpoint=\"gone\",outcome=\"failed\"} = %v, want 20", n)
	}
	if n := sum(m, "postbox_fanout_events_total", delivered); n != 20 {
		t.Errorf("postbox_fanout_events_total{outcome=\"delivered\"} = %v, want the 20 events fanned out", n)
	}
	if n := sum(m, "postbox_endpoint_lanes", nil); n != 4 {
		t.Errorf("postbox_endpoint_lanes = %v, want 4", n)
	}
	waitFor(t, "the attempts logged", 10*time.Second, func() bool {
		var attempts []store.Attempt
		out := runOK(t, append([]string{"endpoints", "attempts", "--json", ordersID.String()}, db...)...)
		return json.Unmarshal([]byte(out), &attempts) == nil && len(attempts) == 10 && attempts[0].StatusCode == 200
	})
}

// A relay killed (SIGKILL) in the middle of the fan-out, then started
// again, leaves exactly one delivery per event and endpoint.
func TestEndpointsRelayKilledMidFanOutWritesNoDuplicates(t *testing.T) {
	s, db := schemaStore(t)
	rc := receiver.New(t, secret, nil)
	id := addEndpointCmd(t, db, "--url", rc.URL, "--allow-private", "--secret", secret)
	const n = 3000
	_, err := s.Pool().Exec(context.Background(), "insert into "+s.Table("outbox_events")+
		"(aggregate_type, aggregate_id, event_type, payload) select 'order', i::text, 'order.created', '{}' from generate_series(1, $1) i", n)
	if err != nil {
		t.Fatal(err)
	}
	// --retention keeps the delivered deliveries, whose rows are counted.
	_, pid := startRelayLogged(t, append(db, "--endpoints", "--allow-private-endpoints", "--batch", "100", "--lease", "2s", "--timeout", "1s", "--retention", "1h")...)
	waitFor(t, "the fan-out started", 30*time.Second, func() bool { return deliveryRows(t, s, id) > 0 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	startRelayLogged(t, append(db, "--endpoints", "--allow-private-endpoints", "--lease", "2s", "--timeout", "1s", "--retention", "1h")...)
	// A delivery the killed relay made but did not settle is made again
	// (at least once): count the distinct events.
	waitFor(t, "every event received", 60*time.Second, func() bool {
		seen := map[string]bool{}
		for _, d := range rc.Accepted() {
			seen[d.ID] = true
		}
		return len(seen) == n
	})
	if rows := deliveryRows(t, s, id); rows != n {
		t.Errorf("%d delivery rows for %d events", rows, n)
	}
}

func insertTyped(t *testing.T, s *postgres.Store, aggregateID, eventType string) string {
	t.Helper()
	var id string
	err := s.Pool().QueryRow(context.Background(),
		"insert into "+s.Table("outbox_events")+"(aggregate_type, aggregate_id, event_type, payload) values ('order', $1, $2, '{}') returning id::text",
		aggregateID, eventType).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func deliveryRows(t *testing.T, s *postgres.Store, endpointID uuid.UUID) int {
	t.Helper()
	var n int
	if err := s.Pool().QueryRow(context.Background(), "select count(*) from "+s.Table("endpoint_deliveries")+" where endpoint_id = $1", endpointID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// endpoints test sends a signed postbox.test event now and says how it went.
func TestEndpointsTestCommand(t *testing.T) {
	_, db := schemaStore(t)
	rc := receiver.New(t, secret, nil)
	id := addEndpointCmd(t, db, "--url", rc.URL, "--allow-private", "--secret", secret)
	out := runOK(t, append([]string{"endpoints", "test", id.String()}, db...)...)
	if !strings.Contains(out, "delivered") || len(rc.Accepted()) != 1 || rc.Accepted()[0].EventType != "postbox.test" {
		t.Errorf("endpoints test printed %q; the receiver accepted %d requests, want one postbox.test", out, len(rc.Accepted()))
	}
	rc.Server.Close()
	errText := runFails(t, command(append([]string{"endpoints", "test", "--allow-private-endpoints", "--timeout", "2s", id.String()}, db...)...))
	if !strings.Contains(errText, "failed") {
		t.Errorf("endpoints test to a closed endpoint said %q", errText)
	}
}

// Endpoints mode on SQLite: events inserted by plain SQL reach the
// endpoint whose filter matches them.
func TestEndpointsRelayOnSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	rc := receiver.New(t, secret, nil)
	id := addEndpointCmd(t, db, "--url", rc.URL, "--allow-private", "--types", "order.*", "--secret", secret)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 20 {
		typ := []string{"order.created", "audit.logged"}[i%2]
		if _, err := s.DB().Exec("insert into outbox_events (aggregate_type, aggregate_id, event_type, payload) values ('order', ?, ?, '{}')", fmt.Sprint(i), typ); err != nil {
			t.Fatal(err)
		}
	}
	startRelayLogged(t, append(db, "--endpoints", "--allow-private-endpoints", "--poll", "50ms", "--retention", "1h")...)
	rc.WaitAccepted(t, 10, 20*time.Second)
	for _, d := range rc.Accepted() {
		if d.EventType != "order.created" {
			t.Errorf("the order.* endpoint received a %s", d.EventType)
		}
	}
	waitFor(t, "the deliveries done", 10*time.Second, func() bool {
		return strings.Contains(runOK(t, append([]string{"endpoints", "show", id.String()}, db...)...), "10 done")
	})
}

// An endpoint whose address the SSRF guard refuses at connect time (one
// registered before the check at registration, or a name that resolves to
// another address by then: written here through the store) gets no
// request: its deliveries fail at once, and the attempts table and failed
// show say why, whole, with the flag that allows it. An endpoint allowed
// private addresses beside it is delivered to.
func TestEndpointsRelayRefusesPrivateAddresses(t *testing.T) {
	s, db := schemaStore(t)
	ctx := context.Background()
	local := receiver.New(t, secret, nil)
	allowed := receiver.New(t, secret, nil)
	addEndpointCmd(t, db, "--url", allowed.URL, "--allow-private", "--secret", secret)
	add := func(name, url string) uuid.UUID {
		e, err := s.EndpointCreate(ctx, store.Endpoint{Name: name, URL: url, Secret: secret, Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		return e.ID
	}
	localID := add("local", local.URL)
	metadataID := add("metadata", "http://169.254.169.254/latest/meta-data/")
	logs, _ := startRelayLogged(t, append(db, "--endpoints", "--poll", "100ms", "--timeout", "2s")...)
	var events []string
	for i := range 3 {
		events = append(events, insertTyped(t, s, fmt.Sprint(i), "order.created"))
	}
	failed := func(id uuid.UUID) int64 {
		var shown struct {
			Deliveries store.DeliveryCounts `json:"deliveries"`
		}
		if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "show", "--json", id.String()}, db...)...)), &shown); err != nil {
			t.Fatal(err)
		}
		return shown.Deliveries.Failed
	}
	waitFor(t, "the refused deliveries failed", 30*time.Second, func() bool { return failed(localID) == 3 && failed(metadataID) == 3 })
	allowed.WaitAccepted(t, 3, 20*time.Second)
	if n := len(local.Accepted()); n != 0 {
		t.Fatalf("the loopback endpoint received %d requests", n)
	}
	for id, why := range map[uuid.UUID]string{localID: "127.0.0.1 is loopback: refused; allow it with --allow-private",
		metadataID: "169.254.169.254 is link-local (cloud metadata): refused; allow it with --allow-private"} {
		var out string
		deadline := time.Now().Add(10 * time.Second)
		for out = ""; !strings.Contains(out, why); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the attempts table does not say %q, whole:\n%s", why, out)
			}
			out = runOK(t, append([]string{"endpoints", "attempts", id.String()}, db...)...)
		}
	}
	show := runOK(t, append([]string{"failed", "show", events[0]}, db...)...)
	for _, want := range []string{"endpoint    local (" + localID.String() + ")", "endpoint    metadata (" + metadataID.String() + ")", "127.0.0.1 is loopback: refused"} {
		if !strings.Contains(show, want) {
			t.Errorf("failed show of an event refused at two endpoints lacks %q:\n%s", want, show)
		}
	}
	if !strings.Contains(logs.String(), "refusing private, loopback and link-local addresses, except to endpoints added with --allow-private") {
		t.Errorf("the relay did not say at start that the guard is on:\n%s", logs)
	}
}
