package inbox_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// kept is an inbox on a fresh schema, with helpers to write rows of every
// status and to age them.
type kept struct {
	t     *testing.T
	store *postgres.Store
	ib    *inbox.Inbox[pgx.Tx]
}

func newKept(t *testing.T) *kept {
	t.Helper()
	s := pgtest.Store(t)
	return &kept{t: t, store: s, ib: inbox.New(s.Driver())}
}

// done writes a done row, processed age ago.
func (k *kept) done(age time.Duration) uuid.UUID {
	k.t.Helper()
	ev := event("order.created", `{}`)
	if _, err := k.ib.Process(context.Background(), ev, func(context.Context, pgx.Tx, *inbox.Event) error { return nil }); err != nil {
		k.t.Fatal(err)
	}
	k.age(ev.ID, age)
	return ev.ID
}

// failed writes a failed row (a rejected event), received age ago.
func (k *kept) failed(age time.Duration) uuid.UUID {
	k.t.Helper()
	ev := event("order.created", `{}`)
	_, err := k.ib.Process(context.Background(), ev, func(context.Context, pgx.Tx, *inbox.Event) error {
		return inbox.Reject(errors.New("bad order"))
	})
	if !errors.Is(err, inbox.ErrRejected) {
		k.t.Fatalf("Process: %v, want a rejection", err)
	}
	k.age(ev.ID, age)
	return ev.ID
}

// pending writes a claimed row, received age ago.
func (k *kept) pending(age time.Duration) uuid.UUID {
	k.t.Helper()
	ev := event("payment.requested", `{}`)
	if _, err := k.ib.Claim(context.Background(), ev, time.Hour); err != nil {
		k.t.Fatal(err)
	}
	k.age(ev.ID, age)
	return ev.ID
}

// age moves a row's times age into the past.
func (k *kept) age(id uuid.UUID, age time.Duration) {
	k.t.Helper()
	_, err := k.store.Pool().Exec(context.Background(), "update "+k.store.Table("inbox_events")+
		" set received_at = received_at - $2::interval, processed_at = processed_at - $2::interval where id = $1", id, age)
	if err != nil {
		k.t.Fatal(err)
	}
}

// exists reports whether the row of id is still there.
func (k *kept) exists(id uuid.UUID) bool {
	k.t.Helper()
	_, err := k.ib.Get(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return false
	}
	if err != nil {
		k.t.Fatal(err)
	}
	return true
}

// run starts RunRetention with cfg, logging into the returned buffer; stop
// cancels it and returns its result, failing the test if it does not
// return within a second.
func (k *kept) run(cfg inbox.Retention) (logs *logbuf.Buffer, stop func() error) {
	k.t.Helper()
	logs = &logbuf.Buffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.t.Cleanup(cancel)
	ret := make(chan error, 1)
	go func() { ret <- k.ib.RunRetention(ctx, cfg) }()
	return logs, func() error {
		k.t.Helper()
		cancel()
		select {
		case err := <-ret:
			return err
		case <-time.After(time.Second):
			k.t.Fatal("RunRetention did not return within a second of its context ending")
			return nil
		}
	}
}

// waitFor polls cond for up to 5 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

const day = 24 * time.Hour

// Only done rows older than Keep go, in batches; failed and pending rows
// stay however old they are.
func TestRetentionDeletesOnlyDoneRowsOlderThanKeep(t *testing.T) {
	t.Parallel()
	k := newKept(t)
	var old []uuid.UUID
	for range 5 {
		old = append(old, k.done(3*day))
	}
	keep := map[string]uuid.UUID{
		"done, younger than Keep": k.done(day),
		"done just now":           k.done(0),
		"failed, old":             k.failed(30 * day),
		"pending, old":            k.pending(30 * day),
	}

	logs, stop := k.run(inbox.Retention{Keep: 2 * day, Every: time.Hour, Batch: 2})
	// Wait for the pass's log line, not for the rows: a row is gone as soon
	// as the last batch commits, before the pass has its count, and stopping
	// then would cut the pass short of its own report.
	waitFor(t, "the pass is logged", func() bool {
		return strings.Contains(logs.String(), "inbox retention: deleted done rows")
	})
	if err := stop(); err != nil {
		t.Fatalf("RunRetention: %v", err)
	}
	for _, id := range old {
		if k.exists(id) {
			t.Errorf("an old done row (%s) was kept", id)
		}
	}
	for name, id := range keep {
		if !k.exists(id) {
			t.Errorf("the %s row was deleted", name)
		}
	}
	// 5 rows in batches of 2: 2, 2, 1.
	if !strings.Contains(logs.String(), "msg=\"inbox retention: deleted done rows\" deleted=5 batches=3") {
		t.Errorf("the pass is not logged with 5 rows in 3 batches:\n%s", logs)
	}
}

// The zero Retention keeps rows for RetentionKeepDefault.
func TestRetentionDefaultKeep(t *testing.T) {
	t.Parallel()
	k := newKept(t)
	older := k.done(inbox.RetentionKeepDefault + time.Hour)
	younger := k.done(inbox.RetentionKeepDefault - time.Hour)
	_, stop := k.run(inbox.Retention{})
	waitFor(t, "the row older than the default is deleted", func() bool { return !k.exists(older) })
	if err := stop(); err != nil {
		t.Fatalf("RunRetention: %v", err)
	}
	if !k.exists(younger) {
		t.Error("a row younger than RetentionKeepDefault was deleted")
	}
}

// Passes repeat every Every: a row that ages past Keep while the run goes
// on is deleted by a later pass.
func TestRetentionRunsEveryPeriod(t *testing.T) {
	t.Parallel()
	k := newKept(t)
	id := k.done(0)
	logs, stop := k.run(inbox.Retention{Keep: day, Every: 20 * time.Millisecond})
	waitFor(t, "a pass found nothing", func() bool { return strings.Contains(logs.String(), "nothing to delete") })
	if !k.exists(id) {
		t.Fatal("a fresh done row was deleted")
	}
	k.age(id, 2*day)
	waitFor(t, "a later pass deletes the aged row", func() bool { return !k.exists(id) })
	if err := stop(); err != nil {
		t.Fatalf("RunRetention: %v", err)
	}
}

// RunRetention returns nil soon after its context ends, between passes as
// well as before the first.
func TestRetentionStopsWithContext(t *testing.T) {
	t.Parallel()
	k := newKept(t)
	_, stop := k.run(inbox.Retention{Every: time.Hour})
	time.Sleep(50 * time.Millisecond) // the first pass is over; the next is an hour away
	if err := stop(); err != nil {
		t.Fatalf("RunRetention: %v, want nil", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := k.ib.RunRetention(ctx, inbox.Retention{}); err != nil {
		t.Fatalf("RunRetention with an ended context: %v, want nil", err)
	}
}

// A failing pass is logged and the run goes on: once the database works,
// later passes succeed.
func TestRetentionLogsFailuresAndGoesOn(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	s, err := postgres.New(pool, postgres.Config{Schema: pgtest.Schema(t, pool)})
	if err != nil {
		t.Fatal(err)
	}
	ib := inbox.New(s.Driver()) // its tables do not exist yet: every delete fails
	k := &kept{t: t, store: s, ib: ib}
	logs, stop := k.run(inbox.Retention{Every: 20 * time.Millisecond})
	waitFor(t, "two failures are logged", func() bool {
		return strings.Count(logs.String(), "level=ERROR msg=\"inbox retention: pass failed; the next pass tries again\"") >= 2
	})
	if !strings.Contains(logs.String(), "inbox_events") {
		t.Errorf("the failure's cause is not logged:\n%s", logs)
	}

	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a pass succeeds", func() bool { return strings.Contains(logs.String(), "nothing to delete") })
	if err := stop(); err != nil {
		t.Fatalf("RunRetention: %v", err)
	}
}

func TestRetentionRefusesBadConfig(t *testing.T) {
	t.Parallel()
	ib := inbox.New(pgtest.Store(t).Driver())
	for field, cfg := range map[string]inbox.Retention{
		"Retention.Keep":  {Keep: -time.Hour},
		"Retention.Every": {Every: -time.Second},
		"Retention.Batch": {Batch: -1},
	} {
		err := ib.RunRetention(context.Background(), cfg) // returns at once
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%+v: %v, want an error naming %s", cfg, err, field)
		}
	}
}
