package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"modernc.org/sqlite"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// HistoryRead returns up to p.Limit delivered events that p.Filter lets
// through, in id order after p.After (see store.History). A row that a
// plain-SQL producer wrote with a value the store cannot read as the
// event's (a time that is not one, text that is a blob, headers that are
// no JSON object) is returned with that field zero: it never fails the
// read. The whole filter, the types' globs too (path.Match, run by the
// SQL function postbox_types_match), is applied by one statement, so a
// call reads one page whatever the globs.
func (s *Store) HistoryRead(ctx context.Context, p store.HistoryParams) ([]store.HistoryEvent, error) {
	out, err := sqlstore.ReadHistory(ctx, historySQL{s}, p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: read history: %w", err)
	}
	return out, nil
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
	CreatedAt     *int64    `json:"created_at,omitempty"`
}

// requeueJSON is the JSON array of the rows the tables can hold, and of
// the ids of them all.
func requeueJSON(rows []sqlstore.RequeueRow) (events, ids string, err error) {
	list := make([]requeueEvent, 0, len(rows))
	idList := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		idList[i] = r.ID
		if !r.Insertable {
			continue
		}
		ev := requeueEvent{ID: r.ID, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
			EventType: r.EventType, Payload: string(r.Payload), Headers: r.HeadersJSON}
		if !r.CreatedAt.IsZero() {
			at := r.CreatedAt.UnixMicro()
			ev.CreatedAt = &at
		}
		list = append(list, ev)
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", "", err
	}
	i, err := json.Marshal(idList)
	return string(b), string(i), err
}

// RequeueKept requeues the delivered events HistoryRead would return for
// p (see store.History) in one statement, requeue_kept_page: the page is
// history_read's very statement, updated where it is, no event read out
// (a replay of 100,000 kept events read each page whole and wrote it back
// as JSON: 12 s, against under 1 s for the update). It wakes this Store's
// listeners, as Requeue does.
func (s *Store) RequeueKept(ctx context.Context, p store.HistoryParams, replay string) (store.RequeueKeptResult, error) {
	if err := sqlstore.CheckHistory(p); err != nil {
		return store.RequeueKeptResult{}, fmt.Errorf("sqlite: requeue kept: %w", err)
	}
	if problem := sqlstore.TextProblem(replay); problem != "" {
		return store.RequeueKeptResult{}, errors.New("sqlite: requeue kept: the replay's name " + problem)
	}
	args := append(historyArgs(p.Filter, p.After, p.After == uuid.Nil && !p.Resume, p.Limit),
		sql.Named("now", time.Now().UnixMicro()), sql.Named("replay", replay), sql.Named("header", postbox.HeaderReplay))
	var res store.RequeueKeptResult
	var last string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, s.requeueKeptSQL(), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				return err
			}
			res.Read++
			last = max(last, id) // ids are canonical text (the table's check): text order is id order
		}
		return rows.Err()
	})
	if err != nil {
		return store.RequeueKeptResult{}, fmt.Errorf("sqlite: requeue kept: %w", err)
	}
	if res.Read == 0 {
		return res, nil
	}
	if res.Last, err = uuid.Parse(last); err != nil {
		return store.RequeueKeptResult{}, fmt.Errorf("sqlite: requeue kept: last id %q: %w", last, err)
	}
	res.Requeued = res.Read
	s.Notify() // updated rows wake no relay by themselves
	return res, nil
}

// requeueKeptSQL is requeue_kept_page with history_read's statement as its
// page: the events RequeueKept requeues are those HistoryRead returns.
func (s *Store) requeueKeptSQL() string {
	page := strings.TrimSuffix(strings.TrimSpace(s.sql.Get("history_read")), ";")
	return strings.Replace(s.sql.Get("requeue_kept_page"), "{history_read}", page, 1)
}

// Requeue sends events back to the queue as replays, in one write
// transaction (see store.History), and wakes this Store's listeners (relays
// of other processes find them by polling). An event the table cannot hold
// (a plain-SQL producer's row may have held text that is not UTF-8 or
// holds NUL) is requeued when its row is kept, and skipped when it is
// gone.
func (s *Store) Requeue(ctx context.Context, events []store.HistoryEvent, replay string) (store.RequeueResult, error) {
	rows, dups, err := sqlstore.PrepareRequeue(events, replay)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("sqlite: requeue: %w", err)
	}
	res := store.RequeueResult{Skipped: dups}
	if len(rows) == 0 {
		return res, nil
	}
	list, ids, err := requeueJSON(rows)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("sqlite: requeue: %w", err)
	}
	now := sql.Named("now", time.Now().UnixMicro())
	var requeued, inserted int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		requeued, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get("requeue_kept"), sql.Named("ids", ids), now, sql.Named("replay", replay),
			sql.Named("header", postbox.HeaderReplay)))
		if err != nil {
			return err
		}
		inserted, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get("requeue_insert"), sql.Named("events", list), now))
		return err
	})
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("sqlite: requeue: %w", err)
	}
	if requeued > 0 {
		s.Notify() // the inserted rows woke them at the commit; the updated ones do not
	}
	res.Requeued, res.Inserted = int(requeued), int(inserted)
	res.Skipped += len(rows) - res.Requeued - res.Inserted
	return res, nil
}

// EndpointRequeue sends events to one endpoint again as replays, in one
// write transaction (see store.Endpoints): package endpoint's poll finds
// them due.
func (s *Store) EndpointRequeue(ctx context.Context, endpoint uuid.UUID, events []store.HistoryEvent, replay string) (store.RequeueResult, error) {
	rows, dups, err := sqlstore.PrepareRequeue(events, replay)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("sqlite: requeue to endpoint %s: %w", endpoint, err)
	}
	list, ids, err := requeueJSON(rows)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("sqlite: requeue to endpoint %s: %w", endpoint, err)
	}
	now := time.Now().UnixMicro()
	var found bool
	var requeued, inserted int64
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, s.sql.Get("endpoint_requeue_exists"), endpoint).Scan(&found); err != nil || !found {
			return err
		}
		var err error
		requeued, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get("endpoint_requeue_finished"), endpoint, ids, now, replay, postbox.HeaderReplay))
		if err != nil {
			return err
		}
		inserted, err = rowsAffected(tx.ExecContext(ctx, s.sql.Get("endpoint_requeue_insert"), endpoint, list, now))
		return err
	})
	switch {
	case err != nil:
		return store.RequeueResult{}, fmt.Errorf("sqlite: requeue to endpoint %s: %w", endpoint, err)
	case !found:
		return store.RequeueResult{}, fmt.Errorf("sqlite: endpoint %s: %w", endpoint, store.ErrEndpointNotFound)
	}
	return store.RequeueResult{Requeued: int(requeued), Inserted: int(inserted), Skipped: dups + len(rows) - int(requeued) - int(inserted)}, nil
}

// historySQL runs history_read for sqlstore.ReadHistory.
type historySQL struct{ s *Store }

func (h historySQL) ReadHistory(ctx context.Context, f store.HistoryFilter, after uuid.UUID, first bool, limit int) ([]store.HistoryEvent, error) {
	rows, err := h.s.db.QueryContext(ctx, h.s.sql.Get("history_read"), historyArgs(f, after, first, limit)...)
	return scanHistory(rows, err)
}

// historyArgs are history_read's parameters: the page of up to limit rows
// f lets through after after (from the first when first).
func historyArgs(f store.HistoryFilter, after uuid.UUID, first bool, limit int) []any {
	afterText := "" // less than every id
	if !first {
		afterText = after.String()
	}
	var types any // null: every type
	if len(f.EventTypes) > 0 {
		types = typesList(f.EventTypes)
	}
	return []any{sql.Named("after", afterText), sql.Named("since", nullMicros(f.Since)), sql.Named("until", nullMicros(f.Until)),
		sql.Named("aggregate_type", f.AggregateType), sql.Named("aggregate_id", f.AggregateID),
		sql.Named("types", types), sql.Named("limit", limit)}
}

// typesList is the globs of a HistoryFilter as postbox_types_match takes
// them: each quoted (strconv.Quote keeps every byte, valid UTF-8 or not),
// one a line.
func typesList(globs []string) string {
	quoted := make([]string, len(globs))
	for i, g := range globs {
		quoted[i] = strconv.Quote(g)
	}
	return strings.Join(quoted, "\n")
}

// The SQL function postbox_types_match(list, type) of history_read: 1
// when one of the globs of list (typesList) matches the type
// (path.Match), read as HistoryRead reads it (a value that is not text is
// the empty type), else 0. It is registered with modernc.org/sqlite's
// driver, for every connection it opens.
func init() {
	sqlite.MustRegisterDeterministicScalarFunction("postbox_types_match", 2, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
		list, ok := args[0].(string)
		if !ok {
			return nil, errors.New("postbox_types_match: the list of globs is not text")
		}
		eventType, _ := textValue(args[1])
		for _, line := range strings.Split(list, "\n") {
			g, err := strconv.Unquote(line)
			if err != nil {
				return nil, fmt.Errorf("postbox_types_match: %w", err)
			}
			if ok, _ := path.Match(g, eventType); ok {
				return int64(1), nil
			}
		}
		return int64(0), nil
	})
}

// nullMicros is t in Unix microseconds, or NULL for the zero time.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

// scanHistory reads the rows of history_read or expire_read and closes
// them. Columns that may hold a value of another type (SQLite keeps what
// it was given) scan as any, and read as zero when they hold no value an
// event may have; text that is not valid UTF-8 is kept as it is.
func scanHistory(rows *sql.Rows, err error) ([]store.HistoryEvent, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.HistoryEvent
	for rows.Next() {
		var ev store.HistoryEvent
		var seq, aggType, aggID, eventType, payload, dedupKey, headers, created, processed any
		if err := rows.Scan(&ev.ID, &seq, &aggType, &aggID, &eventType, &payload, &dedupKey, &headers, &created, &processed); err != nil {
			return nil, err
		}
		ev.OutboxSeq, _ = integerValue(seq)
		ev.AggregateType, _ = textValue(aggType)
		ev.AggregateID, _ = textValue(aggID)
		ev.EventType, _ = textValue(eventType)
		ev.DedupKey, _ = textValue(dedupKey)
		text, _ := textValue(payload)
		ev.Payload = []byte(text)
		text, _ = textValue(headers)
		ev.Headers, _ = sqlstore.DecodeHeaders([]byte(text))
		ev.CreatedAt, _ = timeValue(created)
		ev.ProcessedAt, _ = timeValue(processed)
		out = append(out, ev)
	}
	return out, rows.Err()
}

// expireSQL runs the retention statements for sqlstore.Expire, each in a
// write transaction of its own.
type expireSQL struct{ s *Store }

func (e expireSQL) ReadExpired(ctx context.Context, before time.Time, limit int) ([]store.HistoryEvent, error) {
	return scanHistory(e.s.db.QueryContext(ctx, e.s.sql.Get("expire_read"),
		sql.Named("before", before.UnixMicro()), sql.Named("limit", limit)))
}

func (e expireSQL) DeleteExpired(ctx context.Context, ids []uuid.UUID) (int, error) {
	return e.s.exec(ctx, "expire_delete", idList(ids))
}

func (e expireSQL) PurgeDone(ctx context.Context, before time.Time, limit int) (int, error) {
	return e.s.exec(ctx, "purge_done", sql.Named("before", before.UnixMicro()), sql.Named("limit", limit))
}

func (e expireSQL) PurgeHeldKeys(ctx context.Context, limit int) (int, error) {
	return e.s.exec(ctx, "purge_held_keys", sql.Named("now", time.Now().UnixMicro()), sql.Named("limit", limit))
}

var (
	_ sqlstore.HistorySQL = historySQL{}
	_ sqlstore.ExpireSQL  = expireSQL{}
)
