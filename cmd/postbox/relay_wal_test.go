package main_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store/postgres"
)

// The WAL tests stream from the test binary's throwaway cluster with
// wal_level = logical: its start overlaps the package's other tests.
func init() { pgtest.StartLogical() }

// walSchemaStore is schemaStore in WAL mode ("postbox migrate --wal") on
// the throwaway cluster with wal_level = logical; the slot and the
// publication the relays create are dropped when the test ends.
func walSchemaStore(t *testing.T) (*postgres.Store, *postgres.WAL, []string) {
	t.Helper()
	url := pgtest.LogicalURL(t)
	pool := pgtest.PoolAt(t, url)
	db := []string{"--db", url, "--schema", pgtest.Schema(t, pool)}
	if out := runOK(t, append([]string{"migrate", "--wal"}, db...)...); !strings.Contains(out, "skip the notify trigger") {
		t.Fatalf("migrate --wal said %q", out)
	}
	s, err := postgres.New(pool, postgres.Config{Schema: db[3]})
	if err != nil {
		t.Fatal(err)
	}
	return s, pgtest.WAL(t, s), db
}

func slotActive(t *testing.T, w *postgres.WAL) bool {
	t.Helper()
	st, err := w.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Active
}

func walLSN(t *testing.T, s *postgres.Store, query string, args ...any) pglogrepl.LSN {
	t.Helper()
	var lsn pglogrepl.LSN
	if err := s.Pool().QueryRow(context.Background(), query, args...).Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	return lsn
}

// statusWALSlot is the wal_slot object of "postbox status --json" (nil
// without one).
func statusWALSlot(t *testing.T, db []string) map[string]any {
	t.Helper()
	out := runOK(t, append([]string{"status", "--json"}, db...)...)
	var st struct {
		WALSlot map[string]any `json:"wal_slot"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json printed %q: %v", out, err)
	}
	return st.WALSlot
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// postbox relay --wal: the plain-SQL inserts of a producer with no trigger
// reach the sink from the slot (the poll is an hour away); the relay says
// so at start, status and the metrics show the slot, and
// --wal-drop-slot drops it.
func TestShippedRelayWAL(t *testing.T) {
	s, w, db := walSchemaStore(t)
	var enabled string
	if err := s.Pool().QueryRow(context.Background(),
		"select tgenabled::text from pg_trigger where tgname = 'outbox_events_notify' and tgrelid = $1::regclass",
		s.Table("outbox_events")).Scan(&enabled); err != nil || enabled != "D" {
		t.Fatalf("after migrate --wal the notify trigger is %q (%v), want disabled", enabled, err)
	}
	rcv := receiver.New(t, secret, nil)
	metrics := freeAddr(t)
	logs, pid := startRelayLogged(t, append(db, "--wal", "--poll", "1h", "--metrics-addr", metrics,
		"--webhook-url", rcv.URL, "--webhook-secret", secret)...)
	want := fmt.Sprintf("streaming the outbox's inserts from slot %[1]s (publication %[1]s)", w.Slot())
	waitFor(t, "the relay's start", 10*time.Second, func() bool { return strings.Contains(logs.String(), want) })
	waitFor(t, "the relay to stream the slot", 10*time.Second, func() bool { return slotActive(t, w) })

	for i := range 3 {
		id := insertArticleEvent(t, s, fmt.Sprint(i))
		rcv.WaitAccepted(t, i+1, 10*time.Second)
		if got := rcv.Accepted()[i].ID; got != id {
			t.Fatalf("delivered %s, want %s", got, id)
		}
	}
	if sl := statusWALSlot(t, db); sl == nil || sl["name"] != w.Slot() || sl["active"] != true {
		t.Fatalf("status --json wal_slot %v, want %s active", sl, w.Slot())
	}
	resp, err := http.Get("http://" + metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := `postbox_wal_slot_retained_bytes{slot="` + w.Slot() + `"}`; !strings.Contains(string(body), want) {
		t.Fatalf("metrics lack %s", want)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slot to be idle", 10*time.Second, func() bool { return !slotActive(t, w) })
	insertArticleEvent(t, s, "while down")
	out := runOK(t, append([]string{"status"}, db...)...)
	if !strings.Contains(out, "wal slot    "+w.Slot()) || !strings.Contains(out, "NOT streamed") {
		t.Fatalf("status with no relay streaming:\n%s", out)
	}
	if out := runOK(t, append([]string{"relay", "--wal-drop-slot"}, db...)...); !strings.Contains(out, "dropped slot "+w.Slot()) {
		t.Fatalf("relay --wal-drop-slot said %q", out)
	}
	if sl := statusWALSlot(t, db); sl != nil {
		t.Fatalf("status shows a dropped slot: %v", sl)
	}
	if out := runOK(t, append([]string{"relay", "--wal-drop-slot"}, db...)...); !strings.Contains(out, "no slot "+w.Slot()+" in this database") {
		t.Fatalf("relay --wal-drop-slot with no slot said %q", out)
	}
}

// A WAL relay killed with SIGKILL in the middle of a drain: the slot was
// not confirmed past what it had not recorded, and after a restart every
// event is delivered.
func TestWALRelayKilledMidDrainLosesNothing(t *testing.T) {
	s, w, db := walSchemaStore(t)
	slow := receiver.New(t, secret, func(http.ResponseWriter, *http.Request, receiver.Delivery, int) int {
		time.Sleep(50 * time.Millisecond)
		return 0
	})
	args := []string{"--wal", "--retention", "1h", "--lease", "1s", "--concurrency", "8", "--webhook-url", slow.URL, "--webhook-secret", secret}
	// The first relay claims only what the stream brings (no poll, not
	// even while the stream is behind): a polling claim in the middle of
	// the drain would hold some events while the stream confirms the rest
	// past them (safe: the table, not the slot, says what is left, and
	// the next poll finds them), and the slot's position would no longer
	// tell whether the stream waited for its own outcomes.
	_, pid := startRelayLogged(t, append(db, append(args, "--poll", "1h", "--wal-behind-poll", "0")...)...)
	waitFor(t, "the relay to stream the slot", 10*time.Second, func() bool { return slotActive(t, w) })

	var ids []string
	for range 20 {
		err := pgx.BeginFunc(context.Background(), s.Pool(), func(tx pgx.Tx) error {
			for range 10 {
				var id string
				if err := tx.QueryRow(context.Background(), "insert into "+s.Table("outbox_events")+
					"(aggregate_type, aggregate_id, event_type, payload) values ('order', gen_random_uuid()::text, 'order.created', '{}') returning id::text").Scan(&id); err != nil {
					return err
				}
				ids = append(ids, id)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	end := walLSN(t, s, "select pg_current_wal_lsn()")
	waitFor(t, "some deliveries", 20*time.Second, func() bool { return len(slow.Accepted()) >= 30 })
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the slot to be idle", 10*time.Second, func() bool { return !slotActive(t, w) })
	if st := status(t, db); st["done"] >= float64(len(ids)) {
		t.Fatalf("the relay finished before it was killed (%v): the test did not kill it mid-drain", st)
	}
	if confirmed := walLSN(t, s, "select confirmed_flush_lsn from pg_replication_slots where slot_name = $1", w.Slot()); confirmed >= end {
		t.Fatalf("the slot was confirmed at %s, past the end of the inserts %s, before their outcomes were recorded", confirmed, end)
	}

	startRelayLogged(t, append(db, args...)...)
	waitFor(t, "every event done", 60*time.Second, func() bool { return status(t, db)["done"] == float64(len(ids)) })
	if st := status(t, db); st["processing"] != 0 || st["pending"] != 0 || st["failed"] != 0 {
		t.Fatalf("after restart: %v", st)
	}
	got := map[string]bool{}
	for _, d := range slow.Accepted() {
		got[d.ID] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Fatalf("event %s never delivered", id)
		}
	}
}

// relay --wal refuses to start, saying what to do, on a server whose
// wal_level is not logical (the test server when it has PostgreSQL's
// default, or else a throwaway cluster that has it).
func TestWALRelayRefusesWithoutLogicalWAL(t *testing.T) {
	url := pgtest.URL()
	var level string
	if err := pgtest.Pool(t).QueryRow(context.Background(), "show wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level == "logical" {
		url, level = pgtest.ReplicaURL(t), "replica"
	}
	pool := pgtest.PoolAt(t, url)
	db := []string{"--db", url, "--schema", pgtest.Schema(t, pool)}
	runOK(t, append([]string{"migrate"}, db...)...)
	want := "wal_level = logical, and the server has " + level + `: run "alter system set wal_level = logical"`
	if last := runFails(t, walRelay(db)); !strings.Contains(last, want) {
		t.Fatalf("relay --wal on a %s server said %q, want %q", level, last, want)
	}
}

// relay --wal refuses to start, saying what to do, when the user lacks the
// REPLICATION attribute.
func TestWALRelayRefusesWithoutReplication(t *testing.T) {
	_, _, db := walSchemaStore(t)
	pool := pgtest.PoolAt(t, db[1])
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	role := "pbtest_norepl_" + hex.EncodeToString(b)
	if _, err := pool.Exec(context.Background(), "create role "+role+" login nosuperuser noreplication"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "drop role "+role) })
	u, err := url.Parse(db[1])
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	db[1] = u.String()
	want := `a user with the REPLICATION attribute: run "alter role <user> replication"`
	if last := runFails(t, walRelay(db)); !strings.Contains(last, want) {
		t.Fatalf("relay --wal as a user without REPLICATION said %q, want %q", last, want)
	}
}

// walRelay is "postbox relay --wal" on db, to a webhook that never answers.
func walRelay(db []string) *exec.Cmd {
	cmd := command(append([]string{"relay", "--wal"}, db...)...)
	cmd.Env = append(cmd.Env, "WEBHOOK_URL=http://127.0.0.1:1", "WEBHOOK_SECRET="+secret)
	return cmd
}

// Two relays in WAL mode: the second stands by while the first streams,
// and takes over when the first is killed with SIGKILL; no event is lost.
func TestWALStandbyTakesOverFromKilledRelay(t *testing.T) {
	s, w, db := walSchemaStore(t)
	rcv := receiver.New(t, secret, nil)
	args := append(db, "--wal", "--lease", "1s", "--webhook-url", rcv.URL, "--webhook-secret", secret)
	_, first := startRelayLogged(t, args...)
	waitFor(t, "the first relay to stream the slot", 10*time.Second, func() bool { return slotActive(t, w) })
	standby, _ := startRelayLogged(t, args...)
	waitFor(t, "the second relay to stand by", 10*time.Second, func() bool { return strings.Contains(standby.String(), "standing by") })

	var ids []string
	for i := range 20 {
		ids = append(ids, insertArticleEvent(t, s, fmt.Sprint("before-", i)))
	}
	rcv.WaitAccepted(t, 20, 10*time.Second)
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		ids = append(ids, insertArticleEvent(t, s, fmt.Sprint("after-", i)))
	}
	waitFor(t, "the standby to stream", 20*time.Second, func() bool { return strings.Contains(standby.String(), "streaming again") })
	waitFor(t, "every event delivered", 20*time.Second, func() bool {
		got := map[string]bool{}
		for _, d := range rcv.Accepted() {
			got[d.ID] = true
		}
		for _, id := range ids {
			if !got[id] {
				return false
			}
		}
		return true
	})
}
