package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/relay"
)

// bloatRatioGoal is the goal for the partitioned outbox: its drain
// under a snapshot held from before the backlog, over its drain without.
const bloatRatioGoal = 0.9

// errHistoryNeedsPostgres refuses bloat and retention on SQLite and MySQL:
// their outboxes are never partitioned (and SQLite has no snapshots that
// hold dead rows back).
var errHistoryNeedsPostgres = errors.New("needs PostgreSQL (MVCC snapshots, partitions)")

// runBloat drains, on the plain outbox then on a partitioned one, a
// backlog with nothing else open, then an identical backlog while a
// REPEATABLE READ transaction that read the outbox before the backlog was
// written stays open: every row the drain deletes stays behind as a dead
// tuple that no vacuum may remove while that snapshot lives, and the
// relay's claims must not slow down by scanning them. Each drain is the
// relay library in process with its defaults, as `postbox relay` runs, to
// a no-op sink, in a fresh scratch outbox.
func runBloat(ctx context.Context, e *env, p *progress) error {
	b, ok := e.b.(*pgBackend)
	if !ok {
		return errHistoryNeedsPostgres
	}
	n := e.cfg.BloatEvents
	for _, l := range []outboxLayout{layoutPlain, layoutPartitioned} {
		free, err := bloatDrain(ctx, e, p, b, l, false, n)
		if err != nil {
			return err
		}
		held, err := bloatDrain(ctx, e, p, b, l, true, n)
		if err != nil {
			return err
		}
		var goal *Goal
		if l == layoutPartitioned {
			goal = atLeast(bloatRatioGoal)
		}
		r := e.rep
		r.add(ScenarioBloat, "bloat."+l.String()+"_free", l.describe()+": drain, no transaction open", free, UnitEventsPerSec, nil)
		r.add(ScenarioBloat, "bloat."+l.String()+"_held", l.describe()+": drain, a REPEATABLE READ snapshot from before the backlog open", held, UnitEventsPerSec, nil)
		r.add(ScenarioBloat, "bloat."+l.String()+"_ratio", l.describe()+": drain with the snapshot open / without", held/free, UnitRatio, goal)
	}
	return nil
}

// bloatDrain fills a fresh outbox laid out as l with n events and drains
// it with the relay library to a no-op sink, and returns the rate. With
// held, a REPEATABLE READ transaction reads the empty outbox before the
// fill and stays open until the drain is over; the drain fails unless
// that transaction still sees the outbox as it was (its snapshot held).
func bloatDrain(ctx context.Context, e *env, p *progress, b *pgBackend, l outboxLayout, held bool, n int) (float64, error) {
	label, what := "bloat_"+l.String()+"_free", "the relay library, "+l.describe()
	if held {
		label, what = "bloat_"+l.String()+"_held", what+", a snapshot held"
	}
	sc, err := b.newLayoutScratch(ctx, label, l, 0)
	if err != nil {
		return 0, err
	}
	var snap *heldSnapshot
	if held {
		if snap, err = sc.holdSnapshot(ctx); err != nil {
			return 0, err
		}
		// Released before the schema is dropped: its read holds a lock
		// on the outbox that DROP would wait for.
		defer snap.release()
		p.printf("holding a REPEATABLE READ snapshot of %s (it reads %d events)", sc.name(), snap.seen)
	}
	if err := fillBacklog(ctx, p, sc, n); err != nil {
		return 0, err
	}
	sk := &noopSink{}
	d, err := libraryDrain(ctx, p, what, sc.outbox(), relay.Config{Sink: sk}, sk.n.Load, n)
	if err != nil {
		return 0, err
	}
	if held {
		if err := snap.check(ctx); err != nil {
			return 0, err
		}
		snap.release()
	}
	if err := e.release(ctx, sc); err != nil {
		return 0, err
	}
	p.printf("%s drained %d events in %s: %.0f events/s", what, n, d.Round(time.Millisecond), rate(n, d))
	return rate(n, d), nil
}

// outboxLayout is how a scratch outbox's events table is laid out.
type outboxLayout int

const (
	// layoutPlain is the outbox `postbox migrate` makes.
	layoutPlain outboxLayout = iota
	// layoutPartitioned is the outbox `postbox migrate --partitioned`
	// makes: outbox_events partitioned by ranges of ids (time).
	layoutPartitioned
)

func (l outboxLayout) String() string {
	if l == layoutPartitioned {
		return "partitioned"
	}
	return "plain"
}

// describe names the layout in the report.
func (l outboxLayout) describe() string {
	if l == layoutPartitioned {
		return "partitioned outbox"
	}
	return "plain outbox"
}

// heldSnapshot is a REPEATABLE READ transaction, read only, whose snapshot
// a read of the outbox table took: until it ends, no row deleted after it
// began can be vacuumed, in any table of the database.
type heldSnapshot struct {
	conn  *pgxpool.Conn
	tx    pgx.Tx
	count string
	// seen is how many events the first read counted.
	seen  int64
	ended bool
}

// holdSnapshot begins a heldSnapshot on a connection of its own.
func (s *pgScratch) holdSnapshot(ctx context.Context) (*heldSnapshot, error) {
	conn, err := s.b.workPool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	h := &heldSnapshot{conn: conn, count: s.sql(pgCountEvents)}
	h.tx, err = conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err == nil {
		err = h.tx.QueryRow(ctx, h.count).Scan(&h.seen)
	}
	if err != nil {
		h.release()
		return nil, fmt.Errorf("hold a snapshot of %s: %w", s.schema, err)
	}
	return h, nil
}

// check reads the outbox again through the snapshot: it must count what
// it counted first, whatever was written and deleted since.
func (h *heldSnapshot) check(ctx context.Context) error {
	var n int64
	if err := h.tx.QueryRow(ctx, h.count).Scan(&n); err != nil {
		return fmt.Errorf("the held snapshot: %w", err)
	}
	if n != h.seen {
		return fmt.Errorf("the held snapshot counts %d events, it counted %d when it began: it was not held", n, h.seen)
	}
	return nil
}

// release ends the transaction; it may be called again.
func (h *heldSnapshot) release() {
	if h.ended {
		return
	}
	h.ended = true
	if h.tx != nil {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		_ = h.tx.Rollback(ctx)
		cancel()
	}
	h.conn.Release()
}
