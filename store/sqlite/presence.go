package sqlite

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed presence.sql
var presenceSQL string

// presenceQueries are the queries of presence.sql, placeholders unfilled
// (presence fills them).
var presenceQueries = sqlstore.ParseQueries("sqlite", func(q string) string { return q }, presenceSQL)

// presence returns the presence query called name for the store's prefix.
func (s *Store) presence(name string) string { return s.expand(presenceQueries.Get(name)) }

// PresenceBeat writes the row of relay p.ID (see store.Presence).
func (d *Driver) PresenceBeat(ctx context.Context, p store.RelayPresence) error {
	var down sql.NullInt64
	if p.SinkDown() {
		down = sql.NullInt64{Int64: p.SinkDownSince.UnixMicro(), Valid: true}
	}
	now := time.Now().UnixMicro()
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, d.presence("presence_beat"), p.ID, p.Host, p.PID, p.Mode, p.Sink, p.Version,
			now, max(p.HeartbeatEvery.Milliseconds(), 1), down, store.ErrorText(p.SinkError, store.PresenceErrorMax))
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: write the presence of relay %s: %w", p.ID, err)
	}
	return nil
}

// PresenceLeave deletes the row of relay id.
func (d *Driver) PresenceLeave(ctx context.Context, id string) error {
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, d.presence("presence_leave"), id)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete the presence of relay %s: %w", id, err)
	}
	return nil
}

// PresencePrune deletes the rows whose heartbeat is older than age.
func (d *Driver) PresencePrune(ctx context.Context, age time.Duration) (int, error) {
	var n int64
	err := d.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = rowsAffected(tx.ExecContext(ctx, d.presence("presence_prune"), time.Now().Add(-age).UnixMicro()))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune the relays' presence: %w", err)
	}
	return int(n), nil
}

// RelayPresences returns every relay's row, the one started first first.
func (s *Store) RelayPresences(ctx context.Context) ([]store.RelayPresence, error) {
	rows, err := s.db.QueryContext(ctx, s.presence("presence_list"))
	if err != nil {
		return nil, fmt.Errorf("sqlite: read the relays' presence: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []store.RelayPresence
	for rows.Next() {
		var p store.RelayPresence
		var started, beat, everyMS int64
		var down sql.NullInt64
		if err := rows.Scan(&p.ID, &p.Host, &p.PID, &p.Mode, &p.Sink, &p.Version, &started, &beat,
			&everyMS, &down, &p.SinkError); err != nil {
			return nil, fmt.Errorf("sqlite: read the relays' presence: %w", err)
		}
		p.StartedAt, p.HeartbeatAt, p.SinkDownSince = time.UnixMicro(started), time.UnixMicro(beat), microTime(down)
		p.HeartbeatEvery, p.HeartbeatAge = time.Duration(everyMS)*time.Millisecond, max(now.Sub(p.HeartbeatAt), 0)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: read the relays' presence: %w", err)
	}
	return out, nil
}
