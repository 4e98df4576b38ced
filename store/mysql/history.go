package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// HistoryRead returns up to p.Limit delivered events that p.Filter lets
// through, in id order after p.After (see store.History). A row that a
// plain-SQL producer wrote with a value the store cannot read as the
// event's (a zero date, headers that are no JSON object) is returned with
// that field zero: it never fails the read.
//
// MySQL has no function that runs Go's path.Match: the statement applies
// the filter but the types' globs, which the store applies to the rows it
// reads, reading further pages until it has p.Limit events or none is
// left. Paging by id stays exact; a filter whose globs match few of the
// done events reads more of them.
func (s *Store) HistoryRead(ctx context.Context, p store.HistoryParams) ([]store.HistoryEvent, error) {
	out, err := sqlstore.ReadHistory(ctx, historySQL{s}, p)
	if err != nil {
		return nil, fmt.Errorf("mysql: read history: %w", err)
	}
	return out, nil
}

// RequeueKept requeues the delivered events HistoryRead would return for
// p (see store.History): HistoryRead, then Requeue of what it read, which
// wakes this Store's listeners.
func (s *Store) RequeueKept(ctx context.Context, p store.HistoryParams, replay string) (store.RequeueKeptResult, error) {
	return sqlstore.RequeueKept(ctx, s, p, replay)
}

// requeueEvent is one element of requeue_insert's and
// endpoint_requeue_insert's JSON array.
type requeueEvent struct {
	ID            uuid.UUID `json:"id"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	EventType     string    `json:"event_type"`
	Payload       string    `json:"payload"`
	Headers       string    `json:"headers"`
	CreatedAt     *string   `json:"created_at,omitempty"`
}

// requeueJSON is the JSON array of the rows the tables can hold, and of
// the ids of them all.
func requeueJSON(rows []sqlstore.RequeueRow) (events, ids sql.NamedArg, err error) {
	list := make([]requeueEvent, 0, len(rows))
	idSlice := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		idSlice[i] = r.ID
		if !r.Insertable {
			continue
		}
		ev := requeueEvent{ID: r.ID, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
			EventType: r.EventType, Payload: string(r.Payload), Headers: r.HeadersJSON}
		if !r.CreatedAt.IsZero() {
			at := jsonTime(r.CreatedAt)
			ev.CreatedAt = &at
		}
		list = append(list, ev)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return events, ids, err
	}
	return sql.Named("events", string(b)), idList(idSlice), nil
}

// Requeue sends events back to the queue as replays, in one transaction
// (see store.History), and wakes this Store's listeners. An event the table
// cannot hold (text that holds NUL, a payload that is not JSON) is
// requeued when its row is kept, and skipped when it is gone.
func (s *Store) Requeue(ctx context.Context, events []store.HistoryEvent, replay string) (store.RequeueResult, error) {
	rows, dups, err := sqlstore.PrepareRequeue(events, replay)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("mysql: requeue: %w", err)
	}
	res := store.RequeueResult{Skipped: dups}
	if len(rows) == 0 {
		return res, nil
	}
	list, ids, err := requeueJSON(rows)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("mysql: requeue: %w", err)
	}
	now := sql.Named("now", time.Now().UTC())
	var requeued, inserted int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		requeued, err = s.execN(ctx, tx, "requeue_kept", ids, now, sql.Named("replay", replay),
			sql.Named("header", postbox.HeaderReplay))
		if err != nil {
			return err
		}
		inserted, err = s.execN(ctx, tx, "requeue_insert", list, now)
		return err
	})
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("mysql: requeue: %w", err)
	}
	if requeued+inserted > 0 {
		s.Notify()
	}
	res.Requeued, res.Inserted = int(requeued), int(inserted)
	res.Skipped += len(rows) - res.Requeued - res.Inserted
	return res, nil
}

// historySQL runs history_read for sqlstore.ReadHistory.
type historySQL struct{ s *Store }

// ReadHistory reads pages of history_read and keeps the rows whose type
// one of f's globs matches, until it has limit of them or the pages end.
func (h historySQL) ReadHistory(ctx context.Context, f store.HistoryFilter, after uuid.UUID, first bool, limit int) ([]store.HistoryEvent, error) {
	afterText := "" // less than every id
	if !first {
		afterText = after.String()
	}
	var out []store.HistoryEvent
	for {
		page, err := scanHistory(h.s.query(ctx, h.s.db, "history_read", sql.Named("after", afterText),
			sql.Named("since", nullTime(f.Since)), sql.Named("until", nullTime(f.Until)),
			sql.Named("aggregate_type", f.AggregateType), sql.Named("aggregate_id", f.AggregateID),
			sql.Named("limit", limit)))
		if err != nil {
			return nil, err
		}
		for _, ev := range page {
			if typeMatches(f.EventTypes, ev.EventType) {
				out = append(out, ev)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if len(page) < limit {
			return out, nil
		}
		afterText = page[len(page)-1].ID.String()
	}
}

// typeMatches reports whether one of globs matches eventType
// (path.Match), or globs is empty: every type.
func typeMatches(globs []string, eventType string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, eventType); ok {
			return true
		}
	}
	return len(globs) == 0
}

// nullTime is t in UTC, or NULL for the zero time.
func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// scanHistory reads the rows of history_read or expire_read and closes
// them. Columns that hold no value an event may have read as zero.
func scanHistory(rows *sql.Rows, err error) ([]store.HistoryEvent, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HistoryEvent
	for rows.Next() {
		var ev store.HistoryEvent
		var aggType, aggID, eventType, dedupKey, headers []byte
		var created, processed sql.NullTime
		if err := rows.Scan(&ev.ID, &ev.OutboxSeq, &aggType, &aggID, &eventType, &ev.Payload, &dedupKey, &headers, &created, &processed); err != nil {
			return nil, err
		}
		ev.AggregateType, ev.AggregateID, ev.EventType, ev.DedupKey = string(aggType), string(aggID), string(eventType), string(dedupKey)
		ev.Headers, _ = sqlstore.DecodeHeaders(headers)
		ev.CreatedAt = anyTime(created)
		ev.ProcessedAt = anyTime(processed)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// expireSQL runs the retention statements for sqlstore.Expire, each in a
// transaction of its own.
type expireSQL struct{ s *Store }

func (e expireSQL) ReadExpired(ctx context.Context, before time.Time, limit int) ([]store.HistoryEvent, error) {
	return scanHistory(e.s.query(ctx, e.s.db, "expire_read", sql.Named("before", before.UTC()), sql.Named("limit", limit)))
}

func (e expireSQL) DeleteExpired(ctx context.Context, ids []uuid.UUID) (int, error) {
	return e.s.exec(ctx, "expire_delete", idList(ids))
}

func (e expireSQL) PurgeDone(ctx context.Context, before time.Time, limit int) (int, error) {
	return e.s.exec(ctx, "purge_done", sql.Named("before", before.UTC()), sql.Named("limit", limit))
}

func (e expireSQL) PurgeHeldKeys(ctx context.Context, limit int) (int, error) {
	return e.s.exec(ctx, "purge_held_keys", sql.Named("now", time.Now().UTC()), sql.Named("limit", limit))
}

var (
	_ sqlstore.HistorySQL = historySQL{}
	_ sqlstore.ExpireSQL  = expireSQL{}
)
