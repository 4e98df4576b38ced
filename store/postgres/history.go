package postgres

import (
	"context"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// HistoryRead returns up to p.Limit delivered events that p.Filter lets
// through, in id order after p.After (see store.History). A row that a
// plain-SQL producer wrote with a value the store cannot read as the
// event's (an infinite time, headers that are no JSON object) is returned
// with that field zero: it never fails the read. The whole filter, the
// types' globs too (translated to a regular expression: typesRegexp), is
// applied by one statement, so a call reads one page whatever the globs.
func (s *Store) HistoryRead(ctx context.Context, p store.HistoryParams) ([]store.HistoryEvent, error) {
	out, err := sqlstore.ReadHistory(ctx, historySQL{s}, p)
	if err != nil {
		return nil, fmt.Errorf("postgres: read history: %w", err)
	}
	return out, nil
}

// Requeue sends events back to the queue as replays, in one transaction
// (see store.History), and wakes the listening relays: the done rows are
// requeued by id (requeue_done: no payload travels back), then the events
// left, when some are, are written again where their rows are gone
// (requeue_insert). An event the table cannot hold (a plain-SQL
// producer's row may have held a payload with \u0000, a time out of years
// 1 to 9999) is requeued when its row is kept, and skipped when it is
// gone. A delivered event that a relay's claim still lists (within a
// lease period of its delivery) is claimed again once that claim ends.
func (s *Store) Requeue(ctx context.Context, events []store.HistoryEvent, replay string) (store.RequeueResult, error) {
	rows, dups, err := sqlstore.PrepareRequeue(events, replay)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("postgres: requeue: %w", err)
	}
	res := store.RequeueResult{Skipped: dups}
	if len(rows) == 0 {
		return res, nil
	}
	ids := make([][16]byte, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q, err := tx.Query(ctx, s.sql.Get("requeue_done"), ids, replay, postbox.HeaderReplay)
		if err != nil {
			return err
		}
		done, err := pgx.CollectRows(q, pgx.RowTo[uuid.UUID])
		if err != nil {
			return err
		}
		res.Requeued = len(done)
		requeued := make(map[uuid.UUID]bool, len(done))
		for _, id := range done {
			requeued[id] = true
		}
		var left []sqlstore.RequeueRow
		for _, r := range rows {
			if !requeued[r.ID] && r.Insertable {
				left = append(left, r)
			}
		}
		if len(left) == 0 {
			return nil
		}
		a := requeueArrays(left)
		created := make([]pgtype.Timestamptz, len(left))
		for i, r := range left {
			created[i] = pgtype.Timestamptz{Time: r.CreatedAt, Valid: !r.CreatedAt.IsZero()}
		}
		return tx.QueryRow(ctx, s.sql.Get("requeue_insert"), a.ids, a.aggTypes, a.aggIDs, a.types, a.payloads, a.headers, created).
			Scan(&res.Inserted)
	})
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("postgres: requeue: %w", err)
	}
	res.Skipped += len(rows) - res.Requeued - res.Inserted
	return res, nil
}

// RequeueKept requeues the delivered events HistoryRead would return for
// p (see store.History) in one statement on the server (requeue_kept): the
// kept rows go back to the queue by id, no payload travels, and a row a
// retention step deleted meanwhile is written again from what the
// statement read.
func (s *Store) RequeueKept(ctx context.Context, p store.HistoryParams, replay string) (store.RequeueKeptResult, error) {
	if err := sqlstore.CheckHistory(p); err != nil {
		return store.RequeueKeptResult{}, fmt.Errorf("postgres: requeue kept: %w", err)
	}
	if problem := sqlstore.TextProblem(replay); problem != "" {
		return store.RequeueKeptResult{}, fmt.Errorf("postgres: requeue kept: the replay's name %s", problem)
	}
	var types any // null: every type
	if len(p.Filter.EventTypes) > 0 {
		re, err := typesRegexp(p.Filter.EventTypes)
		if err != nil {
			return store.RequeueKeptResult{}, fmt.Errorf("postgres: requeue kept: %w", err)
		}
		types = re
	}
	var res store.RequeueKeptResult
	var last [16]byte
	var woke int
	err := s.walkingPrimaryKey(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, s.requeueKeptSQL(), pgx.QueryExecModeDescribeExec,
			nullTime(p.Filter.Since), nullTime(p.Filter.Until), p.Filter.AggregateType, p.Filter.AggregateID, types,
			[16]byte(p.After), p.After == uuid.Nil && !p.Resume, p.Limit, replay, postbox.HeaderReplay).
			Scan(&res.Read, &last, &res.Requeued, &res.Inserted, &woke)
	})
	if err != nil {
		return store.RequeueKeptResult{}, fmt.Errorf("postgres: requeue kept: %w", err)
	}
	res.Last = last
	res.Skipped = res.Read - res.Requeued - res.Inserted
	return res, nil
}

// requeueKeptSQL is requeue_kept with history_read's statement as its
// page: the events RequeueKept requeues are those HistoryRead returns.
func (s *Store) requeueKeptSQL() string {
	page := strings.TrimSuffix(s.sql.Get("history_read"), ";")
	return strings.Replace(s.sql.Get("requeue_kept"), "{history_read}", page, 1)
}

// EndpointRequeue sends events to one endpoint again as replays, in one
// statement (see store.Endpoints): package endpoint's poll finds them due.
func (s *Store) EndpointRequeue(ctx context.Context, endpoint uuid.UUID, events []store.HistoryEvent, replay string) (store.RequeueResult, error) {
	rows, dups, err := sqlstore.PrepareRequeue(events, replay)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("postgres: requeue to endpoint %s: %w", endpoint, err)
	}
	a := requeueArrays(rows)
	var found bool
	var requeued, inserted int
	err = s.pool.QueryRow(ctx, s.sql.Get("endpoint_requeue"), endpoint, a.ids, a.aggTypes, a.aggIDs, a.types, a.payloads, a.headers, a.insertable, replay, postbox.HeaderReplay).
		Scan(&found, &requeued, &inserted)
	if err != nil {
		return store.RequeueResult{}, fmt.Errorf("postgres: requeue to endpoint %s: %w", endpoint, err)
	}
	if !found {
		return store.RequeueResult{}, fmt.Errorf("postgres: endpoint %s: %w", endpoint, store.ErrEndpointNotFound)
	}
	return store.RequeueResult{Requeued: requeued, Inserted: inserted, Skipped: dups + len(rows) - requeued - inserted}, nil
}

// requeueColumns are the parallel arrays of requeue and endpoint_requeue.
type requeueColumns struct {
	ids                                        [][16]byte
	aggTypes, aggIDs, types, payloads, headers []string
	insertable                                 []bool
}

func requeueArrays(rows []sqlstore.RequeueRow) requeueColumns {
	n := len(rows)
	a := requeueColumns{ids: make([][16]byte, n), aggTypes: make([]string, n), aggIDs: make([]string, n),
		types: make([]string, n), payloads: make([]string, n), headers: make([]string, n), insertable: make([]bool, n)}
	for i, r := range rows {
		a.ids[i], a.aggTypes[i], a.aggIDs[i], a.types[i] = r.ID, r.AggregateType, r.AggregateID, r.EventType
		a.payloads[i], a.headers[i], a.insertable[i] = string(r.Payload), r.HeadersJSON, r.Insertable
	}
	return a
}

// historySQL runs history_read for sqlstore.ReadHistory.
type historySQL struct{ s *Store }

func (h historySQL) ReadHistory(ctx context.Context, f store.HistoryFilter, after uuid.UUID, first bool, limit int) ([]store.HistoryEvent, error) {
	var types any // null: every type
	if len(f.EventTypes) > 0 {
		re, err := typesRegexp(f.EventTypes)
		if err != nil {
			return nil, err
		}
		types = re
	}
	var out []store.HistoryEvent
	err := h.s.walkingPrimaryKey(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, h.s.sql.Get("history_read"), pgx.QueryExecModeDescribeExec,
			nullTime(f.Since), nullTime(f.Until), f.AggregateType, f.AggregateID, types, [16]byte(after), first, limit)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, scanHistory)
		return err
	})
	return out, err
}

// walkingPrimaryKey runs fn in a transaction whose plans read the outbox
// in its primary key's order (history_read, requeue_kept: a page of the
// delivered events in id order after an id), planner settings set for it
// alone (set_primary_key_walk). Without them, on a table the statistics
// have not measured (autovacuum off, a bulk load not yet analyzed), the
// planner takes "status = 'done'" for a few rows and reads and sorts
// every delivered row for each page: 6,000 events a second for a replay
// of 1,000,000, against 57,000.
func (s *Store) walkingPrimaryKey(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.Get("set_primary_key_walk"), pgx.QueryExecModeSimpleProtocol); err != nil {
			return err
		}
		return fn(tx)
	})
}

// typesRegexp translates the event types' globs (path.Match syntax,
// checked by store.HistoryFilter.Check) to one PostgreSQL regular
// expression that matches a type when one of them does: '*' is any run of
// characters but '/', '?' one character but '/', a class [...] (negated
// [^...]) one character of its ranges (or of none of them, '/' included,
// as path.Match has it), '\' quotes the next character. Every character
// but an ASCII letter or digit is written as its code (\Uhhhhhhhh), so
// none is special. A type is matched character by character: path.Match,
// which moves a '*' by bytes, also matches a '*' ending inside a
// character of a non-ASCII type that a following '?' or class then takes
// byte by byte; this does not. A glob that is not valid UTF-8 is refused:
// no type in PostgreSQL's text is.
func typesRegexp(globs []string) (string, error) {
	var b strings.Builder
	b.WriteString("^(?:")
	for i, g := range globs {
		if !utf8.ValidString(g) {
			return "", fmt.Errorf("event type pattern %q is not valid UTF-8 text", g)
		}
		if i > 0 {
			b.WriteByte('|')
		}
		if err := globRegexp(&b, g); err != nil {
			return "", fmt.Errorf("event type pattern %q: %w", g, err)
		}
	}
	b.WriteString(")$")
	return b.String(), nil
}

// globRegexp writes g's regular expression to b (see typesRegexp).
func globRegexp(b *strings.Builder, g string) error {
	for len(g) > 0 {
		switch g[0] {
		case '*':
			b.WriteString("[^/]*")
			g = g[1:]
		case '?':
			b.WriteString("[^/]")
			g = g[1:]
		case '[':
			var err error
			if g, err = classRegexp(b, g[1:]); err != nil {
				return err
			}
		default:
			if g[0] == '\\' {
				g = g[1:]
				if g == "" {
					return path.ErrBadPattern
				}
			}
			r, n := utf8.DecodeRuneInString(g)
			writeRune(b, r)
			g = g[n:]
		}
	}
	return nil
}

// classRegexp writes the class that g begins with (after its '['), as
// path.Match reads it, and returns what follows it. Ranges whose low end
// is above their high end hold nothing (path.Match accepts them).
func classRegexp(b *strings.Builder, g string) (string, error) {
	negated := strings.HasPrefix(g, "^")
	if negated {
		g = g[1:]
	}
	var ranges [][2]rune
	for n := 0; ; n++ {
		if n > 0 && strings.HasPrefix(g, "]") {
			g = g[1:]
			break
		}
		lo, rest, err := classChar(g)
		if err != nil {
			return "", err
		}
		hi := lo
		if strings.HasPrefix(rest, "-") {
			if hi, rest, err = classChar(rest[1:]); err != nil {
				return "", err
			}
		}
		g = rest
		if lo <= hi {
			ranges = append(ranges, [2]rune{lo, hi})
		}
	}
	switch {
	case len(ranges) == 0 && negated:
		b.WriteString("[\\U00000000-\\U0010FFFF]") // any character, '/' too
	case len(ranges) == 0:
		b.WriteString("(?!)") // no character
	default:
		b.WriteByte('[')
		if negated {
			b.WriteByte('^')
		}
		for _, r := range ranges {
			writeRune(b, r[0])
			if r[1] != r[0] {
				b.WriteByte('-')
				writeRune(b, r[1])
			}
		}
		b.WriteByte(']')
	}
	return g, nil
}

// classChar reads one character of a class as path.Match does: '\\'
// quotes the next; an unquoted '-' or ']', a class left open, are
// malformed.
func classChar(g string) (rune, string, error) {
	if g == "" || g[0] == '-' || g[0] == ']' {
		return 0, "", path.ErrBadPattern
	}
	if g[0] == '\\' {
		g = g[1:]
		if g == "" {
			return 0, "", path.ErrBadPattern
		}
	}
	r, n := utf8.DecodeRuneInString(g)
	if g = g[n:]; g == "" {
		return 0, "", path.ErrBadPattern
	}
	return r, g, nil
}

// writeRune writes r to a regular expression as itself (an ASCII letter
// or digit) or as its code, which no regular expression reads as special.
func writeRune(b *strings.Builder, r rune) {
	if r < utf8.RuneSelf && ('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
		b.WriteRune(r)
		return
	}
	fmt.Fprintf(b, "\\U%08X", r)
}

// scanHistory reads one row of history_read or expire_read: columns that
// may hold what no event has (times, headers) scan into types that take
// every value, and read as zero when they hold none an event may have.
func scanHistory(row pgx.CollectableRow) (store.HistoryEvent, error) {
	var ev store.HistoryEvent
	var headers []byte
	var created, processed pgtype.Timestamptz
	err := row.Scan((*[16]byte)(&ev.ID), &ev.OutboxSeq, &ev.AggregateType, &ev.AggregateID, &ev.EventType, &ev.Payload,
		&ev.DedupKey, &headers, &created, &processed)
	ev.Headers, _ = sqlstore.DecodeHeaders(headers)
	ev.CreatedAt, _ = readTime(created)
	ev.ProcessedAt, _ = readTime(processed)
	return ev, err
}

// expireSQL runs the retention statements for sqlstore.Expire.
type expireSQL struct{ s *Store }

func (e expireSQL) ReadExpired(ctx context.Context, before time.Time, limit int) ([]store.HistoryEvent, error) {
	rows, err := e.s.pool.Query(ctx, e.s.sql.Get("expire_read"), before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanHistory)
}

func (e expireSQL) DeleteExpired(ctx context.Context, ids []uuid.UUID) (int, error) {
	tag, err := e.s.pool.Exec(ctx, e.s.sql.Get("expire_delete"), rawIDs(ids))
	return int(tag.RowsAffected()), err
}

func (e expireSQL) PurgeDone(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := e.s.pool.Exec(ctx, e.s.sql.Get("purge_done"), before, limit)
	return int(tag.RowsAffected()), err
}

func (e expireSQL) PurgeHeldKeys(ctx context.Context, limit int) (int, error) {
	tag, err := e.s.pool.Exec(ctx, e.s.sql.Get("purge_held_keys"), limit)
	return int(tag.RowsAffected()), err
}

var (
	_ sqlstore.HistorySQL = historySQL{}
	_ sqlstore.ExpireSQL  = expireSQL{}
)
