package mysql

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"time"

	"github.com/postbox-go/postbox/store"
)

//go:embed presence.sql
var presenceSQL string

// PresenceBeat writes the row of relay p.ID (see store.Presence).
func (d *Driver) PresenceBeat(ctx context.Context, p store.RelayPresence) error {
	var down sql.NullTime
	if p.SinkDown() {
		down = sql.NullTime{Time: p.SinkDownSince.UTC(), Valid: true}
	}
	_, err := d.exec(ctx, "presence_beat", sql.Named("id", p.ID), sql.Named("host", p.Host), sql.Named("pid", p.PID),
		sql.Named("mode", p.Mode), sql.Named("sink", p.Sink), sql.Named("version", p.Version),
		sql.Named("now", time.Now().UTC()), sql.Named("every_ms", max(p.HeartbeatEvery.Milliseconds(), 1)),
		sql.Named("down", down), sql.Named("error", store.ErrorText(p.SinkError, store.PresenceErrorMax)))
	if err != nil {
		return fmt.Errorf("mysql: write the presence of relay %s: %w", p.ID, err)
	}
	return nil
}

// PresenceLeave deletes the row of relay id.
func (d *Driver) PresenceLeave(ctx context.Context, id string) error {
	if _, err := d.exec(ctx, "presence_leave", sql.Named("id", id)); err != nil {
		return fmt.Errorf("mysql: delete the presence of relay %s: %w", id, err)
	}
	return nil
}

// PresencePrune deletes the rows whose heartbeat is older than age.
func (d *Driver) PresencePrune(ctx context.Context, age time.Duration) (int, error) {
	n, err := d.exec(ctx, "presence_prune", sql.Named("before", time.Now().Add(-age).UTC()))
	if err != nil {
		return 0, fmt.Errorf("mysql: prune the relays' presence: %w", err)
	}
	return n, nil
}

// RelayPresences returns every relay's row, the one started first first.
func (s *Store) RelayPresences(ctx context.Context) ([]store.RelayPresence, error) {
	rows, err := s.query(ctx, s.db, "presence_list")
	if err != nil {
		return nil, fmt.Errorf("mysql: read the relays' presence: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []store.RelayPresence
	for rows.Next() {
		var p store.RelayPresence
		var started, beat, down sql.NullTime
		var everyMS int64
		if err := rows.Scan(&p.ID, &p.Host, &p.PID, &p.Mode, &p.Sink, &p.Version, &started, &beat,
			&everyMS, &down, &p.SinkError); err != nil {
			return nil, fmt.Errorf("mysql: read the relays' presence: %w", err)
		}
		p.StartedAt, p.HeartbeatAt, p.SinkDownSince = anyTime(started), anyTime(beat), anyTime(down)
		p.HeartbeatEvery, p.HeartbeatAge = time.Duration(everyMS)*time.Millisecond, max(now.Sub(p.HeartbeatAt), 0)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("mysql: read the relays' presence: %w", err)
	}
	return out, nil
}
