package postgres

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/postbox-go/postbox/store"
)

//go:embed wal.sql
var walSQL string

// WALConfig names the replication slot and the publication of WAL mode.
type WALConfig struct {
	// Slot is the logical replication slot. Slot names are the server's,
	// not a database's: the default, "postbox_", the database and the
	// schema (DefaultSlot), keeps the relays of two databases on one server
	// apart. Lower-case letters, digits and underscores, at most 63.
	Slot string
	// Publication publishes the outbox table's inserts (default: the
	// slot's name).
	Publication string
}

// WAL is the outbox's inserts read from the write-ahead log: a logical
// replication slot (pgoutput) on a publication of the outbox table only. The
// relay uses it as its stream (relay.Config.Stream); postbox status reads
// its State. It needs wal_level = logical and a user with the REPLICATION
// attribute (Check). Its slot is looked up, streamed and dropped only in
// the store's database: a slot of the same name in another database of the
// server is never touched.
type WAL struct {
	s           *Store
	slot        string
	publication string
	// legacy is the slot name of earlier versions ("postbox_" and the
	// schema) when the slot has its default name: Follow drops an idle
	// slot of that name in the store's database (see dropLegacySlot).
	legacy string
}

var slotName = regexp.MustCompile(`^[a-z0-9_]{1,63}$`)

// WAL returns the store's WAL stream. It does not touch the database: the
// publication and the slot are created by the first Follow.
func (s *Store) WAL(cfg WALConfig) (*WAL, error) {
	var legacy string
	if cfg.Slot == "" {
		cfg.Slot = DefaultSlot(s.database(), s.schema)
		legacy = "postbox_" + strings.ToLower(s.schema)
	}
	if cfg.Publication == "" {
		cfg.Publication = cfg.Slot
	}
	for _, name := range []string{cfg.Slot, cfg.Publication} {
		if !slotName.MatchString(name) {
			return nil, fmt.Errorf("postgres: WAL slot or publication %q: use lower-case letters, digits and underscores (at most 63)", name)
		}
	}
	return &WAL{s: s, slot: cfg.Slot, publication: cfg.Publication, legacy: legacy}, nil
}

// DefaultSlot is the default slot name of a database and a schema:
// "postbox_<database>_<schema>". A name that would be longer than 63
// bytes or hold other characters than lower-case letters, digits and
// underscores is cut and cleaned (others become "_"), and ends with a
// hash of the database and schema names, which keeps it unique.
func DefaultSlot(database, schema string) string {
	name := "postbox_" + database + "_" + schema
	if slotName.MatchString(name) {
		return name
	}
	sum := sha256.Sum256([]byte(database + "\x00" + schema))
	suffix := "_" + hex.EncodeToString(sum[:5])
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			return r
		case r >= 'A' && r <= 'Z':
			return r - 'A' + 'a'
		}
		return '_'
	}, name)
	return name[:min(len(name), 63-len(suffix))] + suffix
}

// database is the name of the store's database, as its connections ask for
// it: the server's default is the user's name.
func (s *Store) database() string {
	cfg := s.pool.Config().ConnConfig
	if cfg.Database != "" {
		return cfg.Database
	}
	return cfg.User
}

// Slot is the replication slot's name.
func (w *WAL) Slot() string { return w.slot }

// Publication is the publication's name.
func (w *WAL) Publication() string { return w.publication }

// String names the stream for logs: "slot S (publication P)".
func (w *WAL) String() string {
	return fmt.Sprintf("slot %s (publication %s)", w.slot, w.publication)
}

// Check returns an error saying what to do when the server or the user
// cannot stream: wal_level is not logical, or the user lacks REPLICATION.
func (w *WAL) Check(ctx context.Context) error {
	var level string
	var replication bool
	if err := w.s.pool.QueryRow(ctx, w.s.sql.Get("wal_preconditions")).Scan(&level, &replication); err != nil {
		return fmt.Errorf("postgres: WAL mode: %w", err)
	}
	if level != "logical" {
		return fmt.Errorf("postgres: WAL mode needs wal_level = logical, and the server has %s: run \"alter system set wal_level = logical\" as a superuser and restart PostgreSQL (or run the relay without --wal)", level)
	}
	if !replication {
		return errors.New("postgres: WAL mode needs a user with the REPLICATION attribute: run \"alter role <user> replication\" as a superuser (or run the relay without --wal)")
	}
	return nil
}

// SlotState is what the server knows of the slot.
type SlotState struct {
	// Exists is false until the first relay in WAL mode has streamed.
	Exists bool
	// Active: a relay streams the slot now (it has started streaming: a
	// slot being created is not active yet).
	Active bool
	// RetainedBytes is the WAL the slot keeps from being recycled: from
	// the position it last confirmed to the server's current one. It grows
	// while no relay streams the slot.
	RetainedBytes int64
}

// State reads the slot's state (a slot of its name in another database
// does not exist for it).
func (w *WAL) State(ctx context.Context) (SlotState, error) {
	st := SlotState{Exists: true}
	err := w.s.pool.QueryRow(ctx, w.s.sql.Get("wal_slot_state"), w.slot).Scan(&st.Active, &st.RetainedBytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return SlotState{}, nil
	}
	if err != nil {
		return SlotState{}, fmt.Errorf("postgres: slot %s: %w", w.slot, err)
	}
	return st, nil
}

// WALBehind is how far, in bytes of the server's flushed WAL, the slot's
// walsender may be from the end before the stream counts as behind
// (Behind): at the rates a slot decodes on a small server, some tens of
// milliseconds of writes.
const WALBehind = 256 << 10

// Behind reports whether the relay streaming the slot (this process's or
// another's) has more than WALBehind bytes of the server's flushed WAL left
// to decode: it is still reading older writes (a drain's claims and
// settles, a bulk load elsewhere on the server), and new commits reach it
// only after them. While no relay streams the slot it is not behind.
func (w *WAL) Behind(ctx context.Context) (bool, error) {
	var lag int64
	err := w.s.pool.QueryRow(ctx, w.s.sql.Get("wal_lag"), w.slot).Scan(&lag)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("postgres: lag of slot %s: %w", w.slot, err)
	}
	return lag > WALBehind, nil
}

// Drop drops the slot and the publication (the slot must not be active:
// stop the relays streaming it first). Events written since are delivered
// by the relays' polling claims, or by the stream of a new slot. It is
// DropSlot without saying whether the slot existed.
func (w *WAL) Drop(ctx context.Context) error {
	_, err := w.DropSlot(ctx)
	return err
}

// DropSlot drops the slot, if the store's database has it, and the
// publication, and reports whether the slot existed. A slot of the same
// name in another database is left alone.
func (w *WAL) DropSlot(ctx context.Context) (existed bool, err error) {
	tag, err := w.s.pool.Exec(ctx, w.s.sql.Get("wal_drop_slot"), w.slot)
	if err != nil {
		return false, fmt.Errorf("postgres: drop slot %s: %w", w.slot, err)
	}
	if _, err := w.s.pool.Exec(ctx, w.publicationSQL("wal_drop_publication")); err != nil {
		return false, fmt.Errorf("postgres: drop publication %s: %w", w.publication, err)
	}
	return tag.RowsAffected() > 0, nil
}

// SetProducerNotify turns the producers' notify trigger on (the default
// mode, where relays wait for notifications) or off (WAL mode, where the
// stream brings the events and producers' commits skip the trigger).
func (s *Store) SetProducerNotify(ctx context.Context, on bool) error {
	query := "producer_notify_off"
	if on {
		query = "producer_notify_on"
	}
	if _, err := s.pool.Exec(ctx, s.sql.Get(query)); err != nil {
		return fmt.Errorf("postgres: %s: %w", strings.ReplaceAll(query, "_", " "), err)
	}
	return nil
}

func (w *WAL) publicationSQL(name string) string {
	return strings.ReplaceAll(w.s.sql.Get(name), "{publication}", pgx.Identifier{w.publication}.Sanitize())
}

// walStatusInterval is how often the stream confirms its position to the
// server (and how long a receive waits at most).
const walStatusInterval = time.Second

// walTxnQueue bounds the committed transactions read ahead of deliveries.
const walTxnQueue = 4096

// walBatchMax bounds the events handed to one call of Follow's deliver.
const walBatchMax = 2000

// committed is what the stream read of one transaction: the ids of the
// outbox events it inserted, and the position just past its commit. A
// position read from a keepalive comes with no ids.
type committed struct {
	xid uint32
	ids []uuid.UUID
	end pglogrepl.LSN
}

// WALClaim is the claim of a batch that Follow hands to start.
type WALClaim = func(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error)

// walStart is Follow's start.
type walStart = func(ctx context.Context, ids []uuid.UUID, claim WALClaim) (wait func() error)

// Follow creates the publication and the slot if missing, streams the slot,
// and calls start with the ids of the outbox's inserts, in commit order,
// a batch of whole transactions at a time, and the batch's claim: it
// leases, as Claim does, those of the batch's events that are due and not
// leased, once their transactions are visible to claims (it waits for
// that), so that the stream and the polling claims never hold one event at
// once. start claims the batch and begins its delivery, and returns a
// function that waits until the outcome of each is recorded (delivered,
// retry scheduled, failed, or back in the table); Follow starts up to walPipeline (64)
// batches, of walPipelineEvents (8,000) events in all, before waiting for
// the oldest. It confirms a position to the server only once the waits of
// everything committed before it returned nil, so that after a crash the
// stream starts again from the first batch not confirmed: events may come
// twice, never not at all.
//
// Follow returns when ctx ends (nil), a wait fails, or the stream cannot
// run: the slot is streamed by another relay (a second one then waits,
// calling Follow again), the connection broke.
func (w *WAL) Follow(ctx context.Context, start func(ctx context.Context, ids []uuid.UUID, claim WALClaim) (wait func() error)) error {
	if err := w.createPublication(ctx); err != nil {
		return err
	}
	conn, err := w.connect(ctx)
	if err != nil {
		return err
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(closeCtx)
	}()
	if err := w.createSlot(ctx, conn); err != nil {
		return err
	}
	err = pglogrepl.StartReplication(ctx, conn, w.slot, 0, pglogrepl.StartReplicationOptions{
		PluginArgs: []string{"proto_version '1'", fmt.Sprintf("publication_names '%s'", w.publication)},
	})
	if err != nil {
		return fmt.Errorf("postgres: stream slot %s: %w", w.slot, err)
	}

	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	txns := make(chan committed, walTxnQueue)
	var confirmed lsnBox
	readErr := make(chan error, 1)
	go func() {
		readErr <- w.read(streamCtx, conn, txns, &confirmed)
		close(txns)
	}()
	deliverErr := w.deliverAll(streamCtx, txns, &confirmed, start)
	stop()
	err = <-readErr
	switch {
	case ctx.Err() != nil:
		return nil
	case deliverErr != nil:
		return deliverErr
	}
	return err
}

// walPipeline bounds the batches whose delivery has started and whose
// outcomes are not all recorded yet: the next batch is claimed and sent
// while the previous ones wait for their acknowledgements and settles. A
// batch lives until its outcomes are recorded, which the relay's settler
// gathers for a few milliseconds: at 2,000 events/s that is a dozen small
// batches at once, and a stream that waited for the oldest of four held
// new events back by milliseconds. (Positions read from keepalives, which
// the server sends after each transaction while it is not confirmed, take
// no slot: see deliverAll.)
const walPipeline = 64

// walPipelineEvents bounds the events of the batches started and not
// finished (as four full batches did): a backlog is not claimed further
// ahead of its outcomes than that.
const walPipelineEvents = 4 * walBatchMax

// startedBatch is a batch handed to Follow's start: the position just past
// its last transaction, its events, and the outcome of its wait, once known.
type startedBatch struct {
	end    pglogrepl.LSN
	events int
	done   chan error
}

// deliverAll hands the transactions read to start, a batch at a time, up
// to walPipeline batches and walPipelineEvents events at once, and
// records the position of each batch once its wait, and the wait of every
// batch before it, returned nil. It returns when txns is closed, ctx ends
// or a batch failed, once every batch started has ended.
func (w *WAL) deliverAll(ctx context.Context, txns <-chan committed, confirmed *lsnBox, start walStart) error {
	var started []startedBatch
	events := 0 // in the batches started
	defer func() {
		for _, b := range started {
			<-b.done
		}
	}()
	// finish records err, the outcome of the oldest batch started.
	finish := func(err error) error {
		b := started[0]
		started = started[1:]
		events -= b.events
		if err != nil {
			return err
		}
		confirmed.advance(b.end)
		return nil
	}
	for {
		var oldest <-chan error
		if len(started) > 0 {
			oldest = started[0].done
		}
		read := txns
		if len(started) >= walPipeline || events >= walPipelineEvents {
			read = nil
		}
		select {
		case err := <-oldest:
			if err := finish(err); err != nil {
				return err
			}
		case first, ok := <-read:
			if !ok {
				for len(started) > 0 {
					if err := finish(<-started[0].done); err != nil {
						return err
					}
				}
				return nil
			}
			b, err := w.startBatch(ctx, first, txns, start)
			switch {
			case err != nil:
				return err
			case b.events > 0:
				started = append(started, b)
				events += b.events
			case len(started) > 0:
				// Nothing to deliver (a keepalive's position): it is
				// confirmed with the last batch started, in no slot of
				// its own.
				started[len(started)-1].end = b.end
			default:
				confirmed.advance(b.end)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// startBatch takes first and the transactions read after it that are
// waiting, up to walBatchMax events, and starts their delivery. A batch without events (positions
// read from keepalives) is not started: its done is never written.
func (w *WAL) startBatch(ctx context.Context, first committed, txns <-chan committed, start walStart) (startedBatch, error) {
	var ids []uuid.UUID
	var xids []int64
	b := startedBatch{end: first.end, done: make(chan error, 1)}
	for t, ok := first, true; ok; {
		if len(t.ids) > 0 {
			ids = append(ids, t.ids...)
			xids = append(xids, int64(t.xid))
		}
		b.end = t.end
		if len(ids) >= walBatchMax {
			break
		}
		select {
		case t, ok = <-txns:
		default:
			ok = false
		}
	}
	b.events = len(ids)
	if len(ids) == 0 {
		return b, nil
	}
	wait := start(ctx, ids, func(ctx context.Context, p store.ClaimParams) ([]store.ClaimedEvent, error) {
		return w.claim(ctx, p, ids, xids)
	})
	go func() { b.done <- wait() }()
	return b, nil
}

// claim leases to p.Owner, for p.Lease, those of ids that are due and that
// no relay holds (at most p.Limit), as Claim does, once the transactions
// xids that wrote them are visible to claims, and returns them in sequence
// order. A commit reaches the log a moment before its rows become visible:
// the claim statement claims nothing until they all are (claim_ids), so
// the common case is one round trip; when it found nothing, wal_visible
// tells transactions not visible yet (claim again, after a pause) from
// events already taken.
func (w *WAL) claim(ctx context.Context, p store.ClaimParams, ids []uuid.UUID, xids []int64) ([]store.ClaimedEvent, error) {
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		got, err := w.claimIDs(ctx, p, ids, xids)
		if err != nil || len(got) > 0 {
			return got, err
		}
		var visible bool
		if err := w.s.pool.QueryRow(ctx, w.s.sql.Get("wal_visible"), xids).Scan(&visible); err != nil {
			return nil, fmt.Errorf("postgres: stream slot %s: %w", w.slot, err)
		}
		if visible {
			// The claim may have run just before they became visible:
			// once more, and that is all it will ever claim.
			return w.claimIDs(ctx, p, ids, xids)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}

// claimIDs runs claim_ids once: a row no event can be read from comes back
// with Invalid saying why (the query's last column) instead of failing the
// claim of the batch.
func (w *WAL) claimIDs(ctx context.Context, p store.ClaimParams, ids []uuid.UUID, xids []int64) ([]store.ClaimedEvent, error) {
	var invalid string
	var bad map[uuid.UUID]string
	got, err := w.s.claim(ctx, w.s.sql.Get("claim_ids"), p, []any{&invalid}, func(d store.ClaimedEvent) {
		if invalid != "" {
			if bad == nil {
				bad = map[uuid.UUID]string{}
			}
			bad[d.ID] = invalid
		}
	}, ids, xids)
	for i := range got {
		if why, ok := bad[got[i].ID]; ok {
			got[i].Invalid = why
		}
	}
	return got, err
}

// read decodes the stream into committed transactions, answers the
// server's keepalives, and confirms the delivered position every
// walStatusInterval. It is the only user of conn.
func (w *WAL) read(ctx context.Context, conn *pgconn.PgConn, txns chan<- committed, confirmed *lsnBox) error {
	idColumn := map[uint32]int{} // outbox relation id -> position of its id column
	var txn *committed
	var sent pglogrepl.LSN
	nextStatus := time.Now().Add(walStatusInterval)
	for {
		if pos := confirmed.get(); pos > sent || time.Now().After(nextStatus) {
			if err := w.confirm(ctx, conn, pos); err != nil {
				return err
			}
			sent, nextStatus = pos, time.Now().Add(walStatusInterval)
		}
		recvCtx, cancel := context.WithDeadline(ctx, nextStatus)
		msg, err := conn.ReceiveMessage(recvCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if pgconn.Timeout(err) {
				continue
			}
			return fmt.Errorf("postgres: stream slot %s: %w", w.slot, err)
		}
		var data []byte
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			data = m.Data
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("postgres: stream slot %s: %w", w.slot, pgconn.ErrorResponseToPgError(m))
		default:
			continue
		}
		if len(data) == 0 {
			continue
		}
		switch data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
			if err != nil {
				return fmt.Errorf("postgres: stream slot %s: %w", w.slot, err)
			}
			if txn == nil {
				// Everything before ka.ServerWALEnd was sent: once the
				// transactions read are delivered, it may be confirmed.
				select {
				case txns <- committed{end: ka.ServerWALEnd}:
				default:
				}
			}
			if ka.ReplyRequested {
				nextStatus = time.Time{}
			}
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(data[1:])
			if err != nil {
				return fmt.Errorf("postgres: stream slot %s: %w", w.slot, err)
			}
			if err := w.decode(ctx, x.WALData, idColumn, &txn, txns); err != nil {
				return err
			}
		}
	}
}

// decode reads one pgoutput message: it remembers the outbox relation's id
// column, collects the ids a transaction inserts and queues the
// transaction at its commit. An insert whose id it cannot read is left to
// the polling claims.
func (w *WAL) decode(ctx context.Context, data []byte, idColumn map[uint32]int, txn **committed, txns chan<- committed) error {
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		return fmt.Errorf("postgres: stream slot %s: %w", w.slot, err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessage:
		if m.Namespace != w.s.schema || m.RelationName != "outbox_events" {
			return nil
		}
		for i, c := range m.Columns {
			if c.Name == "id" {
				idColumn[m.RelationID] = i
				return nil
			}
		}
		return fmt.Errorf("postgres: stream slot %s: the outbox table has no id column", w.slot)
	case *pglogrepl.BeginMessage:
		*txn = &committed{xid: m.Xid}
	case *pglogrepl.InsertMessage:
		i, ok := idColumn[m.RelationID]
		if !ok || *txn == nil || m.Tuple == nil || i >= len(m.Tuple.Columns) {
			return nil
		}
		id, err := uuid.ParseBytes(m.Tuple.Columns[i].Data)
		if err != nil {
			// Not an id the stream can claim by: the polling claims
			// take the row, and the stream goes on.
			return nil
		}
		(*txn).ids = append((*txn).ids, id)
	case *pglogrepl.CommitMessage:
		if *txn == nil {
			return nil
		}
		(*txn).end = m.TransactionEndLSN
		select {
		case txns <- **txn:
		case <-ctx.Done():
		}
		*txn = nil
	}
	return nil
}

// confirm tells the server that everything before pos is delivered: the
// slot may let that WAL go. It also keeps the connection alive; the server
// ignores a zero position (nothing delivered yet).
func (w *WAL) confirm(ctx context.Context, conn *pgconn.PgConn, pos pglogrepl.LSN) error {
	err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos})
	if err != nil {
		return fmt.Errorf("postgres: confirm slot %s at %s: %w", w.slot, pos, err)
	}
	return nil
}

// connect opens a replication connection like the pool's connections. A
// receive that waits past its deadline gives up without cancelling on the
// server, so the connection lives on.
func (w *WAL) connect(ctx context.Context) (*pgconn.PgConn, error) {
	cfg := w.s.pool.Config().ConnConfig.Config.Copy()
	cfg.RuntimeParams["replication"] = "database"
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	connectCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgconn.ConnectConfig(connectCtx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: replication connection: %w", err)
	}
	return conn, nil
}

func (w *WAL) createPublication(ctx context.Context) error {
	var exists bool
	if err := w.s.pool.QueryRow(ctx, w.s.sql.Get("wal_publication_exists"), w.publication).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: publication %s: %w", w.publication, err)
	}
	if exists {
		return nil
	}
	_, err := w.s.pool.Exec(ctx, w.publicationSQL("wal_create_publication"))
	if err != nil && !isDuplicate(err) {
		return fmt.Errorf("postgres: create publication %s: %w", w.publication, err)
	}
	return nil
}

// createSlot creates the slot unless the store's database has it, and
// drops an idle slot of the name earlier versions gave it
// (dropLegacySlot). A slot of the name in another database is an error
// that names it.
func (w *WAL) createSlot(ctx context.Context, conn *pgconn.PgConn) error {
	st, err := w.State(ctx)
	if err != nil {
		return err
	}
	if !st.Exists {
		_, err = pglogrepl.CreateReplicationSlot(ctx, conn, w.slot, "pgoutput",
			pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
		if err != nil && !isDuplicate(err) {
			return fmt.Errorf("postgres: create slot %s: %w", w.slot, err)
		}
		if err != nil {
			if err := w.checkSlotDatabase(ctx); err != nil {
				return err
			}
		}
	}
	return w.dropLegacySlot(ctx)
}

// checkSlotDatabase returns an error naming the database that has the slot
// when it is not the store's.
func (w *WAL) checkSlotDatabase(ctx context.Context) error {
	var database string
	var ours bool
	err := w.s.pool.QueryRow(ctx, w.s.sql.Get("wal_slot_database"), w.slot).Scan(&database, &ours)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: slot %s: %w", w.slot, err)
	}
	if err == nil && !ours {
		return fmt.Errorf("postgres: slot %s belongs to the database %q of this server, not to this one: give this database's relays a slot name of their own (--wal-slot)", w.slot, database)
	}
	return nil
}

// dropLegacySlot migrates a deployment of an earlier version, whose
// default slot was "postbox_" and the schema alone (one name for every
// database of a server): the slot of that name in the store's database,
// when no relay streams it, is dropped with its publication. What it had
// not confirmed is delivered by the polling claims; while relays of the
// earlier version still stream it, it stays.
func (w *WAL) dropLegacySlot(ctx context.Context) error {
	if w.legacy == "" || w.legacy == w.slot {
		return nil
	}
	tag, err := w.s.pool.Exec(ctx, w.s.sql.Get("wal_drop_idle_slot"), w.legacy)
	if err != nil {
		return fmt.Errorf("postgres: drop the slot of an earlier version %s: %w", w.legacy, err)
	}
	if tag.RowsAffected() == 0 {
		return nil
	}
	legacyPublication := strings.ReplaceAll(w.s.sql.Get("wal_drop_publication"), "{publication}", pgx.Identifier{w.legacy}.Sanitize())
	if _, err := w.s.pool.Exec(ctx, legacyPublication); err != nil {
		return fmt.Errorf("postgres: drop the publication of an earlier version %s: %w", w.legacy, err)
	}
	return nil
}

// isDuplicate reports a duplicate_object error: another relay created it.
func isDuplicate(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42710"
}

// lsnBox is a position shared by the delivering and the reading goroutine.
type lsnBox struct{ v atomic.Uint64 }

// advance moves the position forward to pos (never back).
func (b *lsnBox) advance(pos pglogrepl.LSN) {
	for {
		cur := b.v.Load()
		if uint64(pos) <= cur || b.v.CompareAndSwap(cur, uint64(pos)) {
			return
		}
	}
}

func (b *lsnBox) get() pglogrepl.LSN { return pglogrepl.LSN(b.v.Load()) }
