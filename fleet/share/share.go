// Package share shares sources (outbox schemas, in one or many PostgreSQL
// databases) out among the relay processes that run at once, with nothing
// but PostgreSQL: no coordinator of postbox's own, no table, no heartbeat.
//
// # Membership
//
// Every process of a fleet joins it on one "fleet" database (Join): on one
// connection of its own, outside any pool, it takes the session-level
// advisory lock
//
//	pg_advisory_lock(key1, slot)
//
// of the lowest free slot number (0, 1, 2, ..., tried with
// pg_try_advisory_lock), where key1 is the fleet's key (Key: the FNV-1a 32
// hash of KeyPrefix followed by Options.Fleet, so that two unrelated fleets
// on one database do not mix). The process is a member as long as its
// session holds the lock: the live members are the granted advisory locks
// of the fleet in pg_locks. PostgreSQL shows a lock taken with two int4
// keys with locktype 'advisory', classid = key1 (as an oid: a negative key
// reads as its two's complement), objid = key2 (the slot) and objsubid = 2;
// the database column tells the fleet database apart from others of the
// cluster (Live reads
//
//	select objid::int8, pid from pg_locks
//	 where locktype = 'advisory' and objsubid = 2 and granted
//	   and classid = <key1> and database = <this database's oid>
//
// and an operator may too). A process that ends, crashes or loses its
// connection loses its lock when the server ends its session: it vanishes
// from pg_locks at once, and its slot is free for the next process that
// joins. A connection whose peer vanished without a word (a failover, a
// dropped NAT state) is ended by its TCP keepalives, set up as the relay's
// pools set them up (probes after 10 s of silence, every 5 s, 3 of them;
// TCP_USER_TIMEOUT of 20 s on Linux), on the server's side by its own
// tcp_keepalives_* settings.
//
// The lock lives as long as the session, so the member's connection must
// reach PostgreSQL itself, or go through a pooler in session mode: a
// pooler in transaction mode (PgBouncer's) would hand the session, and its
// lock, to others.
//
// # Sharing
//
// Each member reads the live slots (Live, or Watch, which calls back when
// they change) and computes the sources it drains with Mine: rendezvous
// (highest-random-weight) hashing, each source going to the replicas live
// slots whose hash of (source, slot) is highest. Every member computes the
// same answer from the same live set, with no exchange; when a slot joins
// or leaves, only the sources it gains or had move.
//
// # Guarantees
//
// Members see a change of the live set at their next poll, so for up to
// one Watch period after a change two members may drain one source (the
// new owner at once, the old one until it polls): the relay's claims hold
// leases, which makes that overlap safe. A source is drained by nobody
// only between a member's death (or the end of its session) and the next
// poll of the members that take its sources over: at most one Watch
// period, plus the time the server takes to end the dead session (at once
// for a process that ends; the keepalive timeouts for a vanished peer).
// A member whose own lock is gone (its connection broke, or its statement
// was cut short, which closes the connection) finds out at its next poll:
// Live and Watch return an error wrapping ErrLost, and it must stop
// draining and Join again.
//
// Membership proves that a process's session lives, not that the process
// makes progress: a process that hangs with its connection open keeps its
// slot, and its sources wait for it (a relay should exit, or Close its
// member, when its draining stalls). Each poll reads pg_locks once, which is cheap:
// a period of a few seconds suits a fleet of a few dozen processes.
package share

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/postbox-go/postbox/internal/redact"
)

// KeyPrefix is hashed before the fleet's name into the first key of its
// advisory locks (Key).
const KeyPrefix = "postbox fleet:"

// FleetDefault is the fleet a zero Options.Fleet names.
const FleetDefault = "default"

// TimeoutDefault bounds each statement of a Member, and its connect, when
// Options.Timeout is zero.
const TimeoutDefault = 5 * time.Second

// ApplicationName is the application_name of a member's connection when
// its config sets none.
const ApplicationName = "postbox fleet member"

// maxSlots bounds the slot numbers Join tries.
const maxSlots = 1 << 16

// How a member's connection finds a dead peer: as store/postgres's pools.
const (
	keepAliveIdle     = 10 * time.Second
	keepAliveInterval = 5 * time.Second
	keepAliveCount    = 3
	userTimeout       = 20 * time.Second
	dialTimeout       = 5 * time.Second
)

// ErrLost is wrapped by the errors of a Member that no longer holds its
// slot, or cannot tell: its connection broke or was closed, or its lock is
// not in pg_locks. The process must stop draining its sources and Join
// again.
var ErrLost = errors.New("share: the fleet slot is lost")

// Options configure Join.
type Options struct {
	// Fleet names the fleet (FleetDefault when empty): processes that share
	// sources join the same fleet, on the same database.
	Fleet string
	// Timeout bounds the connect and each statement (TimeoutDefault when
	// zero). A statement cut short closes the connection: the slot is lost.
	Timeout time.Duration
}

// Key returns the first key of fleet's advisory locks: the FNV-1a 32 hash
// of KeyPrefix+fleet (FleetDefault when empty), as an int4.
func Key(fleet string) int32 {
	h := fnv.New32a()
	h.Write([]byte(KeyPrefix + cmp.Or(fleet, FleetDefault)))
	return int32(h.Sum32())
}

// Member is a process's membership of a fleet: one slot, held by an
// advisory lock on a connection of its own. Its methods are safe for
// concurrent use (they take turns on the connection).
type Member struct {
	key     int32
	slot    int
	pid     uint32
	timeout time.Duration
	secret  secrets

	mu   sync.Mutex
	conn *pgx.Conn
}

// Join connects to the fleet database with a copy of connConfig (its
// dialer replaced by one with TCP keepalives; application_name set to
// ApplicationName unless it sets one) and takes the lowest free slot of
// opt.Fleet. Close the Member to give the slot back.
func Join(ctx context.Context, connConfig *pgx.ConnConfig, opt Options) (*Member, error) {
	if connConfig == nil {
		return nil, errors.New("share: join: no connection config")
	}
	timeout := cmp.Or(opt.Timeout, TimeoutDefault)
	cfg := connConfig.Copy()
	sec := secrets{dsn: connConfig.ConnString(), password: connConfig.Password}
	dialer := &net.Dialer{
		Timeout: cmp.Or(cfg.ConnectTimeout, dialTimeout),
		KeepAliveConfig: net.KeepAliveConfig{
			Enable: true, Idle: keepAliveIdle, Interval: keepAliveInterval, Count: keepAliveCount,
		},
		Control: setUserTimeout,
	}
	cfg.DialFunc = dialer.DialContext
	// A statement whose context ends returns at once and its connection is
	// closed: on a dead link, a cancel request would wait on a server that
	// does not answer.
	cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.DeadlineContextWatcherHandler{Conn: c.Conn()}
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = ApplicationName
	}

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, sec.scrub(fmt.Errorf("share: join: connect: %w", err))
	}
	m := &Member{key: Key(opt.Fleet), timeout: timeout, secret: sec, conn: conn, pid: conn.PgConn().PID()}
	if err := m.take(ctx); err != nil {
		m.closeConn()
		return nil, err
	}
	return m, nil
}

// take takes the lowest free slot: it skips those pg_locks shows held, and
// tries the others in turn (another process may take one first).
func (m *Member) take(ctx context.Context) error {
	for range 3 {
		held, err := m.read(ctx)
		if err != nil {
			return fmt.Errorf("share: join: %w", err)
		}
		taken := map[int]bool{}
		for _, h := range held {
			taken[h.slot] = true
		}
		for slot := 0; slot < maxSlots && slot <= len(held)+8; slot++ {
			if taken[slot] {
				continue
			}
			var ok bool
			err := m.stmt(ctx, func(ctx context.Context) error {
				return m.conn.QueryRow(ctx, "select pg_try_advisory_lock($1::int4, $2::int4)", m.key, int32(slot)).Scan(&ok)
			})
			if err != nil {
				return fmt.Errorf("share: join: take slot %d: %w", slot, err)
			}
			if ok {
				m.slot = slot
				return nil
			}
		}
		// Others took every slot tried meanwhile: read again.
	}
	return errors.New("share: join: no free slot found (the fleet's slots change too fast)")
}

// Slot returns the member's slot number.
func (m *Member) Slot() int { return m.slot }

// Live returns the slots the fleet's members hold now, sorted, the
// member's own among them. An error wraps ErrLost when the member no
// longer holds its slot (or its connection broke: a statement cut short by
// ctx or the timeout closes it): Close it and Join again.
func (m *Member) Live(ctx context.Context) ([]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn.IsClosed() {
		return nil, fmt.Errorf("share: live: %w: the connection is closed", ErrLost)
	}
	held, err := m.read(ctx)
	if err != nil {
		if m.conn.IsClosed() {
			return nil, fmt.Errorf("share: live: %w: %w", ErrLost, err)
		}
		return nil, fmt.Errorf("share: live: %w", err)
	}
	own := false
	live := make([]int, 0, len(held))
	for _, h := range held {
		if h.slot == m.slot && h.pid == m.pid {
			own = true
		}
		live = append(live, h.slot)
	}
	if !own {
		return nil, fmt.Errorf("share: live: %w: slot %d is not held by this member's session", ErrLost, m.slot)
	}
	return live, nil
}

type holder struct {
	slot int
	pid  uint32
}

// read returns the fleet's granted locks, by slot.
func (m *Member) read(ctx context.Context) ([]holder, error) {
	var held []holder
	err := m.stmt(ctx, func(ctx context.Context) error {
		held = held[:0]
		rows, err := m.conn.Query(ctx, `select objid::int8, pid from pg_locks
 where locktype = 'advisory' and objsubid = 2 and granted
   and classid = ($1::int8 & 4294967295)::oid
   and database = (select oid from pg_database where datname = current_database())
 order by objid::int8`, int64(m.key))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var slot int64
			var pid int32
			if err := rows.Scan(&slot, &pid); err != nil {
				return err
			}
			held = append(held, holder{slot: int(slot), pid: uint32(pid)})
		}
		return rows.Err()
	})
	return held, err
}

// stmt runs f bounded by the member's timeout, its error scrubbed of the
// connection's password.
func (m *Member) stmt(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	return m.secret.scrub(f(ctx))
}

// Watch polls the live slots every period (and once at once), and calls
// changed with them on the first poll and whenever they differ from the
// last ones it was called with. It returns nil when ctx ends, or the error
// of a poll (wrapping ErrLost when the slot is lost: Close the member and
// Join again). A ctx that ends during a poll closes the connection, and
// so gives the slot up: stop Watch only to stop the member.
func (m *Member) Watch(ctx context.Context, every time.Duration, changed func(live []int)) error {
	if every <= 0 {
		return errors.New("share: watch: the period must be positive")
	}
	var last []int
	first := true
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if ctx.Err() != nil {
			return nil
		}
		live, err := m.Live(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if first || !slices.Equal(live, last) {
			first = false
			last = live
			changed(slices.Clone(live))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close gives the slot up: it closes the member's connection, which ends
// its session and so its lock. It waits for a statement under way.
func (m *Member) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closeConn()
}

func (m *Member) closeConn() {
	ctx, cancel := context.WithTimeout(context.Background(), m.timeout)
	defer cancel()
	_ = m.conn.Close(ctx)
}

// secrets are what the errors of a member's connection must not show.
type secrets struct {
	dsn      string
	password string
}

func (s secrets) scrub(err error) error {
	if err == nil {
		return nil
	}
	err = redact.Scrub(err, s.dsn)
	if s.password != "" && strings.Contains(err.Error(), s.password) {
		return &scrubbed{msg: strings.ReplaceAll(err.Error(), s.password, redact.Mask), err: err}
	}
	return err
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
