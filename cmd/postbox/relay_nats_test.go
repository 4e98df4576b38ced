package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/postbox-go/postbox/inbox"
	inboxnats "github.com/postbox-go/postbox/inbox/nats"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// natsConsumer is the consuming service of the NATS tests: an inbox in a
// database schema of its own, applying each event as a row of the business
// table applied(event_id), which has no unique constraint (an event applied
// twice shows as two rows), with a handler that fails failRate of the time
// after writing.
type natsConsumer struct {
	store *postgres.Store
	table string
}

// clusterEvents is the backlog of the cluster test: the 50,000.
const clusterEvents = 50_000

// quietLogger drops the consumer's lines about the failures the tests
// cause on purpose.
var quietLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// startNATSConsumer consumes cons with the inbox consumer until the test
// ends.
func startNATSConsumer(t *testing.T, cons jetstream.Consumer, failRate float64) *natsConsumer {
	t.Helper()
	c := &natsConsumer{store: pgtest.Store(t)}
	c.table = c.store.Table("applied")
	if _, err := c.store.Pool().Exec(t.Context(), "create table "+c.table+" (event_id uuid not null)"); err != nil {
		t.Fatal(err)
	}
	apply := func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
		if _, err := tx.Exec(ctx, "insert into "+c.table+" (event_id) values ($1)", ev.ID); err != nil {
			return err
		}
		if rand.Float64() < failRate {
			return errors.New("the handler failed after writing")
		}
		return nil
	}
	consumer, err := inboxnats.New(inboxnats.Config{
		Consumer:      cons,
		Process:       inbox.New(c.store.Driver()).Processor(apply),
		RedeliveryMin: 20 * time.Millisecond, RedeliveryMax: 200 * time.Millisecond,
		Logger: quietLogger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- consumer.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

// applied returns the rows of the business table and the events applied
// more than once.
func (c *natsConsumer) applied(t *testing.T) (rows, twice int) {
	t.Helper()
	err := c.store.Pool().QueryRow(context.Background(),
		"select count(*), count(*) - count(distinct event_id) from "+c.table).Scan(&rows, &twice)
	if err != nil {
		t.Fatal(err)
	}
	return rows, twice
}

// natsStream creates a stream on url and a durable consumer of it, and
// returns them with the --sink URL that publishes into it.
func natsStream(t *testing.T, url string) (jetstream.Stream, jetstream.Consumer, string) {
	t.Helper()
	_, js := natstest.Connect(t, url)
	st, prefix := natstest.Stream(t, js, nil)
	cons, err := st.CreateConsumer(t.Context(), jetstream.ConsumerConfig{
		Durable: "inbox", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return st, cons, url + "?subject=" + prefix + ".{aggregate_type}.{event_type}"
}

// produce inserts the events from..to-1 with the article's plain SQL, as a
// producer in another language would: backlog at once in one statement,
// then the others one per transaction, until ctx ends.
func produce(ctx context.Context, t *testing.T, s *postgres.Store, from, to int, backlog bool) {
	insert := "insert into " + s.Table("outbox_events") + "(aggregate_type, aggregate_id, event_type, payload) "
	if backlog {
		_, err := s.Pool().Exec(ctx, insert+
			"select 'order', (i % 50)::text, 'order.paid', format('{\"order_id\": %s}', i)::jsonb from generate_series($1::int, $2::int - 1) i", from, to)
		if err != nil {
			t.Error(err)
		}
		return
	}
	for i := from; i < to; i++ {
		_, err := s.Pool().Exec(ctx, insert+"values ('order', $1, 'order.paid', $2)", fmt.Sprint(i%50), fmt.Sprintf(`{"order_id": %d}`, i))
		if err != nil {
			if ctx.Err() == nil {
				t.Error(err)
			}
			return
		}
	}
}

// outbox returns the outbox's counts by status ("processing": leased).
func outbox(t *testing.T, s *postgres.Store) store.StatusCounts {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// The end-to-end check through NATS JetStream: a plain-SQL
// producer, `postbox relay --sink nats://...`, and the inbox consumer whose
// handler fails 30% of the time after writing; the relay is killed
// (SIGKILL) in the middle of its work and started again, then the NATS
// server itself is killed and restarted, cutting the relay's and the
// consumer's connections. Every event is applied exactly once, the stream
// holds each exactly once, and the outbox ends with every event done.
func TestNATSRelayExactlyOnceThroughFaults(t *testing.T) {
	const backlog, n = 2000, 3000
	srv := natstest.StartServer(t)
	st, cons, sinkURL := natsStream(t, srv.URL)
	consumer := startNATSConsumer(t, cons, 0.3)
	s, db := schemaStore(t)
	relay := append(db, "--sink", sinkURL, "--retention", "1h", "--lease", "2s",
		"--batch", "20", "--concurrency", "16", "--backoff-min", "20ms", "--backoff-max", "200ms")

	produce(t.Context(), t, s, 0, backlog, true)
	var producing sync.WaitGroup
	producing.Go(func() { produce(t.Context(), t, s, backlog, n, false) })
	t.Cleanup(producing.Wait) // before the schema is dropped

	logs, pid := startRelayLogged(t, relay...)
	waitFor(t, "some events done", 60*time.Second, func() bool { return outbox(t, s).Done >= 200 })
	// Freeze the relay until it is caught holding claimed events, then
	// kill it: a crash in the middle of a batch.
	var inFlight int64
	waitFor(t, "the relay frozen with events in processing", 20*time.Second, func() bool {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if inFlight = outbox(t, s).Processing; inFlight > 0 {
			return true
		}
		_ = syscall.Kill(pid, syscall.SIGCONT)
		return false
	})
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("relay killed with %d events in processing", inFlight)
	if log := logs.String(); !strings.Contains(log, "nats JetStream 127.0.0.1:") || !strings.Contains(log, "subject ") ||
		!strings.Contains(log, `publish="in batches of up to 16 (1 publishers)"`) {
		t.Fatalf("the relay does not say at start where and how it publishes (in batches, at most --concurrency):\n%s", log)
	}

	logs, _ = startRelayLogged(t, relay...)
	waitFor(t, "two thirds of the events done", 60*time.Second, func() bool { return outbox(t, s).Done >= 2*n/3 })
	srv.Stop()
	waitFor(t, "the relay to see the connection cut", 10*time.Second, func() bool {
		return strings.Contains(logs.String(), "nats: connection lost")
	})
	time.Sleep(300 * time.Millisecond) // the relay's publishes fail meanwhile
	srv.Start()

	producing.Wait()
	waitFor(t, "every event done and applied", 90*time.Second, func() bool {
		rows, _ := consumer.applied(t)
		return outbox(t, s).Done == n && rows >= n
	})
	time.Sleep(500 * time.Millisecond) // a late duplicate would show now
	rows, twice := consumer.applied(t)
	st1 := status(t, db)
	if rows != n || twice != 0 || st1["pending"]+st1["processing"]+st1["failed"] != 0 {
		t.Fatalf("%d rows applied, %d events twice, outbox %v; want %d rows, none twice, all done", rows, twice, st1, n)
	}
	ids := natstest.MessageIDs(t, st)
	for id, count := range ids {
		if count != 1 {
			t.Fatalf("the stream holds event %s %d times", id, count)
		}
	}
	if len(ids) != n {
		t.Fatalf("the stream holds %d events, want %d", len(ids), n)
	}
}

// --publish-batch is refused for a sink that publishes one event at a
// time, rather than ignored.
func TestPublishBatchRefusedForWebhooks(t *testing.T) {
	_, db := schemaStore(t)
	out, err := command(append([]string{"relay", "--webhook-url", "http://127.0.0.1:9/hook", "--webhook-secret", secret, "--publish-batch", "8"}, db...)...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "--publish-batch 8: this sink publishes one event at a time") {
		t.Fatalf("relay --publish-batch 8 with a webhook: %v, %q; want the usage exit status 2, saying why", err, out)
	}
}

// Without a stream for the subject, the relay stops at start and says how
// to create one.
func TestNATSRelayWithoutStreamStops(t *testing.T) {
	_, db := schemaStore(t)
	subject := strings.ToLower(natstest.Name("nostream")) + ".{event_type}"
	cmd := command(append([]string{"relay", "--sink", natstest.URL() + "?subject=" + subject}, db...)...)
	last := runFails(t, cmd)
	if !strings.Contains(last, "does not exist; create it with: postbox sink setup --sink URL") || !strings.Contains(last, "duplicate window") {
		t.Fatalf("relay without a stream said %q", last)
	}
}

// The credentials come from $POSTBOX_SINK_USER and $POSTBOX_SINK_PASSWORD
// and are never logged.
func TestNATSRelayCredentialsFromEnvironment(t *testing.T) {
	const user, password = "relay", "n4ts-s3cret-pw"
	srv := natstest.StartServer(t, "--user", user, "--pass", password)
	authURL := strings.Replace(srv.URL, "nats://", "nats://"+user+":"+password+"@", 1)
	_, cons, sinkURL := natsStream(t, authURL)
	sinkURL = strings.Replace(sinkURL, user+":"+password+"@", "", 1)
	consumer := startNATSConsumer(t, cons, 0)
	s, db := schemaStore(t)

	withoutCredentials := command(append([]string{"relay", "--sink", sinkURL}, db...)...)
	if last := runFails(t, withoutCredentials); !strings.Contains(last, "uthorization") {
		t.Fatalf("relay without credentials said %q, want an authorization error", last)
	}

	logs := &logbuf.Buffer{}
	cmd := command(append([]string{"relay", "--sink", sinkURL, "--log-level", "debug"}, db...)...)
	cmd.Env = append(cmd.Env, "POSTBOX_SINK_USER="+user, "POSTBOX_SINK_PASSWORD="+password)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	insertArticleEvent(t, s, "1")
	waitFor(t, "the event applied", 20*time.Second, func() bool { rows, _ := consumer.applied(t); return rows == 1 })
	if strings.Contains(logs.String(), password) {
		t.Fatalf("the password appears in the relay's log:\n%s", logs)
	}
}

// The outgrow-one-machine story: a 3-node JetStream cluster, an R3 stream
// with a duplicate window, and `postbox relay` draining a backlog of
// clusterEvents into it through all three servers. The stream's leader is
// killed in the middle: the relay carries on by itself, and the stream
// ends with every event exactly once.
func TestNATSClusterLeaderKilledMidDrain(t *testing.T) {
	const n = clusterEvents
	nodes := natstest.StartCluster(t, 3)
	urls := make([]string, len(nodes))
	for i, node := range nodes {
		urls[i] = strings.TrimPrefix(node.URL, "nats://")
	}
	_, js := natstest.Connect(t, "nats://"+strings.Join(urls, ",nats://"))
	st, prefix := natstest.Stream(t, js, func(c *jetstream.StreamConfig) { c.Replicas = 3 })
	s, db := schemaStore(t)
	produce(t.Context(), t, s, 0, n, true)

	start := time.Now()
	sinkURL := "nats://" + strings.Join(urls, ",") + "?subject=" + prefix + ".{event_type}"
	logs, _ := startRelayLogged(t, append(db, "--sink", sinkURL, "--retention", "1h", "--timeout", "2s",
		"--backoff-min", "100ms", "--backoff-max", "1s")...)
	waitFor(t, "a third of the backlog published", 60*time.Second, func() bool { return outbox(t, s).Done >= n/3 })

	info, err := st.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	leader := info.Cluster.Leader
	killedAt := outbox(t, s).Done
	var killed *natstest.Server
	for _, node := range nodes {
		if node.Name == leader {
			killed = node
		}
	}
	killed.Stop()
	t.Logf("killed the stream leader %s with %d of %d events done, after %s", leader, killedAt, n, time.Since(start).Round(time.Millisecond))

	waitFor(t, "every event done", 120*time.Second, func() bool {
		o := outbox(t, s)
		if o.Failed > 0 {
			t.Fatalf("%d events failed", o.Failed)
		}
		return o.Done == n
	})
	t.Logf("drained %d events in %s", n, time.Since(start).Round(time.Millisecond))
	killed.Start() // as an operator would; the stream is read with all three nodes
	ids := natstest.MessageIDs(t, st)
	twice := 0
	for _, count := range ids {
		if count > 1 {
			twice++
		}
	}
	if len(ids) != n || twice != 0 {
		t.Fatalf("the stream holds %d distinct events, %d of them more than once; want %d, none twice", len(ids), twice, n)
	}
	// The node killed and started again catches up: its answer may lag
	// for a moment.
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err = st.Info(t.Context())
		if err == nil && info.State.Msgs == uint64(n) {
			break
		}
		if time.Now().After(deadline) {
			if err != nil {
				t.Fatalf("stream info: %v", err)
			}
			t.Fatalf("the stream holds %d messages, want %d", info.State.Msgs, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The relay either retried the publishes that failed, or (when they
	// all failed alike) paused on a sink outage and probed.
	if log := logs.String(); !strings.Contains(log, "unavailable: nats:") && !strings.Contains(log, "sink unreachable: nats:") {
		t.Fatalf("the relay's log shows no publish failing while the leader was down: the kill did not matter\n%s", logs)
	}
}
