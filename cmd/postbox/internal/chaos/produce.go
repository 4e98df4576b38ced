package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store/postgres"
)

// Producers and aggregates: each producer owns its aggregates and writes
// their events one after the other, so that within an aggregate the
// sequence numbers follow the commit order.
const (
	producers             = 16
	aggregatesPerProducer = 8
	produceTimeout        = 5 * time.Second
)

// tables are the suite's business tables, in the run's schema, and the
// statements on them.
type tables struct {
	create []string
	// produced: one row per event, written in the event's transaction.
	insertProduced string
	// applied: one row per application of an event by the consumer of
	// a destination (no unique constraint: an event applied twice shows
	// as a second row); prev_seq is the last sequence number that
	// destination applied before it for the same aggregate.
	insertApplied    string
	lastSeqForUpdate string
	upsertLastSeq    string
	// plainInsert is the article's plain-SQL insert into the outbox.
	plainInsert string
	// reconciliation
	selectProduced, selectApplied string
	// endedUnfinished counts the unfinished events in range partitions
	// before the bound $1 (a partitioned outbox; $2 names its DEFAULT
	// partition): those the retention step about to drop their
	// partitions moves to the DEFAULT partition.
	endedUnfinished string
}

func newTables(s *postgres.Store) tables {
	produced, applied, lastSeq := s.Table("chaos_produced"), s.Table("chaos_applied"), s.Table("chaos_last_seq")
	return tables{
		create: []string{
			`create table ` + produced + ` (event_id uuid primary key, aggregate_id text not null, seq bigint not null,
				produced_at timestamptz not null, via text not null)`,
			`create table ` + applied + ` (destination int not null, event_id uuid not null, aggregate_id text not null,
				seq bigint not null, prev_seq bigint, applied_at timestamptz not null)`,
			`create table ` + lastSeq + ` (destination int not null, aggregate_id text not null, last_seq bigint not null,
				primary key (destination, aggregate_id))`,
		},
		insertProduced: `insert into ` + produced + ` (event_id, aggregate_id, seq, produced_at, via) values ($1, $2, $3, $4, $5)`,
		insertApplied: `insert into ` + applied + ` (destination, event_id, aggregate_id, seq, prev_seq, applied_at)
			values ($1, $2, $3, $4, $5, $6)`,
		lastSeqForUpdate: `select last_seq from ` + lastSeq + ` where destination = $1 and aggregate_id = $2 for update`,
		upsertLastSeq: `insert into ` + lastSeq + ` (destination, aggregate_id, last_seq) values ($1, $2, $3)
			on conflict (destination, aggregate_id) do update set last_seq = excluded.last_seq`,
		plainInsert: `insert into ` + s.Table("outbox_events") + ` (aggregate_type, aggregate_id, event_type, payload)
			values ('chaos', $1, 'chaos.step', $2) returning id`,
		selectProduced: `select event_id, produced_at from ` + produced + ` order by produced_at`,
		selectApplied: `select destination, event_id, count(*), min(applied_at), count(*) filter (where seq < prev_seq)
			from ` + applied + ` group by destination, event_id`,
		endedUnfinished: `select count(*) from ` + s.Table("outbox_events") + `
			where id < $1 and status <> 'done' and tableoid <> to_regclass($2)`,
	}
}

// producing counts what the producers did.
type producing struct {
	produced, errors atomic.Int64
	mu               sync.Mutex
	lastError        error
}

func (p *producing) failed(err error) {
	p.errors.Add(1)
	p.mu.Lock()
	p.lastError = err
	p.mu.Unlock()
}

// produce writes events at rate per second until ctx ends, one per
// transaction: every other one with the article's plain-SQL insert (the
// database chooses its id), the others through Store.Transact. A failed
// transaction (the database restarting) is counted and not retried: the
// reconciliation counts only what committed, from the database.
func (r *run) produce(ctx context.Context, rate int) {
	tokens := make(chan struct{}, producers)
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				select {
				case tokens <- struct{}{}:
				default: // the producers are behind (the database is down): the rate is best effort
				}
			}
		}
	})
	for w := range producers {
		wg.Go(func() {
			seqs := make([]int64, aggregatesPerProducer)
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-tokens:
				}
				a := n % aggregatesPerProducer
				seqs[a]++ // a failed commit's number is not reused: it may have committed
				aggregate := fmt.Sprintf("agg-%02d-%d", w, a)
				// A transaction begun runs to its end, even when
				// production stops meanwhile: the drain waits for the
				// producers, and must not miss an event whose commit
				// was still on its way when it looked.
				callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), produceTimeout)
				err := r.produceOne(callCtx, aggregate, seqs[a], n%2 == 0)
				cancel()
				if err == nil {
					r.producing.produced.Add(1)
				} else {
					r.producing.failed(err)
				}
			}
		})
	}
	wg.Wait()
}

// produceOne writes one event of aggregate with sequence number seq, and
// its produced row, in one transaction.
func (r *run) produceOne(ctx context.Context, aggregate string, seq int64, plainSQL bool) error {
	body, _ := json.Marshal(payload{Seq: seq})
	if plainSQL {
		return pgx.BeginFunc(ctx, r.store.Pool(), func(tx pgx.Tx) error {
			var id uuid.UUID
			if err := tx.QueryRow(ctx, r.tables.plainInsert, aggregate, body).Scan(&id); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, r.tables.insertProduced, id, aggregate, seq, time.Now(), "sql")
			return err
		})
	}
	return r.store.Transact(ctx, func(tx pgx.Tx, out *postgres.Outgoing) error {
		ev := postbox.Event{ID: postbox.NewID(), AggregateType: "chaos", AggregateID: aggregate,
			EventType: "chaos.step", Payload: body}
		if _, err := tx.Exec(ctx, r.tables.insertProduced, ev.ID, aggregate, seq, time.Now(), "transact"); err != nil {
			return err
		}
		return out.Add(ev)
	})
}
