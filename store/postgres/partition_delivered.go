package postgres

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox/store"
)

// The delivered-side tables that grow, partitioned with the outbox
// (Partition): the endpoints' attempts log, endpoint_attempts, by range of
// its time (at), their deliveries, endpoint_deliveries, by range of event
// id, and, on request (PartitionParams.Inbox), the inbox, inbox_events, by
// range of id (UUIDv7 ids carry their time), each with a DEFAULT
// partition, at the outbox's interval. Their partitions are
// created ahead by the relay's retention step (Driver.Expire, with the
// outbox's), and by the inbox's own retention; retention drops the
// partitions whose range ended instead of deleting their rows.

//go:embed partition_delivered.sql
var partitionDeliveredSQL string

// deliveredTable is a delivered-side table that Partition partitions.
type deliveredTable struct {
	name string // endpoint_attempts, inbox_events, endpoint_deliveries
	// byID: partitioned by range of a UUIDv7 id (inbox_events' id,
	// endpoint_deliveries' event_id); else by the timestamp at
	// (endpoint_attempts).
	byID bool
}

var (
	attemptsTable   = deliveredTable{name: "endpoint_attempts"}
	inboxTable      = deliveredTable{name: "inbox_events", byID: true}
	deliveriesTable = deliveredTable{name: "endpoint_deliveries", byID: true}
)

// deliveredTables are the tables Partition may partition besides the
// outbox, in the order it converts them.
var deliveredTables = []deliveredTable{attemptsTable, inboxTable, deliveriesTable}

// deliveredQuery is the named query for t: {table} replaced by its name.
func (s *Store) deliveredQuery(t deliveredTable, query string) string {
	return strings.ReplaceAll(s.sql.Get(query), "{table}", pgx.Identifier{t.name}.Sanitize())
}

// partitionQueryOf is deliveredQuery with {partition} replaced by the
// partition name.
func (s *Store) partitionQueryOf(t deliveredTable, query, name string) string {
	return strings.ReplaceAll(s.deliveredQuery(t, query), "{partition}", pgx.Identifier{name}.Sanitize())
}

// unpartitioned names the plain table during its conversion.
func (t deliveredTable) unpartitioned() string { return t.name + "_unpartitioned" }

// partitionName names the partition of [lo, hi) of the table: the
// outbox's names (rangeName) with the table's prefix, as
// endpoint_attempts_p20261202.
func (t deliveredTable) partitionName(lo, hi time.Time, interval time.Duration) string {
	return t.name + strings.TrimPrefix(rangeName(lo, hi, interval), "outbox_events")
}

// bound is the SQL literal of a partition bound at time at: the smallest
// UUIDv7 of its millisecond, or the timestamp itself.
func (t deliveredTable) bound(at time.Time) string {
	if t.byID {
		return "'" + uuidBound(at).String() + "'"
	}
	return "'" + at.UTC().Format(time.RFC3339Nano) + "'"
}

// moveBack names the query that moves back to t, from a detached
// partition, the rows that its retention keeps ("": none, the attempts').
func (t deliveredTable) moveBack() string {
	switch t {
	case inboxTable:
		return "inbox_move_back"
	case deliveriesTable:
		return "deliveries_move_back"
	}
	return ""
}

// seen is where the store remembers that t is partitioned.
func (s *Store) seen(t deliveredTable) *atomic.Bool {
	switch t {
	case inboxTable:
		return &s.inboxPartitioned
	case deliveriesTable:
		return &s.deliveriesPartitioned
	}
	return &s.attemptsPartitioned
}

// deliveredKind is the relkind of t: "p" partitioned, "r" plain, ""
// missing. Partitioned, once seen, is remembered (a conversion only
// turns a plain table into a partitioned one); another is asked again.
func (s *Store) deliveredKind(ctx context.Context, t deliveredTable) (string, error) {
	if s.seen(t).Load() {
		return "p", nil
	}
	var kind string
	if err := s.pool.QueryRow(ctx, s.sql.Get("delivered_kind"), s.Table(t.name)).Scan(&kind); err != nil {
		return "", fmt.Errorf("postgres: partition %s: %w", t.name, err)
	}
	if kind == "p" {
		s.seen(t).Store(true)
	}
	return kind, nil
}

// partitionDelivered is Partition's work on the delivered-side tables:
// endpoint_attempts and endpoint_deliveries always, inbox_events when
// p.Inbox or when partitioned already. A plain table is converted
// (convertDelivered) and its rows moved (moveDelivered); a partitioned one
// gets the partitions missing from now to two intervals ahead. Tables
// converted are named in rep.Tables, rows moved after the switch counted
// in rep.MovedRows and partitions created appended to rep.Created.
func (s *Store) partitionDelivered(ctx context.Context, p PartitionParams, rep *PartitionReport) error {
	for _, t := range deliveredTables {
		kind, err := s.deliveredKind(ctx, t)
		if err != nil {
			return err
		}
		switch {
		case kind == "r" && (t != inboxTable || p.Inbox):
			created, converted, err := s.convertDelivered(ctx, t, p.Interval)
			rep.Created = append(rep.Created, created...)
			if err != nil {
				return err
			}
			if converted {
				rep.Tables = append(rep.Tables, t.name)
			}
			s.seen(t).Store(true)
		case kind == "p":
			created, err := s.createAheadOf(ctx, t, p.Interval, time.Now())
			rep.Created = append(rep.Created, created...)
			if err != nil {
				return err
			}
		default:
			continue
		}
		n, err := s.moveDelivered(ctx, t)
		rep.MovedRows += n
		if err != nil {
			return err
		}
	}
	return nil
}

// convertDelivered converts the plain table t in one transaction that
// waits PartitionLockTimeout at most for its lock (and fails, leaving the
// table as it was, when transactions hold it longer): it renames the table
// and its indexes ({table}_unpartitioned…), creates the partitioned table
// with its columns, defaults, checks (and the attempts' and deliveries'
// identity and foreign key), a DEFAULT partition, a partition per interval
// from the oldest row's time (at most catchUpPartitions, as the outbox's)
// to two intervals ahead, and the plain table's indexes. The inbox's and
// the deliveries' switches also move the rows not finished, and guard the
// inserts until the finished rows are moved (inbox_move_guard,
// deliveries_move_guard); the deliveries' adds the indexes of their
// retention (deliveries_indexes). No statement reads other rows than
// those the switch moves (found by inbox_events_open_idx, the deliveries'
// partial indexes): the lock lasts milliseconds for the
// attempts log whatever its size, and for the inbox and the deliveries as
// long as moving their rows not finished takes. The rows left are moved
// afterwards (moveDelivered).
func (s *Store) convertDelivered(ctx context.Context, t deliveredTable, interval time.Duration) (created []string, converted bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		created = nil
		if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.Get("partition_migrate_lock"), s.lockKey("migrate")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.deliveredQuery(t, "delivered_lock")); err != nil {
			return err
		}
		var kind string
		if err := tx.QueryRow(ctx, s.sql.Get("delivered_kind"), s.Table(t.name)).Scan(&kind); err != nil {
			return err
		}
		if kind != "r" {
			return nil // converted by a concurrent run
		}
		type index struct {
			name, def      string
			unique, usable bool
		}
		rows, err := tx.Query(ctx, s.deliveredQuery(t, "delivered_index_defs"))
		if err != nil {
			return err
		}
		indexes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (index, error) {
			var i index
			err := row.Scan(&i.name, &i.def, &i.unique, &i.usable)
			return i, err
		})
		if err != nil {
			return err
		}
		for _, i := range indexes {
			if i.unique {
				return fmt.Errorf("the unique index %s cannot be kept on a partitioned %s (it does not hold the partition key): drop it first", i.name, t.name)
			}
		}
		var pkey, options string
		if err := tx.QueryRow(ctx, s.deliveredQuery(t, "delivered_pkey")).Scan(&pkey); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.deliveredQuery(t, "delivered_options")).Scan(&options); err != nil {
			return err
		}
		var seqName *string
		var lastID *int64
		seq, seqSync, seqSuffix := "attempts_seq", "attempts_seq_sync", "_id_seq"
		if t == deliveriesTable {
			seq, seqSync, seqSuffix = "deliveries_seq", "deliveries_seq_sync", "_seq_seq"
		}
		if t != inboxTable {
			if err := tx.QueryRow(ctx, s.sql.Get(seq)).Scan(&seqName, &lastID); err != nil {
				return err
			}
		}
		// The plain table and its indexes free their names.
		renames := []string{s.partitionQueryOf(t, "delivered_rename", t.unpartitioned())}
		names := []string{pkey}
		for _, i := range indexes {
			names = append(names, i.name)
		}
		for _, name := range names {
			renames = append(renames, "alter index "+pgx.Identifier{s.schema, name}.Sanitize()+" rename to "+
				pgx.Identifier{t.unpartitioned() + strings.TrimPrefix(name, t.name)}.Sanitize())
		}
		if seqName != nil {
			renames = append(renames, "alter sequence "+*seqName+" rename to "+pgx.Identifier{t.unpartitioned() + seqSuffix}.Sanitize())
		}
		for _, q := range renames {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		var oldest *time.Time
		create := "attempts_create_parent"
		if t.byID {
			oldestID := "inbox_oldest"
			create = "inbox_create_parent"
			if t == deliveriesTable {
				create, oldestID = "deliveries_create_parent", "deliveries_oldest"
			}
			var id uuid.UUID
			switch err := tx.QueryRow(ctx, s.sql.Get(oldestID)).Scan(&id); {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			default:
				at := uuidTime(id)
				oldest = &at
			}
		} else if err := tx.QueryRow(ctx, s.sql.Get("attempts_oldest")).Scan(&oldest); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.Get(create)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.partitionQueryOf(t, "delivered_create_default", t.name+"_default")+withOptions(options)); err != nil {
			return err
		}
		for _, r := range conversionRanges(oldest, time.Now(), interval) {
			name := t.partitionName(r.from, r.to, interval)
			if err := s.createPartitionOf(ctx, tx, t, name, r.from, r.to, options); err != nil {
				return err
			}
			created = append(created, name)
		}
		for _, i := range indexes {
			if i.usable { // not a failed concurrent build
				if _, err := tx.Exec(ctx, i.def); err != nil {
					return err
				}
			}
		}
		if lastID != nil {
			if _, err := tx.Exec(ctx, s.sql.Get(seqSync), *lastID); err != nil {
				return err
			}
		}
		var switchQueries []string
		switch t {
		case inboxTable:
			switchQueries = []string{"inbox_move_unfinished", "inbox_move_guard"}
		case deliveriesTable:
			switchQueries = []string{"deliveries_indexes", "deliveries_move_unfinished", "deliveries_move_guard"}
		}
		for _, q := range switchQueries {
			if _, err := tx.Exec(ctx, s.sql.Get(q)); err != nil {
				return err
			}
		}
		converted = true
		return nil
	})
	switch {
	case isLockTimeout(err):
		return nil, false, fmt.Errorf("postgres: partition %s: the lock on it was not granted within %s (transactions hold it): nothing changed, run it again: %w", s.Table(t.name), PartitionLockTimeout, err)
	case err != nil:
		return nil, false, fmt.Errorf("postgres: partition %s: %w", s.Table(t.name), err)
	}
	return created, converted, nil
}

// conversionRanges are the ranges of the partitions a conversion creates:
// from the interval of oldest (the oldest row's time; nil, none) to now,
// a range per interval (per a multiple of it, when there would be more
// than catchUpPartitions), then a range per interval up to two intervals
// ahead.
func conversionRanges(oldest *time.Time, now time.Time, interval time.Duration) []partitionInfo {
	var out []partitionInfo
	first := rangeStart(now, interval)
	if oldest != nil {
		from := rangeStart(*oldest, interval)
		step := interval
		if n := first.Sub(from) / interval; n > catchUpPartitions {
			step = interval * ((n + catchUpPartitions - 1) / catchUpPartitions)
		}
		for ; from.Before(first); from = from.Add(step) {
			to := from.Add(step)
			if to.After(first) {
				to = first
			}
			out = append(out, partitionInfo{from: from, to: to})
		}
	}
	for from := first; !from.After(now.Add(2 * interval)); from = from.Add(interval) {
		out = append(out, partitionInfo{from: from, to: from.Add(interval)})
	}
	return out
}

// createPartitionOf creates t's partition name of [from, to) in tx.
func (s *Store) createPartitionOf(ctx context.Context, tx pgx.Tx, t deliveredTable, name string, from, to time.Time, options string) error {
	q := fmt.Sprintf("create table %s partition of %s for values from (%s) to (%s)%s",
		pgx.Identifier{s.schema, name}.Sanitize(), s.Table(t.name), t.bound(from), t.bound(to), withOptions(options))
	if _, err := tx.Exec(ctx, q); err != nil {
		return fmt.Errorf("create partition %s: %w", name, err)
	}
	return nil
}

// moveDelivered moves the rows a conversion of t left in the plain table
// (none when no conversion is under way) to the partitioned one,
// PartitionMoveBatch per transaction, the newest first, then drops the
// plain table (and the inbox's or deliveries' guard, in a transaction that
// waits PartitionLockTimeout at most for its lock). Meanwhile reads miss
// the rows not moved yet (the inbox's and deliveries' inserts do not:
// inbox_move_guard, deliveries_move_guard). The deliveries' moves skip the
// rows a guard is moving, and go on until the plain table is empty. A run
// interrupted is finished by the next Partition.
func (s *Store) moveDelivered(ctx context.Context, t deliveredTable) (int, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, s.partitionQueryOf(t, "delivered_unpartitioned_exists", t.unpartitioned())).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	move, finish := "attempts_move", "attempts_finish"
	switch t {
	case inboxTable:
		move, finish = "inbox_move", "inbox_finish"
	case deliveriesTable:
		move, finish = "deliveries_move", "deliveries_finish"
	}
	moved := 0
	for {
		var n int64
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_moving")); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, s.sql.Get(move), PartitionMoveBatch)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return moved, fmt.Errorf("postgres: partition %s: move rows (%d moved; run it again to go on): %w", t.name, moved, err)
		}
		moved += int(n)
		if n > 0 {
			continue
		}
		if t != deliveriesTable {
			break
		}
		// The deliveries' moves skip the rows a guard is moving: the loop
		// ends when the plain table is empty.
		var left bool
		if err := s.pool.QueryRow(ctx, s.sql.Get("deliveries_left")).Scan(&left); err != nil {
			return moved, fmt.Errorf("postgres: partition %s: move rows (%d moved; run it again to go on): %w", t.name, moved, err)
		}
		if !left {
			break
		}
		select {
		case <-ctx.Done():
			return moved, fmt.Errorf("postgres: partition %s: move rows (%d moved; run it again to go on): %w", t.name, moved, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.sql.Get(finish))
		return err
	})
	if err != nil {
		return moved, fmt.Errorf("postgres: partition %s: drop the plain table (run it again): %w", t.name, err)
	}
	return moved, nil
}

// rangesOf lists t's range partitions by range.
func (s *Store) rangesOf(ctx context.Context, t deliveredTable) ([]partitionInfo, error) {
	query := s.sql.Get("attempts_ranges")
	if t.byID {
		query = s.deliveredQuery(t, "delivered_id_ranges")
	}
	rows, err := s.pool.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("postgres: partitions of %s: %w", t.name, err)
	}
	ranges, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (partitionInfo, error) {
		var r partitionInfo
		if t.byID {
			var from, to uuid.UUID
			err := row.Scan(&r.name, &from, &to)
			r.from, r.to = uuidTime(from), uuidTime(to)
			return r, err
		}
		err := row.Scan(&r.name, &r.from, &r.to)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: partitions of %s: %w", t.name, err)
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].from.Before(ranges[j].from) })
	return ranges, nil
}

// createAheadOf creates t's partitions missing from now to two intervals
// ahead, as createAhead does the outbox's: each in a transaction that
// waits PartitionLockTimeout at most for its lock; a range that an
// existing partition covers in part starts where that one ends; a range
// of which the DEFAULT partition holds rows is left to the DEFAULT; a
// partition a concurrent step created is taken as created.
func (s *Store) createAheadOf(ctx context.Context, t deliveredTable, interval time.Duration, now time.Time) ([]string, error) {
	ranges, err := s.rangesOf(ctx, t)
	if err != nil {
		return nil, err
	}
	var options string
	if err := s.pool.QueryRow(ctx, s.sql.Get("delivered_default_options"), s.Table(t.name+"_default")).Scan(&options); err != nil {
		return nil, fmt.Errorf("postgres: partitions of %s: %w", t.name, err)
	}
	var created []string
	for _, m := range missingRanges(ranges, interval, now) {
		lo, hi := m.from, m.to
		name := t.partitionName(lo, hi, interval)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
				return err
			}
			return s.createPartitionOf(ctx, tx, t, name, lo, hi, options)
		})
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr) && pgErr.Code == "23514":
			continue // the DEFAULT partition holds rows of the range
		case errors.As(err, &pgErr) && pgErr.Code == "42P07":
			// A concurrent step's, or a table of that name that is no
			// partition of t: the next listing tells.
			continue
		case err != nil:
			return created, fmt.Errorf("postgres: partitions of %s: %w", t.name, err)
		}
		created = append(created, name)
	}
	return created, nil
}

// createDeliveredAhead is the relay's retention step's work on the
// delivered-side tables (expirePartitions): the partitions missing from
// now to two intervals ahead of each partitioned one.
func (s *Store) createDeliveredAhead(ctx context.Context, interval time.Duration, now time.Time) ([]string, error) {
	var created []string
	var errs []error
	for _, t := range deliveredTables {
		kind, err := s.deliveredKind(ctx, t)
		if err != nil || kind != "p" {
			errs = append(errs, err)
			continue
		}
		c, err := s.createAheadOf(ctx, t, interval, now)
		created = append(created, c...)
		errs = append(errs, err)
	}
	return created, errors.Join(errs...)
}

// dropEnded drops t's range partitions whose range ended before before
// (and began before now: not those created ahead, as the outbox's),
// naming them in res.Dropped, and returns the rows they held (counted in a
// partition of up to partitionSamplePages pages, estimated in a larger
// one: sampledRows). Each
// drop is one transaction that waits PartitionLockTimeout at most for its
// lock on t (left to the next step, with an error, when not granted):
// it detaches the partition, moves the inbox rows or deliveries retention
// keeps back to the table (inbox_move_back, deliveries_move_back) and
// marks it (partition_mark_detached); the count and the DROP then run in
// statements of their own, holding no lock on t (a table left detached is
// dropped by the next step's sweep, dropDetached). One
// process drops at a time (delivered_retention_lock): another skips.
func (s *Store) dropEnded(ctx context.Context, t deliveredTable, before time.Time, res *store.ExpireResult) (int, error) {
	if before.IsZero() {
		return 0, nil
	}
	ranges, err := s.rangesOf(ctx, t)
	if err != nil {
		return 0, err
	}
	now := time.Now()
	rows := 0
	for _, r := range ranges {
		if r.from.After(now) || r.to.After(before) {
			break // sorted by start, and ranges do not overlap
		}
		var attached, skipped bool
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
				return err
			}
			var locked bool
			if err := tx.QueryRow(ctx, s.sql.Get("delivered_retention_lock"), s.lockKey("retention "+t.name)).Scan(&locked); err != nil {
				return err
			}
			if !locked {
				skipped = true
				return nil
			}
			if err := tx.QueryRow(ctx, s.sql.Get("delivered_attached"), s.Table(t.name), s.Table(r.name)).Scan(&attached); err != nil || !attached {
				return err
			}
			if _, err := tx.Exec(ctx, s.partitionQueryOf(t, "delivered_detach", r.name)); err != nil {
				return err
			}
			if q := t.moveBack(); q != "" {
				if _, err := tx.Exec(ctx, s.partitionQueryOf(t, q, r.name), before); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, s.partitionQuery("partition_mark_detached", r.name))
			return err
		})
		switch {
		case isLockTimeout(err):
			return rows, fmt.Errorf("postgres: expire: partition %s: the lock on %s was not granted within %s (transactions hold it): left for the next step: %w", r.name, s.Table(t.name), PartitionLockTimeout, err)
		case err != nil:
			return rows, fmt.Errorf("postgres: expire: drop partition %s: %w", r.name, err)
		case skipped:
			return rows, nil // another process drops
		case !attached:
			continue
		}
		// Counted once detached, holding no lock on t: what the drop
		// removes, the rows moved back gone from it.
		n, err := s.sampledRows(ctx, s.pool, r.name, "delivered_sample_count")
		switch {
		case isGoneTable(err):
			continue // another process's sweep dropped it (dropDetached)
		case err != nil:
			return rows, fmt.Errorf("postgres: expire: count partition %s (the next step drops it): %w", r.name, err)
		}
		rows += int(n)
		if err := s.dropDetachedTable(ctx, r.name); err != nil {
			return rows, fmt.Errorf("%w (the next step drops it)", err)
		}
		res.Dropped = append(res.Dropped, r.name)
	}
	return rows, nil
}

// expireDelivered is a lane's Expire when its deliveries or its attempts
// log are partitioned (attempts and deliveries give their kinds). The
// retention of both runs in the lanes, not in the outbox's Expire: the
// outbox's Before is the relay's Retention, the lanes' the endpoints'
// (endpoint.SupervisorConfig.Retention), which every lane shares, so that
// any lane's Before is the one every lane uses: a partition ended before
// it holds no row another lane keeps. The first lane of a step drops
// (delivered_retention_lock), the others find nothing left. It deletes up
// to p.Limit of the endpoint's finished deliveries processed before
// p.Before and up to p.Limit of its attempts made before it, of the
// DEFAULT partition of a partitioned table (lane_purge_deliveries_partitioned,
// lane_purge_attempts_partitioned), of the whole of a plain one
// (lane_purge_deliveries, lane_purge_attempts); sweeps the partitions left
// detached, and drops the partitions whose range ended before p.Before:
// the attempts' whole, the deliveries' after moving back to the DEFAULT
// partition those not finished before p.Before (dropEnded). A row is kept
// up to an interval longer than Retention. Events counts the rows deleted
// and those of the partitions dropped (named in Dropped).
func (l *lane) expireDelivered(ctx context.Context, p store.ExpireParams, deliveries, attempts string) (store.ExpireResult, error) {
	var res store.ExpireResult
	purge := []struct {
		query string
		what  string
	}{
		{"lane_purge_deliveries", "finished deliveries"},
		{"lane_purge_attempts", "attempts"},
	}
	if deliveries == "p" {
		purge[0].query += "_partitioned"
	}
	if attempts == "p" {
		purge[1].query += "_partitioned"
	}
	for _, q := range purge {
		tag, err := l.s.pool.Exec(ctx, l.s.sql.Get(q.query), l.id, p.Before, p.Limit)
		if err != nil {
			return res, fmt.Errorf("postgres: purge %s of endpoint %s: %w", q.what, l.id, err)
		}
		res.Events += int(tag.RowsAffected())
		res.More = res.More || int(tag.RowsAffected()) >= p.Limit
	}
	errs := []error{l.s.dropDetached(ctx, &res)}
	for _, t := range []struct {
		table deliveredTable
		kind  string
	}{{attemptsTable, attempts}, {deliveriesTable, deliveries}} {
		if t.kind != "p" {
			continue
		}
		n, err := l.s.dropEnded(ctx, t.table, p.Before, &res)
		res.Events += n
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// inboxExpire is InboxDeleteProcessedBefore on a partitioned inbox: it
// creates the partitions ahead (a consumer's database may have no relay),
// drops the partitions whose range ended before before, after moving back
// their rows not done and their done rows processed since before
// (dropEnded), then deletes up to limit done rows of the DEFAULT partition
// processed before before, and of the range partitions processed an
// interval before it (their partition, not dropped yet, holds them only
// when their ids are older than their processing): a done row is kept up
// to an interval longer than the retention. It reports the rows deleted
// and those of the partitions dropped (see dropEnded).
func (d *Driver) inboxExpire(ctx context.Context, before time.Time, limit int) (int, error) {
	interval, err := d.partitionInterval(ctx)
	if err != nil {
		return 0, err
	}
	var res store.ExpireResult
	_, aheadErr := d.createAheadOf(ctx, inboxTable, interval, time.Now())
	leftErr := d.dropDetached(ctx, &res)
	n, err := d.dropEnded(ctx, inboxTable, before, &res)
	if err != nil {
		return n, errors.Join(aheadErr, leftErr, err)
	}
	tag, err := d.pool.Exec(ctx, d.sql.Get("inbox_delete_processed_partitioned"), before, before.Add(-interval), limit)
	if err != nil {
		return n, fmt.Errorf("postgres: inbox delete processed: %w", err)
	}
	return n + int(tag.RowsAffected()), errors.Join(aheadErr, leftErr)
}
