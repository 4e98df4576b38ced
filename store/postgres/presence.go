package postgres

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

//go:embed presence.sql
var presenceSQL string

// presenceQueries are the queries of presence.sql, placeholders unfilled
// (presence fills them).
var presenceQueries = sqlstore.ParseQueries("postgres", func(q string) string { return q }, presenceSQL)

// presence returns the presence query called name for the store's schema.
func (s *Store) presence(name string) string { return s.expand(presenceQueries.Get(name)) }

// PresenceBeat writes the row of relay p.ID (see store.Presence).
func (d *Driver) PresenceBeat(ctx context.Context, p store.RelayPresence) error {
	var down *time.Time
	if p.SinkDown() {
		down = &p.SinkDownSince
	}
	_, err := d.pool.Exec(ctx, d.presence("presence_beat"), p.ID, p.Host, p.PID, p.Mode, p.Sink, p.Version,
		max(p.HeartbeatEvery.Milliseconds(), 1), down, store.ErrorText(p.SinkError, store.PresenceErrorMax))
	if err != nil {
		return fmt.Errorf("postgres: write the presence of relay %s: %w", p.ID, err)
	}
	return nil
}

// PresenceLeave deletes the row of relay id.
func (d *Driver) PresenceLeave(ctx context.Context, id string) error {
	if _, err := d.pool.Exec(ctx, d.presence("presence_leave"), id); err != nil {
		return fmt.Errorf("postgres: delete the presence of relay %s: %w", id, err)
	}
	return nil
}

// PresencePrune deletes the rows whose heartbeat is older than age.
func (d *Driver) PresencePrune(ctx context.Context, age time.Duration) (int, error) {
	tag, err := d.pool.Exec(ctx, d.presence("presence_prune"), age.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("postgres: prune the relays' presence: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// RelayPresences returns every relay's row, the one started first first.
func (s *Store) RelayPresences(ctx context.Context) ([]store.RelayPresence, error) {
	rows, err := s.pool.Query(ctx, s.presence("presence_list"))
	if err != nil {
		return nil, fmt.Errorf("postgres: read the relays' presence: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.RelayPresence, error) {
		var p store.RelayPresence
		var everyMS, ageUS int64
		var down *time.Time
		err := row.Scan(&p.ID, &p.Host, &p.PID, &p.Mode, &p.Sink, &p.Version, &p.StartedAt, &p.HeartbeatAt,
			&everyMS, &down, &p.SinkError, &ageUS)
		p.HeartbeatEvery, p.HeartbeatAge = time.Duration(everyMS)*time.Millisecond, time.Duration(ageUS)*time.Microsecond
		if down != nil {
			p.SinkDownSince = *down
		}
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: read the relays' presence: %w", err)
	}
	return out, nil
}
