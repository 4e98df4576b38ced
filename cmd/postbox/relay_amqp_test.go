package main_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
	inboxamqp "github.com/postbox-go/postbox/inbox/amqp"
	"github.com/postbox-go/postbox/postboxtest/amqptest"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
)

// amqpSinkURL is the --sink of a relay publishing to exchange, without
// credentials: they come from the environment (amqpRelay).
func amqpSinkURL(exchange string) string {
	u, err := url.Parse(amqptest.URL())
	if err != nil {
		panic(err)
	}
	u.User = nil
	return u.String() + "?exchange=" + exchange + "&routing_key={event_type}"
}

// amqpRelay starts `postbox relay --sink amqp://...` until the test ends,
// with the broker's credentials in $POSTBOX_SINK_USER and
// $POSTBOX_SINK_PASSWORD, and returns its log and process id.
func amqpRelay(t *testing.T, db []string, exchange string, extra ...string) (*logbuf.Buffer, *exec.Cmd) {
	t.Helper()
	u, _ := url.Parse(amqptest.URL())
	password, _ := u.User.Password()
	logs := &logbuf.Buffer{}
	cmd := command(append(append([]string{"relay", "--retention", "1h", "--sink", amqpSinkURL(exchange)}, db...), extra...)...)
	cmd.Env = append(cmd.Env, "POSTBOX_SINK_USER="+u.User.Username(), "POSTBOX_SINK_PASSWORD="+password)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("relay %d log:\n%s", cmd.Process.Pid, logs)
		}
	})
	return logs, cmd
}

// relayConnection is the connection name of the relay process pid.
func relayConnection(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("postbox relay on %s pid %d", host, pid)
}

// Events written by plain SQL reach a PostgreSQL inbox through `postbox
// relay --sink amqp://...` and a durable quorum queue, each applied exactly
// once, through a handler that fails 30% of the time, a relay killed with
// SIGKILL mid-batch and restarted, and the relay's and the consumer's
// connections cut by the server.
func TestRelayAMQPExactlyOnceThroughFaults(t *testing.T) {
	const n = 3000
	producer, db := schemaStore(t)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	queue := srv.Queue(exchange, "order.*", nil)
	if _, err := producer.Pool().Exec(t.Context(),
		"insert into "+producer.Table("outbox_events")+" (aggregate_type, aggregate_id, event_type, payload) "+
			"select 'order', g::text, 'order.created', json_build_object('order_id', g)::jsonb from generate_series(1, $1) g", n); err != nil {
		t.Fatal(err)
	}
	consumer := amqptest.NewApplied(t)
	consumerName := amqptest.Name("pbtest_consumer")
	var failures atomic.Int64
	inboxConsumer, err := inboxamqp.New(inboxamqp.Config{
		URL: amqptest.URL(), Queue: queue,
		Process: consumer.Inbox.Processor(func(ctx context.Context, tx pgx.Tx, ev *inbox.Event) error {
			if err := consumer.Apply(ctx, tx, ev); err != nil {
				return err
			}
			if rand.Float64() < 0.3 {
				failures.Add(1)
				return errors.New("the handler failed (30% of the time)")
			}
			return nil
		}),
		ConnectionName: consumerName, RedeliveryMin: 5 * time.Millisecond, RedeliveryMax: 100 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stopConsumer := context.WithCancel(context.Background())
	consumed := make(chan error, 1)
	go func() { consumed <- inboxConsumer.Run(ctx) }()
	defer func() {
		stopConsumer()
		if err := <-consumed; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// One batch of every event, published 4 at a time: killed mid-batch.
	logs, first := amqpRelay(t, db, exchange, "--lease", "1s", "--batch", fmt.Sprint(n), "--concurrency", "4")
	waitFor(t, "some events applied", 30*time.Second, func() bool { return len(consumer.Counts(t)) >= 50 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if st := status(t, db); st["processing"] == 0 {
		t.Fatalf("the killed relay left nothing in processing (%v): it was not killed mid-batch", st)
	}
	log := logs.String()
	for _, want := range []string{"relay started", `rabbitmq amqp://127.0.0.1:5672 vhost \"/\" exchange \"` + exchange} {
		if !strings.Contains(log, want) {
			t.Errorf("the relay's log lacks %s:\n%s", want, log)
		}
	}

	_, second := amqpRelay(t, db, exchange, "--lease", "1s", "--batch", "200", "--backoff-min", "100ms", "--backoff-max", "1s")
	waitFor(t, "the second relay publishing", 30*time.Second, func() bool { return len(consumer.Counts(t)) >= n/2 })
	if got := amqptest.CloseConnections(t, relayConnection(second.Process.Pid), "test cut"); got != 1 {
		t.Fatalf("closed %d connections of the relay, want 1", got)
	}
	if got := amqptest.CloseConnections(t, consumerName, "test cut"); got != 1 {
		t.Fatalf("closed %d connections of the consumer, want 1", got)
	}

	waitFor(t, "every event done in the outbox", 120*time.Second, func() bool { return status(t, db)["done"] == n })
	waitFor(t, "every event applied", 120*time.Second, func() bool { return len(consumer.Counts(t)) == n })
	waitFor(t, "the queue empty", 30*time.Second, func() bool { return srv.Count(queue) == 0 })
	if st := status(t, db); st["pending"] != 0 || st["processing"] != 0 || st["failed"] != 0 {
		t.Fatalf("outbox after the drain: %v", st)
	}
	for id, times := range consumer.Counts(t) {
		if times != 1 {
			t.Errorf("event %s applied %d times", id, times)
		}
	}
	var lost int
	if err := producer.Pool().QueryRow(t.Context(), "select count(*) from "+producer.Table("outbox_events")+" o where not exists (select 1 from "+consumer.Table+" a where a.event_id = o.id)").Scan(&lost); err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Fatalf("%d events of the outbox never applied", lost)
	}
	if failures.Load() == 0 {
		t.Fatal("the handler never failed: the test did not test redelivery")
	}
}

// A missing exchange stops the relay at start, with one line that names
// it and its vhost and shows no password.
func TestRelayAMQPMissingExchange(t *testing.T) {
	_, db := schemaStore(t)
	amqptest.Connect(t)
	exchange := amqptest.Name("pbtest_missing")
	out := runFails(t, command(append([]string{"relay", "--sink", strings.Replace(amqpSinkURL(exchange), "amqp://", "amqp://guest:guest@", 1)}, db...)...))
	for _, want := range []string{exchange, `vhost "/"`, "does not exist"} {
		if !strings.Contains(out, want) {
			t.Errorf("error %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "guest:guest") {
		t.Errorf("error %q shows the password", out)
	}
}

// Credentials come from the environment when the URL has none, and a
// refused password is a clear error that does not show it.
func TestRelayAMQPCredentialsFromEnvironment(t *testing.T) {
	_, db := schemaStore(t)
	srv := amqptest.Connect(t)
	exchange := srv.Exchange()
	cmd := command(append([]string{"relay", "--sink", amqpSinkURL(exchange)}, db...)...)
	cmd.Env = append(cmd.Env, "POSTBOX_SINK_USER=guest", "POSTBOX_SINK_PASSWORD=not-the-password-"+uuid.NewString())
	out := runFails(t, cmd)
	if !strings.Contains(out, "amqp://127.0.0.1:5672") || strings.Contains(out, "not-the-password") {
		t.Errorf("a refused password: %q, want an error naming the server, without the password", out)
	}
}

// A bad --sink URL is a usage error that names what is wrong.
func TestRelayAMQPBadURL(t *testing.T) {
	_, db := schemaStore(t)
	out, err := command(append([]string{"relay", "--sink", "amqp://u:secret-pw@127.0.0.1/?exchange=x&routing_kye={event_type}"}, db...)...).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("relay with a bad --sink: %v, want the usage exit status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "routing_kye") || strings.Contains(string(out), "secret-pw") {
		t.Errorf("bad URL: %q, want it to name the parameter and hide the password", out)
	}
}
