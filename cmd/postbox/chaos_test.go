package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/chaos"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// runChaos runs `postbox chaos --json` with args and decodes its report;
// it fails the test unless the command exits zero.
func runChaos(t *testing.T, args ...string) chaos.Report {
	t.Helper()
	var out, progress bytes.Buffer
	cmd := command(append([]string{"chaos", "--db", pgtest.URL(), "--json"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &progress
	err := cmd.Run()
	var rep chaos.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("postbox chaos: %v; report %q: %v\n%s", err, out.String(), jerr, progress.String())
	}
	if err != nil {
		t.Fatalf("postbox chaos: %v\n%s\n%s", err, out.String(), progress.String())
	}
	return rep
}

// checkExactlyOnce asserts the reconciliation: every event produced applied
// once, every fault asked for injected.
func checkExactlyOnce(t *testing.T, rep chaos.Report, faults []string) {
	t.Helper()
	tot := rep.Total
	if !rep.OK || tot.Produced == 0 || tot.Lost != 0 || tot.AppliedTwice != 0 || tot.OutOfOrder != 0 ||
		tot.AppliedOnce != tot.Produced || len(rep.Problems) > 0 {
		t.Fatalf("reconciliation %+v, problems %v", tot, rep.Problems)
	}
	injected := map[string]int{}
	for _, k := range rep.Faults {
		injected[k.Kind] = k.Injected
	}
	for _, f := range faults {
		if injected[f] == 0 {
			t.Errorf("fault %s was not injected: %+v", f, rep.Faults)
		}
	}
	if len(rep.MemoryAtEnd) != rep.Relays || rep.MemoryAtEnd[0].RSSKiB == 0 || rep.MemoryAtEnd[0].FDs == 0 {
		t.Errorf("relays' memory at the end %+v, want one sample per relay", rep.MemoryAtEnd)
	}
}

// A short run of the fault suite through the binary, ordered, with a fault
// of each family: processes (kill, pause), the relays' database
// connections, the network to the consumer, the consumer's answers and its
// handler.
func TestChaosLosesNothing(t *testing.T) {
	faults := []string{chaos.FaultKill, chaos.FaultPause, chaos.FaultDBReset, chaos.FaultSinkReset, chaos.FaultHTTP5xx, chaos.FaultHandlerFailure}
	rep := runChaos(t, "--duration", "15s", "--events-per-second", "200", "--ordered", "--faults", strings.Join(faults, ","))
	checkExactlyOnce(t, rep, faults)
	if rep.Total.MaxDeliveries < 2 {
		t.Errorf("no event was delivered twice: the faults did not bite (%+v)", rep.Total)
	}
}

func TestChaosRefusesBadFaults(t *testing.T) {
	for _, faults := range []string{"kill,nope", chaos.FaultDBRestart, ""} {
		out, err := command("chaos", "--db", pgtest.URL(), "--faults", faults).CombinedOutput()
		if code := exitCodeOf(err); code != 2 || !strings.Contains(string(out), "--faults") {
			t.Errorf("--faults %q: exit code %d, %q; want 2 and an error about --faults", faults, code, out)
		}
	}
}

// exitCodeOf is the exit code of a command that ran with err.
func exitCodeOf(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// TestChaosDatabaseRestart crashes the PostgreSQL server (an immediate
// shutdown, then a start) in the middle of a chaos run, and shows that
// nothing is lost although the relays' bookkeeping (claims, outcomes)
// commits asynchronously and the crash forgets its last fraction of a
// second.
//
// It runs only with POSTBOX_CHAOS_RESTART=1 (and the restart command in
// POSTBOX_CHAOS_RESTART_CMD, by default pg_ctlcluster's for the one cluster
// in /etc/postgresql), and on its own: go test -run TestChaosDatabaseRestart
// ./cmd/postbox. This is not a missing service, which fails a test: the
// server is there, and the test destroys every other connection to it, so
// it would break the tests of every other package running at the same time
// on the same server. It is a deliberate, destructive opt-in, like the
// --allow-restart flag it exercises.
func TestChaosDatabaseRestart(t *testing.T) {
	if os.Getenv("POSTBOX_CHAOS_RESTART") != "1" {
		t.Skip("restarts the PostgreSQL server: set POSTBOX_CHAOS_RESTART=1 and run it alone")
	}
	restart := os.Getenv("POSTBOX_CHAOS_RESTART_CMD")
	if restart == "" {
		versions, err := os.ReadDir("/etc/postgresql")
		if err != nil || len(versions) != 1 {
			t.Fatalf("set POSTBOX_CHAOS_RESTART_CMD: cannot tell the cluster from /etc/postgresql (%v)", err)
		}
		restart = "pg_ctlcluster --skip-systemctl-redirect " + versions[0].Name() + " main restart -m immediate"
	}
	faults := []string{chaos.FaultKill, chaos.FaultDBRestart, chaos.FaultPause, chaos.FaultSinkReset, chaos.FaultHandlerFailure}
	rep := runChaos(t, "--duration", "40s", "--allow-restart", restart, "--faults", strings.Join(faults, ","))
	for _, k := range append(rep.Faults, rep.Total) {
		t.Logf("%-13s %+v", k.Kind, k)
	}
	checkExactlyOnce(t, rep, faults)
}

// Found by `postbox chaos --ordered`: an ordered claim reads the whole
// backlog when the heads of the aggregates sit behind their successors in
// claim order (a reclaim or a retry moves a head's available_at to now),
// so with a backlog a claim outlasts a short lease, every event it took is
// released unsent, and the backlog never drains. Here 100 aggregates have
// their heads due now and 100,000 successors due an hour ago; an ordered
// relay with a one-second lease must deliver the heads and their
// successors without releasing events unsent.
//
// claim_ordered (store/postgres/queries.sql) now walks the aggregates when
// its window of the oldest due events holds too few heads; see
// docs/guarantees.md, "Known limits".
func TestOrderedRelayClaimsWithinItsLease(t *testing.T) {
	s, db := schemaStore(t)
	runOK(t, append([]string{"migrate", "--ordered"}, db...)...)
	outbox := s.Table("outbox_events")
	for _, q := range []string{
		`insert into ` + outbox + ` (aggregate_type, aggregate_id, event_type, payload)
		 select 'order', 'a' || g, 'order.step', '{}' from generate_series(1, 100) g`,
		`insert into ` + outbox + ` (aggregate_type, aggregate_id, event_type, payload, available_at)
		 select 'order', 'a' || (g % 100 + 1), 'order.step', '{}', now() - interval '1 hour' from generate_series(1, 100000) g`,
	} {
		if _, err := s.Pool().Exec(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
	rec := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, append(db, "--webhook-url", rec.URL, "--webhook-secret", secret,
		"--ordered", "--lease", "1s", "--log-level", "warn")...)
	const want = 300 // the heads, and two successors of each
	deadline := time.Now().Add(30 * time.Second)
	for len(rec.Accepted()) < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	released := strings.Count(logs.String(), "lease expired before the delivery started")
	if got := len(rec.Accepted()); got < want || released > 0 {
		t.Fatalf("%d events delivered in 30 s (want %d), %d released unsent because the claim outlasted the lease", got, want, released)
	}
}

// The run starts once the relays hold their connections: a
// half-open fault first in the schedule strikes their live connections
// (their statements time out: an error, or a claim that timed out, which
// the relay logs as a warning since the server bounds its claims),
// instead of striking before they connect and showing nothing.
func TestChaosFirstFaultStrikesConnectedRelays(t *testing.T) {
	rep := runChaos(t, "--duration", "8s", "--events-per-second", "100", "--faults", chaos.FaultDBHalfOpen)
	checkExactlyOnce(t, rep, []string{chaos.FaultDBHalfOpen})
	struck := 0
	for _, l := range rep.RelayLog {
		if l.Level == "ERROR" || strings.HasPrefix(l.Message, "claim timed out") {
			struck += l.Count
		}
	}
	if struck == 0 {
		t.Fatalf("no relay logged an error or a claim that timed out under db-halfopen, first in the schedule: it hit no live connection (%+v)", rep.RelayLog)
	}
}

// Endpoints mode, ordered: the relays run `postbox relay --endpoints
// --ordered` to two endpoints, each with a fifth of its requests failing at
// random besides the faults; every event is applied exactly once by each
// endpoint's consumer, in order per aggregate, and the report says so per
// endpoint.
func TestChaosEndpointsChecksEachEndpoint(t *testing.T) {
	faults := []string{chaos.FaultKill, chaos.FaultHTTP5xx}
	rep := runChaos(t, "--endpoints", "2", "--ordered", "--duration", "8s", "--events-per-second", "100", "--faults", strings.Join(faults, ","))
	checkExactlyOnce(t, rep, faults)
	if len(rep.Endpoints) != 2 || rep.RandomFailures != chaos.RandomFailuresDefault {
		t.Fatalf("endpoints %+v, random failures %v: want two endpoint rows and %v", rep.Endpoints, rep.RandomFailures, chaos.RandomFailuresDefault)
	}
	for _, e := range rep.Endpoints {
		if e.AppliedOnce != rep.Total.Produced || e.Lost != 0 || e.AppliedTwice != 0 || e.OutOfOrder != 0 || e.DeadLettered != 0 || e.StillPending != 0 {
			t.Errorf("endpoint %+v: want each of the %d events applied once, in order", e, rep.Total.Produced)
		}
		if e.MaxDeliveries < 2 {
			t.Errorf("endpoint %s: no event delivered twice: the random failures did not bite (%+v)", e.Name, e)
		}
	}
}
