package postgres

import (
	"context"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed partition.sql
var partitionSQL string

// PartitionIntervalMin is the shortest interval of partitions Partition
// takes (the command line asks for a minute at least; tests use seconds).
const PartitionIntervalMin = time.Second

// PartitionLockTimeout is how long a step of the partitioned outbox waits
// for its lock on outbox_events (the conversion's switch, a partition's
// creation or drop): producers' inserts queue behind a waiting lock, so a
// step that cannot have it at once gives up and is run again later.
const PartitionLockTimeout = 2 * time.Second

// catchUpPartitions bounds the partitions the conversion creates for the
// past, from the oldest UUIDv7 id to now.
const catchUpPartitions = 100

// PartitionMoveBatch is how many delivered events the conversion moves to
// the partitioned table per transaction, after the switch.
const PartitionMoveBatch = 10_000

// PartitionParams configures Partition.
type PartitionParams struct {
	// Interval is the time range of each partition's ids (24 h: a
	// partition per day). At least PartitionIntervalMin. It is stored in
	// the schema: relays read it, and running Partition again with another
	// interval changes it for the partitions created from then on. Zero:
	// the stored interval on a partitioned outbox, PartitionIntervalDefault
	// when converting.
	Interval time.Duration
	// Inbox also converts a plain inbox_events (see partitionDelivered):
	// opt-in, since on a partitioned inbox retention keeps a done row up
	// to an Interval longer. A partitioned inbox gets its partitions ahead
	// without it.
	Inbox bool
}

// PartitionIntervalDefault is the interval of a conversion given none.
const PartitionIntervalDefault = 24 * time.Hour

// PartitionReport is what Partition did.
type PartitionReport struct {
	// Converted: the plain outbox was converted (false: it was already
	// partitioned).
	Converted bool
	// Moved counts the unfinished events moved in the switch; MovedDone
	// the delivered events moved after it, in batches.
	Moved, MovedDone int
	// Created names the partitions created.
	Created []string
	// Interval is the interval of the partitions, as stored.
	Interval time.Duration
	// Tables names the delivered-side tables converted with the outbox
	// (endpoint_attempts, endpoint_deliveries; inbox_events with
	// PartitionParams.Inbox), and MovedRows counts their rows moved after
	// their switch.
	Tables    []string
	MovedRows int
}

// Partition converts outbox_events into a table partitioned by range of id,
// a partition per Interval of ids' time (UUIDv7 ids carry their creation
// time), plus a DEFAULT partition for ids outside every range (ids that
// are not UUIDv7). Retention (Driver.Expire, the relay's Retention) then
// drops a whole partition once its range is past, instead of deleting its
// rows one by one, and creates the next partitions ahead. Run Migrate
// first ("postbox migrate --partitioned" runs both).
//
// On a plain outbox it is an online migration: in one short transaction
// (it waits PartitionLockTimeout at most for its lock, and fails, leaving
// the outbox as it was, when producers' transactions hold it longer: run
// it again), it renames the plain table, creates the partitioned one with
// the same columns, defaults, checks, indexes, triggers (and their
// enabled state: WAL mode's) and storage settings, moves the unfinished
// events into it with their seq (ordered claims keep each aggregate's
// order) and every dedup key; then it moves the delivered events kept, in
// transactions of PartitionMoveBatch events, and drops the plain table. A
// run interrupted meanwhile is finished by the next run.
//
// On a partitioned outbox it stores Interval and creates the partitions
// missing from now to two intervals ahead.
//
// Then it does the same to endpoint_attempts (by range of at),
// endpoint_deliveries (by range of event_id) and, with Inbox, to
// inbox_events (by range of id): see partitionDelivered.
func (s *Store) Partition(ctx context.Context, p PartitionParams) (PartitionReport, error) {
	var rep PartitionReport
	if p.Interval == 0 {
		var err error
		if p.Interval, err = s.keptInterval(ctx); err != nil {
			return rep, err
		}
	}
	if p.Interval < PartitionIntervalMin {
		return rep, fmt.Errorf("postgres: partition: interval %s: want at least %s", p.Interval, PartitionIntervalMin)
	}
	s.outboxKindSeen.Store(outboxKindUnknown) // asks again
	kind, err := s.outboxKind(ctx)
	if err != nil {
		return rep, err
	}
	switch kind {
	case "":
		return rep, errors.New("postgres: partition: outbox_events is missing: run Migrate first")
	case "r":
		if rep, err = s.convert(ctx, p.Interval); err != nil {
			return rep, err
		}
	case "p":
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_set_interval"), p.Interval.Milliseconds()); err != nil {
				return err
			}
			// A schema converted before the moves skipped the check.
			_, err := tx.Exec(ctx, s.sql.Get("partition_refuse_held_key"))
			return err
		})
		if err != nil {
			return rep, fmt.Errorf("postgres: partition: store the interval: %w", err)
		}
		ranges, err := s.partitions(ctx)
		if err != nil {
			return rep, fmt.Errorf("postgres: partitions: %w", err)
		}
		created, _, err := s.createAhead(ctx, ranges, p.Interval, time.Now())
		rep.Created = created
		if err != nil {
			return rep, err
		}
	default:
		return rep, fmt.Errorf("postgres: partition: outbox_events is a relation of kind %q, not a table", kind)
	}
	s.outboxKindSeen.Store(outboxKindPartitioned)
	n, err := s.moveDone(ctx)
	rep.MovedDone = n
	rep.Interval = p.Interval
	if err != nil {
		return rep, err
	}
	return rep, s.partitionDelivered(ctx, p, &rep)
}

// keptInterval is the interval of a Partition given none: the stored one
// on a partitioned outbox, PartitionIntervalDefault on another.
func (s *Store) keptInterval(ctx context.Context) (time.Duration, error) {
	kind, err := s.outboxKind(ctx)
	if err != nil || kind != "p" {
		return PartitionIntervalDefault, err
	}
	return s.partitionInterval(ctx)
}

// outboxKind is the relkind of outbox_events: "p" partitioned, "r" plain,
// "" missing. A partitioned outbox, once seen, is remembered
// (outboxKindSeen, which enqueues share): a conversion only turns a plain
// outbox into a partitioned one. A plain or missing one is asked again
// each time, since another process may convert it.
func (s *Store) outboxKind(ctx context.Context) (string, error) {
	if s.outboxKindSeen.Load() == outboxKindPartitioned {
		return "p", nil
	}
	var kind string
	if err := s.pool.QueryRow(ctx, s.sql.Get("partition_kind")).Scan(&kind); err != nil {
		return "", fmt.Errorf("postgres: partition: %w", err)
	}
	if kind == "p" {
		s.outboxKindSeen.Store(outboxKindPartitioned)
	}
	return kind, nil
}

// partitionInterval reads the interval Partition stored.
func (s *Store) partitionInterval(ctx context.Context) (time.Duration, error) {
	var ms int64
	if err := s.pool.QueryRow(ctx, s.sql.Get("partition_interval")).Scan(&ms); err != nil {
		return 0, fmt.Errorf("postgres: partition interval: %w", err)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// lockTimeoutSetting is PartitionLockTimeout as a PostgreSQL setting.
var lockTimeoutSetting = fmt.Sprintf("%dms", PartitionLockTimeout.Milliseconds())

// isLockTimeout reports PostgreSQL's lock_not_available (a lock_timeout).
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// isGoneTable reports a partition another step dropped or detached
// meanwhile (undefined_table: "does not exist", "is not a partition of"):
// several relays' retention steps may go for the same partition, and the
// one that comes second has nothing left to do.
func isGoneTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// tableDef is what the conversion copies of the plain table.
type tableDef struct {
	names    []string // every index's name
	indexes  []string // CREATE INDEX statements
	triggers []string // CREATE TRIGGER statements
	disabled []string // triggers to disable
	options  string   // storage options
	pubs     []string // publications listing it
}

// convert is Partition on a plain outbox: the switch, in one transaction.
func (s *Store) convert(ctx context.Context, interval time.Duration) (PartitionReport, error) {
	var rep PartitionReport
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.Get("partition_migrate_lock"), s.lockKey("migrate")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_outbox")); err != nil {
			return err
		}
		var kind string
		if err := tx.QueryRow(ctx, s.sql.Get("partition_kind")).Scan(&kind); err != nil {
			return err
		}
		if kind != "r" {
			return nil // converted by a concurrent run
		}
		def, err := s.readTableDef(ctx, tx)
		if err != nil {
			return err
		}
		var lastSeq *int64
		var seqName string
		if err := tx.QueryRow(ctx, s.sql.Get("partition_seq_name")).Scan(&seqName); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "select pg_sequence_last_value($1::regclass)", seqName).Scan(&lastSeq); err != nil {
			return err
		}
		if err := s.renamePlain(ctx, tx, def.names, seqName); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.Get("partition_create_parent")); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.expand("create table {schema}.outbox_events_default partition of {schema}.outbox_events default"+withOptions(def.options))); err != nil {
			return err
		}
		now := time.Now()
		first := rangeStart(now, interval)
		var oldest uuid.UUID
		switch err := tx.QueryRow(ctx, s.sql.Get("partition_min_v7")).Scan(&oldest); {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			// The past: a partition per interval (per a multiple of it,
			// when there would be more than catchUpPartitions), so that
			// retention drops the old events by range too.
			from := rangeStart(uuidTime(oldest), interval)
			step := interval
			if n := first.Sub(from) / interval; n > catchUpPartitions {
				step = interval * ((n + catchUpPartitions - 1) / catchUpPartitions)
			}
			for ; from.Before(first); from = from.Add(step) {
				to := from.Add(step)
				if to.After(first) {
					to = first
				}
				name := rangeName(from, to, interval)
				if err := s.createPartition(ctx, tx, name, from, to, def.options); err != nil {
					return err
				}
				rep.Created = append(rep.Created, name)
			}
		}
		for from := first; !from.After(now.Add(2 * interval)); from = from.Add(interval) {
			name := partitionName(from, interval)
			if err := s.createPartition(ctx, tx, name, from, from.Add(interval), def.options); err != nil {
				return err
			}
			rep.Created = append(rep.Created, name)
		}
		for _, q := range def.indexes {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		for _, q := range def.triggers {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		for _, name := range def.disabled {
			if _, err := tx.Exec(ctx, s.expand("alter table {schema}.outbox_events disable trigger "+pgx.Identifier{name}.Sanitize())); err != nil {
				return err
			}
		}
		for _, q := range []string{"partition_dedup", "partition_refuse_held_key", "partition_moving"} {
			if _, err := tx.Exec(ctx, s.sql.Get(q)); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, s.sql.Get("partition_set_interval"), interval.Milliseconds()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.sql.Get("partition_fill_keys")); err != nil {
			return err
		}
		if lastSeq != nil {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_seq_sync"), *lastSeq); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, s.sql.Get("partition_move_unfinished"))
		if err != nil {
			return err
		}
		rep.Moved = int(tag.RowsAffected())
		for _, pub := range def.pubs {
			for _, q := range []string{"partition_publication_add", "partition_publication_root"} {
				if _, err := tx.Exec(ctx, strings.ReplaceAll(s.sql.Get(q), "{publication}", pgx.Identifier{pub}.Sanitize())); err != nil {
					return err
				}
			}
		}
		rep.Converted = true
		return nil
	})
	switch {
	case isLockTimeout(err):
		return PartitionReport{}, fmt.Errorf("postgres: partition: the lock on %s was not granted within %s (transactions hold it): nothing changed, run it again: %w", s.Table("outbox_events"), PartitionLockTimeout, err)
	case err != nil:
		return PartitionReport{}, fmt.Errorf("postgres: partition: %w", err)
	}
	return rep, nil
}

// readTableDef reads what the conversion copies of the plain table, and
// refuses a unique index it cannot copy.
func (s *Store) readTableDef(ctx context.Context, tx pgx.Tx) (tableDef, error) {
	var def tableDef
	rows, err := tx.Query(ctx, s.sql.Get("partition_index_defs"))
	if err != nil {
		return def, err
	}
	type index struct {
		name, def                string
		unique, primary, isValid bool
	}
	indexes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (index, error) {
		var i index
		err := row.Scan(&i.name, &i.def, &i.unique, &i.primary, &i.isValid)
		return i, err
	})
	if err != nil {
		return def, err
	}
	for _, i := range indexes {
		def.names = append(def.names, i.name)
		switch {
		case i.primary || i.name == dedupKeyIndex:
		case i.unique:
			return def, fmt.Errorf("the unique index %s cannot be kept on a partitioned table (it does not hold the partition key, id): drop it first", i.name)
		case !i.isValid:
			// A failed concurrent build (MigrateOrdered builds it again).
		default:
			def.indexes = append(def.indexes, i.def)
		}
	}
	rows, err = tx.Query(ctx, s.sql.Get("partition_trigger_defs"))
	if err != nil {
		return def, err
	}
	var name, text, enabled string
	_, err = pgx.ForEachRow(rows, []any{&name, &text, &enabled}, func() error {
		def.triggers = append(def.triggers, text)
		if enabled == "D" {
			def.disabled = append(def.disabled, name)
		}
		return nil
	})
	if err != nil {
		return def, err
	}
	if err := tx.QueryRow(ctx, s.sql.Get("partition_table_options")).Scan(&def.options); err != nil {
		return def, err
	}
	rows, err = tx.Query(ctx, s.sql.Get("partition_publications"))
	if err != nil {
		return def, err
	}
	def.pubs, err = pgx.CollectRows(rows, pgx.RowTo[string])
	return def, err
}

// renamePlain renames the plain table, its indexes (names) and its
// sequence (outbox_events_unpartitioned…), freeing their names.
func (s *Store) renamePlain(ctx context.Context, tx pgx.Tx, names []string, seqName string) error {
	stmts := []string{s.expand("alter table {schema}.outbox_events rename to outbox_events_unpartitioned")}
	for _, n := range names {
		stmts = append(stmts, "alter index "+pgx.Identifier{s.schema, n}.Sanitize()+" rename to "+
			pgx.Identifier{"outbox_events_unpartitioned" + strings.TrimPrefix(n, "outbox_events")}.Sanitize())
	}
	stmts = append(stmts, "alter sequence "+seqName+" rename to outbox_events_unpartitioned_seq_seq")
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// moveDone moves the delivered events left in the plain table after the
// switch to the partitioned one, PartitionMoveBatch per transaction, then
// drops the plain table.
func (s *Store) moveDone(ctx context.Context) (int, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, s.sql.Get("partition_unpartitioned_exists")).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	moved := 0
	for {
		var deleted, inserted int
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_moving")); err != nil {
				return err
			}
			return tx.QueryRow(ctx, s.sql.Get("partition_move_done"), PartitionMoveBatch).Scan(&deleted, &inserted)
		})
		if err != nil {
			return moved, fmt.Errorf("postgres: partition: move delivered events (%d moved; run it again to go on): %w", moved, err)
		}
		moved += inserted
		if deleted == 0 { // a batch of requeued events only inserts none
			break
		}
	}
	if _, err := s.pool.Exec(ctx, s.sql.Get("partition_drop_unpartitioned")); err != nil {
		return moved, fmt.Errorf("postgres: partition: drop the plain table: %w", err)
	}
	return moved, nil
}

// withOptions is the WITH clause of storage options ("" for none).
func withOptions(options string) string {
	if options == "" {
		return ""
	}
	return " with (" + options + ")"
}

// rangeStart is the start of the interval that holds t: intervals are
// counted from the Unix epoch.
func rangeStart(t time.Time, interval time.Duration) time.Time {
	ms, step := t.UnixMilli(), interval.Milliseconds()
	start := ms - ms%step
	if ms < 0 && ms%step != 0 {
		start -= step
	}
	return time.UnixMilli(start).UTC()
}

// uuidBound is the smallest UUIDv7 of millisecond t: its 48-bit time, and
// every other bit zero. It is a partition's bound.
func uuidBound(t time.Time) uuid.UUID {
	var id uuid.UUID
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(id[:6], ms[2:])
	return id
}

// uuidTime is the time of the first 48 bits of id (a UUIDv7's
// millisecond).
func uuidTime(id uuid.UUID) time.Time {
	var ms [8]byte
	copy(ms[2:], id[:6])
	return time.UnixMilli(int64(binary.BigEndian.Uint64(ms[:]))).UTC()
}

// partitionName names the partition of the range starting at from:
// outbox_events_p20261202 with an interval of whole days,
// outbox_events_p20261202T1400 with whole minutes, with seconds else.
func partitionName(from time.Time, interval time.Duration) string {
	layout := "20060102T150405"
	switch {
	case interval%(24*time.Hour) == 0:
		layout = "20060102"
	case interval%time.Minute == 0:
		layout = "20060102T1504"
	}
	return "outbox_events_p" + from.UTC().Format(layout)
}

// boundExpr is the bound of the partition of [from, to), as
// pg_get_expr shows it.
func boundExpr(from, to time.Time) string {
	return fmt.Sprintf("FOR VALUES FROM ('%s') TO ('%s')", uuidBound(from), uuidBound(to))
}

// createPartition creates the partition name of [from, to) in tx.
func (s *Store) createPartition(ctx context.Context, tx pgx.Tx, name string, from, to time.Time, options string) error {
	q := fmt.Sprintf("create table %s partition of %s %s%s",
		pgx.Identifier{s.schema, name}.Sanitize(), s.Table("outbox_events"), boundExpr(from, to), withOptions(options))
	if _, err := tx.Exec(ctx, q); err != nil {
		return fmt.Errorf("create partition %s: %w", name, err)
	}
	return nil
}

// partitionInfo is one partition of the outbox.
type partitionInfo struct {
	name     string
	from, to time.Time // zero for the DEFAULT partition
}

// partitionBound reads a range partition's bound expression.
var partitionBound = regexp.MustCompile(`^FOR VALUES FROM \('([0-9a-f-]{36})'\) TO \('([0-9a-f-]{36})'\)$`)

// partitions lists the outbox's range partitions by range, and names its
// DEFAULT partition.
func (s *Store) partitions(ctx context.Context) (ranges []partitionInfo, err error) {
	rows, err := s.pool.Query(ctx, s.sql.Get("partition_list"))
	if err != nil {
		return nil, err
	}
	var name, bound string
	_, err = pgx.ForEachRow(rows, []any{&name, &bound}, func() error {
		m := partitionBound.FindStringSubmatch(bound)
		if m == nil {
			return nil // DEFAULT
		}
		from, to := uuid.MustParse(m[1]), uuid.MustParse(m[2])
		ranges = append(ranges, partitionInfo{name: name, from: uuidTime(from), to: uuidTime(to)})
		return nil
	})
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].from.Before(ranges[j].from) })
	return ranges, err
}

// rangeName names the partition of [lo, hi): partitionName(lo) for a
// whole interval's range; when lo is not the start of an interval (a range
// that an existing partition cut short, after a change of interval), both
// bounds to the millisecond (outbox_events_p20261202T140005_20261202T140010,
// a millisecond suffix where there is one), so that no two ranges share a
// name.
func rangeName(lo, hi time.Time, interval time.Duration) string {
	if lo.Equal(rangeStart(lo, interval)) {
		return partitionName(lo, interval)
	}
	stamp := func(t time.Time) string {
		t = t.UTC()
		if ms := t.Nanosecond() / int(time.Millisecond); ms != 0 {
			return t.Format("20060102T150405") + fmt.Sprintf("%03d", ms)
		}
		return t.Format("20060102T150405")
	}
	return "outbox_events_p" + stamp(lo) + "_" + stamp(hi)
}

// createAhead creates the partitions missing from now to two intervals
// ahead, each in a transaction that waits PartitionLockTimeout at most
// for its lock, and returns them and ranges with them. A range that an
// existing partition covers in part starts where that one ends; a range of
// which the DEFAULT partition holds events is left to the DEFAULT. A table
// with the partition's name fails it, unless it is that partition (a
// concurrent step created it).
func (s *Store) createAhead(ctx context.Context, ranges []partitionInfo, interval time.Duration, now time.Time) (created []string, all []partitionInfo, err error) {
	var options string
	if err := s.pool.QueryRow(ctx, s.sql.Get("partition_options")).Scan(&options); err != nil {
		return nil, ranges, fmt.Errorf("postgres: partitions: %w", err)
	}
	for _, m := range missingRanges(ranges, interval, now) {
		lo, hi := m.from, m.to
		name := rangeName(lo, hi, interval)
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
				return err
			}
			return s.createPartition(ctx, tx, name, lo, hi, options)
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23514" {
			// The DEFAULT partition holds events of the range (ids
			// chosen by producers, or a range dropped early): it keeps
			// serving the range.
			continue
		}
		if errors.As(err, &pgErr) && pgErr.Code == "42P07" {
			var bound string
			if err := s.pool.QueryRow(ctx, s.sql.Get("partition_bound_of"), name).Scan(&bound); err != nil {
				return created, ranges, fmt.Errorf("postgres: partitions: %w", err)
			}
			if bound != boundExpr(lo, hi) {
				return created, ranges, fmt.Errorf("postgres: partitions: the range %s to %s is not created: a table %s exists that is not its partition (bound %q)", lo.Format(time.RFC3339Nano), hi.Format(time.RFC3339Nano), name, bound)
			}
			ranges = append(ranges, partitionInfo{name: name, from: lo, to: hi})
			continue
		}
		if err != nil {
			return created, ranges, fmt.Errorf("postgres: partitions: %w", err)
		}
		created = append(created, name)
		ranges = append(ranges, partitionInfo{name: name, from: lo, to: hi})
	}
	sort.Slice(ranges, func(i, j int) bool { return ranges[i].from.Before(ranges[j].from) })
	return created, ranges, nil
}

// missingRanges are the ranges of the partitions to create, from now's
// interval to two intervals ahead, beside the existing ranges: each
// interval of the grid, starting where an existing partition that covers
// part of it ends (or ending where one begins), none where one covers it
// whole. The ranges it returns have no name.
func missingRanges(ranges []partitionInfo, interval time.Duration, now time.Time) []partitionInfo {
	var missing []partitionInfo
	for from := rangeStart(now, interval); !from.After(now.Add(2 * interval)); from = from.Add(interval) {
		lo, hi := from, from.Add(interval)
		for _, r := range ranges {
			if r.from.Before(hi) && r.to.After(lo) { // overlap
				if r.from.After(lo) {
					hi = r.from
				} else {
					lo = r.to
				}
			}
		}
		if lo.Before(hi) {
			missing = append(missing, partitionInfo{from: lo, to: hi})
		}
	}
	return missing
}

// expirePartitions is Expire on a partitioned outbox: it reports
// partitioned=false, doing nothing, when outbox_events is a plain table
// (Expire then deletes in batches).
//
// On a partitioned outbox it creates the partitions ahead (now to two
// intervals ahead), then drops the range partitions that are past (begun
// before now): those whose range ended before p.Before, or, with a zero
// Before, those that hold no delivered event and whose range ended more
// than an interval ago (see dropPartition: with p.Keep, a step hands one
// chunk of a partition's delivered events to Keep, More reporting the
// rest). A partition whose lock is not granted within
// PartitionLockTimeout is left to the next step, with an error that says
// so. The DEFAULT partition's delivered events processed before p.Before
// are then removed as a plain table's (p.Limit at a time, through Keep
// when set), and, as on a plain table, the delivered events processed an
// interval before p.Before that a partition still holds (ids that are not
// their creation time) and the held dedup keys whose hold has ended. A
// step that handed a partition's chunk to Keep, or whose drop waits,
// hands nothing else to Keep (one chunk per step; and the partition's
// events would be kept twice).
func (d *Driver) expirePartitions(ctx context.Context, p store.ExpireParams) (res store.ExpireResult, partitioned bool, err error) {
	kind, err := d.outboxKind(ctx)
	if err != nil || kind != "p" {
		return res, false, err
	}
	interval, err := d.partitionInterval(ctx)
	if err != nil {
		return res, true, err
	}
	now := time.Now()
	ranges, err := d.partitions(ctx)
	if err != nil {
		return res, true, fmt.Errorf("postgres: expire: %w", err)
	}
	// A leftover that cannot be dropped now (its lock held) does not
	// stop the step: its error is returned at the end, and the next step
	// tries again.
	leftErr := d.dropDetached(ctx, &res)
	res.Created, ranges, err = d.createAhead(ctx, ranges, interval, now)
	if err != nil {
		return res, true, err
	}
	created, err := d.createDeliveredAhead(ctx, interval, now)
	res.Created = append(res.Created, created...)
	leftErr = errors.Join(leftErr, err)
	var due []string
	for _, r := range ranges {
		switch {
		case r.from.After(now):
			// Created ahead: none of its events is older than now.
		case !p.Before.IsZero() && !r.to.After(p.Before):
			due = append(due, r.name)
		case p.Before.IsZero() && r.to.Add(interval).Before(now):
			var done bool
			if err := d.pool.QueryRow(ctx, d.partitionQuery("partition_has_done", r.name)).Scan(&done); err != nil {
				return res, true, fmt.Errorf("postgres: expire: %w", err)
			}
			if !done {
				due = append(due, r.name)
			}
		}
	}
	keeping := false // a partition's drop waits for Keep this step
	if p.Keep != nil {
		d.keep.mu.Lock()
		defer d.keep.mu.Unlock()
		// The partition being kept first, where its cursor is.
		if c := d.keep.cursor; c != nil {
			if i := slices.Index(due, c.partition); i > 0 {
				due = append(append([]string{c.partition}, due[:i]...), due[i+1:]...)
			}
		}
	}
	for _, name := range due {
		if keeping {
			res.More = true
			break
		}
		if keeping, err = d.dropPartition(ctx, p, name, &res); err != nil {
			return d.purgeHeldKeysOnError(ctx, p, res, err)
		}
	}
	if !p.Before.IsZero() && !keeping {
		r, err := sqlstore.Expire(ctx, defaultExpireSQL{d.Store}, p)
		res.Events += r.Events
		res.Kept += r.Kept
		res.More = res.More || r.More
		if err != nil {
			return d.purgeHeldKeysOnError(ctx, p, res, fmt.Errorf("postgres: expire the DEFAULT partition: %w", err))
		}
	}
	// What the drops leave that a plain table would remove: delivered
	// events processed more than an interval before p.Before (which a
	// partition of their ids' time holds only when their ids are not
	// their creation time), and the held dedup keys whose hold ended.
	// A step that removed events, or kept some of a partition, leaves
	// these events to the next step (at most p.Limit events as a batch
	// in one step), and only purges the keys.
	rest := p
	switch {
	case (res.Events > 0 || keeping) && !p.Before.IsZero():
		rest.Before = time.Time{}
	case !rest.Before.IsZero():
		rest.Before = rest.Before.Add(-interval)
	}
	r, err := sqlstore.Expire(ctx, expireSQL{d.Store}, rest)
	res.Events += r.Events
	res.Kept += r.Kept
	res.Keys = r.Keys
	res.More = res.More || r.More
	if err != nil {
		return res, true, errors.Join(leftErr, fmt.Errorf("postgres: %w", err))
	}
	return res, true, leftErr
}

// purgeHeldKeysOnError ends an expire step that failed (a Keep, a drop
// whose lock waited): the held dedup keys whose hold ended are purged all
// the same, as on a plain table, since they hold no event's data and a
// failing archive must not keep producers' keys taken. It returns err,
// joined with the purge's own error.
func (d *Driver) purgeHeldKeysOnError(ctx context.Context, p store.ExpireParams, res store.ExpireResult, err error) (store.ExpireResult, bool, error) {
	keys, kerr := expireSQL{d.Store}.PurgeHeldKeys(ctx, p.Limit)
	res.Keys = keys
	if kerr != nil {
		err = errors.Join(err, fmt.Errorf("postgres: purge held dedup keys: %w", kerr))
	}
	return res, true, err
}

// partitionQuery is a named query on the partition name.
func (s *Store) partitionQuery(query, name string) string {
	return strings.ReplaceAll(s.sql.Get(query), "{partition}", pgx.Identifier{name}.Sanitize())
}

// keepMargin is how long before a partition's Keep began a settle may
// have marked an event done that the Keep's reads did not see yet (its
// transaction had not committed): the drop checks those were kept.
const keepMargin = time.Minute

// keepState is where the Keep of a partition to drop is, across the
// steps of Expire (one chunk per step): in memory, so a process that
// restarts starts the partition over. That writes the same archive
// objects again (named by their content: the same chunks, the same
// names) and no event is lost: the drop checks that Keep saw every
// delivered event.
type keepState struct {
	mu     sync.Mutex // held through a step with Keep
	cursor *keepCursor
}

// keepCursor is the Keep of one partition, under way.
type keepCursor struct {
	partition string
	after     uuid.UUID   // the last event kept
	since     time.Time   // when its Keep began, less keepMargin
	late      []uuid.UUID // events kept that were delivered since then
	kept      int
}

// dropPartition drops a range partition. With p.Keep, it first hands the
// partition's delivered events to Keep, one chunk of p.Limit per step in
// id order, and reports keeping=true (More) while chunks are left; the
// step that kept the last one drops the partition, reporting every event
// kept of it (Kept) as it reports the events dropped (Events). A Keep
// that fails leaves the cursor where it was: the next step hands the same
// chunk again (the archive names objects by content).
//
// The drop: in one transaction waiting PartitionLockTimeout at most for
// its lock, it detaches the partition, moves its unfinished events back
// to the outbox (to the DEFAULT partition, ids and seq kept: leases still
// settle them; found by their partial indexes) and removes its delivered
// events' dedup keys (under the lock: a delivered row kept holds its key
// until it is gone); then it drops the detached table in a statement of
// its own, so that the removal of its files holds no lock on
// outbox_events (a table left detached by a stop between the two is
// dropped by the next step: dropDetached). No statement reads the partition's
// delivered rows but a sample of bounded size (without Keep): the events
// it reports (Events) are exact for a partition of up to 2 MiB, an
// estimate within a few percent for a larger one (partitionDone). An event
// delivered in the partition while Keep ran, which Keep did not see,
// makes the drop wait: the partition is kept over again from its start.
func (s *Store) dropPartition(ctx context.Context, p store.ExpireParams, name string, res *store.ExpireResult) (keeping bool, err error) {
	var c *keepCursor
	if p.Keep != nil {
		c = s.keep.cursor
		if c == nil || c.partition != name {
			c = &keepCursor{partition: name}
			if err := s.pool.QueryRow(ctx, "select now()").Scan(&c.since); err != nil {
				return false, fmt.Errorf("postgres: expire: %w", err)
			}
			c.since = c.since.Add(-keepMargin)
			s.keep.cursor = c
		}
		rows, err := s.pool.Query(ctx, s.partitionQuery("partition_keep_read", name), c.after, p.Limit)
		if err != nil {
			return false, fmt.Errorf("postgres: expire: read partition %s: %w", name, err)
		}
		events, err := pgx.CollectRows(rows, scanHistory)
		if isGoneTable(err) {
			s.keep.cursor = nil // another step kept and dropped it
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("postgres: expire: read partition %s: %w", name, err)
		}
		if len(events) > 0 {
			if err := p.Keep(ctx, events); err != nil {
				return false, fmt.Errorf("postgres: expire: keep the delivered events of partition %s (nothing dropped): %w", name, err)
			}
			c.kept += len(events)
			for _, e := range events {
				// A processed_at that is no time (infinity, where a
				// producer dropped the row bounds) reads as zero: late.
				if e.ProcessedAt.IsZero() || !e.ProcessedAt.Before(c.since) {
					c.late = append(c.late, e.ID)
				}
			}
			c.after = events[len(events)-1].ID
			if len(events) == p.Limit {
				res.More = true // chunks may be left: the next step
				return true, nil
			}
		}
	}
	// The events the drop removes, counted in a sample of the partition's
	// pages of bounded size (partitionDone): exact for a partition of up
	// to partitionSamplePages pages, estimated for a larger one, so that a
	// drop costs about the same whatever its rows. Kept events are counted
	// exactly: Keep read them all anyway.
	var done int
	if c != nil {
		if err := s.pool.QueryRow(ctx, s.partitionQuery("partition_count", name)).Scan(&done); isGoneTable(err) {
			s.keep.cursor = nil // another step kept and dropped it
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("postgres: expire: count partition %s: %w", name, err)
		}
	} else if done, err = s.partitionDone(ctx, name); isGoneTable(err) {
		return false, nil // another step dropped it
	} else if err != nil {
		return false, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.partitionQuery("partition_detach", name)); err != nil {
			return err
		}
		if c != nil {
			var unseen bool
			if err := tx.QueryRow(ctx, s.partitionQuery("partition_unkept", name), c.since, uuidArray(c.late)).Scan(&unseen); err != nil {
				return err
			}
			if unseen {
				return errUnkept
			}
		}
		for _, q := range []string{"partition_moving", "partition_move_back", "partition_drop_keys", "partition_mark_detached"} {
			if _, err := tx.Exec(ctx, s.partitionQuery(q, name)); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case isGoneTable(err):
		// Another step detached it first (and drops it, or left it for
		// dropDetached): nothing left to do here.
		if c != nil {
			s.keep.cursor = nil
		}
		return false, nil
	case errors.Is(err, errUnkept):
		s.keep.cursor = nil // over again, from a new start
		res.More = true
		return true, nil
	case isLockTimeout(err):
		return c != nil && c.kept > 0, fmt.Errorf("postgres: expire: partition %s: the lock on %s was not granted within %s (transactions hold it): left for the next step: %w", name, s.Table("outbox_events"), PartitionLockTimeout, err)
	case err != nil:
		return c != nil && c.kept > 0, fmt.Errorf("postgres: expire: drop partition %s: %w", name, err)
	}
	if c != nil {
		res.Kept += c.kept
		s.keep.cursor = nil
	}
	res.Events += done
	if err := s.dropDetachedTable(ctx, name); err != nil {
		return c != nil && c.kept > 0, fmt.Errorf("%w (the next step drops it)", err)
	}
	res.Dropped = append(res.Dropped, name)
	return c != nil && c.kept > 0, nil
}

// dropDetached drops the partitions a drop detached and did not drop (the
// process stopped between its transaction and the DROP: the transaction
// marked them, partition_mark_detached), naming them in res.Dropped.
func (s *Store) dropDetached(ctx context.Context, res *store.ExpireResult) error {
	rows, err := s.pool.Query(ctx, s.sql.Get("partition_detached"), s.schema)
	if err != nil {
		return fmt.Errorf("postgres: expire: list detached partitions: %w", err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: expire: list detached partitions: %w", err)
	}
	var errs []error
	for _, name := range left {
		if err := s.dropDetachedTable(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Dropped = append(res.Dropped, name)
	}
	return errors.Join(errs...)
}

// dropDetachedTable drops a partition a drop detached, waiting
// PartitionLockTimeout at most for its lock (a reader of it, a backup):
// a table it cannot drop now is dropped by a later step.
func (s *Store) dropDetachedTable(ctx context.Context, name string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.Get("partition_lock_timeout"), lockTimeoutSetting); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.partitionQuery("partition_drop", name))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: expire: drop the detached partition %s: %w", name, err)
	}
	return nil
}

// partitionSamplePages is how many of a partition's pages partitionDone
// reads at most: a partition of that many pages or fewer (2 MiB) is
// counted whole.
const partitionSamplePages = 256

// partitionDone is the delivered events of a partition, counted in a
// sample (sampledRows of partition_sample_done).
func (s *Store) partitionDone(ctx context.Context, name string) (int, error) {
	n, err := s.sampledRows(ctx, s.pool, name, "partition_sample_done")
	if err != nil {
		return 0, fmt.Errorf("postgres: expire: count partition %s: %w", name, err)
	}
	return int(n), nil
}

// rowQuerier runs a query of one row: the pool, or a transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// sampledRows is the rows of the partition name that the named query
// counts, in a random sample of about partitionSamplePages of its pages
// (TABLESAMPLE SYSTEM of the percent the query takes as $1; it returns the
// rows it counted and the pages holding rows it read) scaled to the whole
// by the pages read: exact for a partition of that many pages or fewer,
// within a few percent for a larger one, whose drop then reads a bounded
// part of it.
func (s *Store) sampledRows(ctx context.Context, q rowQuerier, name, query string) (int64, error) {
	var pages int64
	if err := q.QueryRow(ctx, s.sql.Get("partition_pages"), s.Table(name)).Scan(&pages); err != nil {
		return 0, err
	}
	percent := 100.0
	if pages > partitionSamplePages {
		percent = 100 * float64(partitionSamplePages) / float64(pages)
	}
	var sampled, seen int64
	if err := q.QueryRow(ctx, s.partitionQuery(query, name), percent).Scan(&sampled, &seen); err != nil {
		return 0, err
	}
	if percent == 100 || seen == 0 {
		return sampled, nil
	}
	return int64(math.Round(float64(sampled) * float64(pages) / float64(seen))), nil
}

// errUnkept: an event of the partition was delivered while Keep ran.
var errUnkept = errors.New("postgres: a delivered event of the partition was not kept")

// defaultExpireSQL is sqlstore.ExpireSQL on the DEFAULT partition alone
// (the range partitions are dropped whole). Its PurgeHeldKeys purges
// nothing: the step's catch-up Expire over the outbox does.
type defaultExpireSQL struct{ s *Store }

func (e defaultExpireSQL) ReadExpired(ctx context.Context, before time.Time, limit int) ([]store.HistoryEvent, error) {
	rows, err := e.s.pool.Query(ctx, e.s.sql.Get("partition_default_read"), before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanHistory)
}

func (e defaultExpireSQL) DeleteExpired(ctx context.Context, ids []uuid.UUID) (int, error) {
	tag, err := e.s.pool.Exec(ctx, e.s.sql.Get("partition_default_delete"), uuidArray(ids))
	return int(tag.RowsAffected()), err
}

func (e defaultExpireSQL) PurgeDone(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := e.s.pool.Exec(ctx, e.s.sql.Get("partition_default_purge"), before, limit)
	return int(tag.RowsAffected()), err
}

func (defaultExpireSQL) PurgeHeldKeys(context.Context, int) (int, error) { return 0, nil }

var _ sqlstore.ExpireSQL = defaultExpireSQL{}

// The partitioned outbox's enqueue: a partitioned table has no unique index
// of dedup keys for ON CONFLICT, so EnqueueTx's insert takes each key
// first (postbox_take_dedup_key), skipping the event when another holds it.
const (
	outboxKindUnknown int32 = iota
	outboxKindPlain
	outboxKindPartitioned
)

// skipInsertSQL is EnqueueTx's insert of n events for the outbox's kind,
// which it learns, once per store, through insert (the caller's
// transaction: a pool exhausted by producers' transactions has no
// connection to spare).
func (s *Store) skipInsertSQL(ctx context.Context, n int, insert insertFunc) (string, error) {
	kind := s.outboxKindSeen.Load()
	if kind == outboxKindUnknown {
		got, err := insert(ctx, s.sql.Get("partition_kind"), nil)
		if err != nil {
			return "", err
		}
		kind = outboxKindPlain
		if len(got) == 1 && got[0] == "p" {
			kind = outboxKindPartitioned
		}
		s.outboxKindSeen.Store(kind)
	}
	if kind == outboxKindPartitioned {
		return s.partitionedInsertSQL(n), nil
	}
	return s.insertSQL(n, true), nil
}

// outboxKindChanged reports the error of an insert in the form of
// another kind of outbox (the outbox was converted while the store ran:
// ON CONFLICT found no unique index of dedup keys; or converted back: no
// postbox_take_dedup_key): the next enqueue looks at the kind again.
func outboxKindChanged(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P10" || pgErr.Code == "42883")
}

// partitionedInsertSQL is insertSQL(n, true) for a partitioned outbox.
func (s *Store) partitionedInsertSQL(n int) string {
	q := s.insertSQL(n, false)
	var b strings.Builder
	head, values, _ := strings.Cut(q, "values ")
	b.WriteString(head)
	b.WriteString("select * from (values ")
	b.WriteString(values)
	b.WriteString(s.expand(") v (id, aggregate_type, aggregate_id, event_type, payload, dedup_key, headers, available_at)" +
		" where v.dedup_key is null or {schema}.postbox_take_dedup_key(v.dedup_key, v.id)" +
		" returning coalesce(dedup_key, '')"))
	return b.String()
}
