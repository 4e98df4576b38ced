package sqlstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// The history (store.History), the replays' writes and retention with a
// Keep, as both SQL stores carry them out: each store brings its
// statements (HistorySQL, ExpireSQL), this file the checks, the paging
// and the order of the steps.
//
// How a row that a plain-SQL producer wrote with values no event has is
// read: HistoryRead returns it, every column that the store cannot read
// as the event's (a time that is not one, headers that are not an object
// of headers) left zero, rather than failing the read or hiding the
// event: an archive keeps what the row holds, and a replay of it fails
// alone at its claim, as the row would have (ClaimedEvent.Invalid).

// HistorySQL runs a store's statement of the history.
type HistorySQL interface {
	// ReadHistory returns up to limit done rows in id order, after after
	// (every row when first), that f lets through, each read as
	// HistoryRead returns it. The statement applies the whole filter, the
	// types' globs (path.Match) included, so that a page of limit rows is
	// one statement and paging by id stays exact.
	ReadHistory(ctx context.Context, f store.HistoryFilter, after uuid.UUID, first bool, limit int) ([]store.HistoryEvent, error)
}

// CheckHistory refuses what no store reads: a Limit out of 1 to
// store.HistoryBatchMax, a filter that Check refuses.
func CheckHistory(p store.HistoryParams) error {
	if p.Limit < 1 || p.Limit > store.HistoryBatchMax {
		return fmt.Errorf("Limit %d is out of range (1 to %d)", p.Limit, store.HistoryBatchMax)
	}
	return p.Filter.Check()
}

// ReadHistory is store.History's HistoryRead over h: one statement reads
// up to p.Limit rows of the filter after p.After (from the first when
// After is zero and not p.Resume). Every matching row after p.After is
// returned exactly once across the calls that page with After = the last
// id returned and Resume set, a row with the all-zero id included.
func ReadHistory(ctx context.Context, h HistorySQL, p store.HistoryParams) ([]store.HistoryEvent, error) {
	if err := CheckHistory(p); err != nil {
		return nil, err
	}
	return h.ReadHistory(ctx, p.Filter, p.After, p.After == uuid.Nil && !p.Resume, p.Limit)
}

// RequeueKept is store.History's RequeueKept for a store with no single
// statement for it: h's HistoryRead, then its Requeue of what it read.
func RequeueKept(ctx context.Context, h store.History, p store.HistoryParams, replay string) (store.RequeueKeptResult, error) {
	events, err := h.HistoryRead(ctx, p)
	if err != nil || len(events) == 0 {
		return store.RequeueKeptResult{}, err
	}
	res, err := h.Requeue(ctx, events, replay)
	if err != nil {
		return store.RequeueKeptResult{}, err
	}
	return store.RequeueKeptResult{RequeueResult: res, Read: len(events), Last: events[len(events)-1].ID}, nil
}

// RequeueRow is one event that Requeue gives a store to write, checked.
type RequeueRow struct {
	store.HistoryEvent
	// HeadersJSON is the event's headers with the replay's mark, as the
	// JSON object a row holds.
	HeadersJSON string
	// Insertable: the tables can hold the event, so it is written again
	// when its row is gone. One they cannot hold (texts that are not
	// UTF-8 or hold NUL, a payload that is not JSON, a time out of years
	// 1 to 9999: what a plain-SQL producer's row may have held) is only
	// requeued when its row is kept, and skipped when it is gone.
	Insertable bool
}

// PrepareRequeue checks the events of a Requeue (or an EndpointRequeue):
// at most store.HistoryBatchMax, a replay's name of valid UTF-8 without
// NUL. It returns them with their headers marked by replay, each one
// Insertable or not, an id given twice counted once (dups: how many were
// dropped, which the caller counts as Skipped).
func PrepareRequeue(events []store.HistoryEvent, replay string) (rows []RequeueRow, dups int, err error) {
	if len(events) > store.HistoryBatchMax {
		return nil, 0, fmt.Errorf("%d events: at most %d at once", len(events), store.HistoryBatchMax)
	}
	if problem := TextProblem(replay); problem != "" {
		return nil, 0, errors.New("the replay's name " + problem)
	}
	seen := make(map[uuid.UUID]bool, len(events))
	rows = make([]RequeueRow, 0, len(events))
	for _, ev := range events {
		if seen[ev.ID] {
			dups++
			continue
		}
		seen[ev.ID] = true
		r := RequeueRow{HistoryEvent: ev, Insertable: insertable(ev)}
		h := make(map[string]string, len(ev.Headers)+1)
		if r.Insertable {
			for k, v := range ev.Headers {
				h[k] = v
			}
		}
		h[postbox.HeaderReplay] = replay
		b, err := json.Marshal(h) // strings checked: cannot fail
		if err != nil {
			return nil, 0, err
		}
		r.HeadersJSON = string(b)
		rows = append(rows, r)
	}
	return rows, dups, nil
}

// insertable reports whether the tables of both stores can hold ev.
func insertable(ev store.HistoryEvent) bool {
	for _, s := range []string{ev.AggregateType, ev.AggregateID, ev.EventType} {
		if TextProblem(s) != "" {
			return false
		}
	}
	for k, v := range ev.Headers {
		if TextProblem(k) != "" || TextProblem(v) != "" {
			return false
		}
	}
	if !json.Valid(ev.Payload) || bytes.Contains(ev.Payload, []byte(`\u0000`)) && holdsNUL(ev.Payload) {
		return false
	}
	return ev.CreatedAt.IsZero() || TimeProblem(ev.CreatedAt) == ""
}

// holdsNUL reports whether a JSON text has a string holding NUL (written
// \u0000), which PostgreSQL's jsonb refuses.
func holdsNUL(payload []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(payload))
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok && strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
}

// ExpireSQL runs a store's statements of retention (store.Source's
// Expire on a plain table).
type ExpireSQL interface {
	// ReadExpired returns up to limit done rows processed before before,
	// in (processed_at, id) order, read as HistoryRead reads them.
	ReadExpired(ctx context.Context, before time.Time, limit int) ([]store.HistoryEvent, error)
	// DeleteExpired deletes those of ids still done, and returns how many.
	DeleteExpired(ctx context.Context, ids []uuid.UUID) (int, error)
	// PurgeDone deletes up to limit done rows processed before before,
	// oldest first (no Keep), and returns how many.
	PurgeDone(ctx context.Context, before time.Time, limit int) (int, error)
	// PurgeHeldKeys deletes up to limit dedup keys whose hold has ended,
	// and returns how many.
	PurgeHeldKeys(ctx context.Context, limit int) (int, error)
}

// CheckExpireLimit refuses an ExpireParams.Limit out of 1 to
// store.HistoryBatchMax.
func CheckExpireLimit(limit int) error {
	if limit < 1 || limit > store.HistoryBatchMax {
		return fmt.Errorf("expire: Limit %d is out of range (1 to %d)", limit, store.HistoryBatchMax)
	}
	return nil
}

// Expire is one step of retention on a plain table (store.Source's
// Expire): without p.Keep, up to p.Limit delivered events processed before
// p.Before are deleted; with it, they are read (in processed_at, id
// order), handed to Keep sorted by id, and only once Keep returned nil
// deleted, those still done (a replay may have requeued one meanwhile);
// an error of Keep deletes no event, and is returned once the held keys
// were purged as below. Then up to p.Limit held dedup keys whose hold
// ended are deleted. More: either was full.
func Expire(ctx context.Context, e ExpireSQL, p store.ExpireParams) (store.ExpireResult, error) {
	var res store.ExpireResult
	if err := CheckExpireLimit(p.Limit); err != nil {
		return res, err
	}
	full := false
	if p.Keep == nil {
		n, err := e.PurgeDone(ctx, p.Before, p.Limit)
		if err != nil {
			return res, fmt.Errorf("purge done events: %w", err)
		}
		res.Events, full = n, n >= p.Limit
	} else if !p.Before.IsZero() {
		events, err := e.ReadExpired(ctx, p.Before, p.Limit)
		if err != nil {
			return res, fmt.Errorf("read done events to keep: %w", err)
		}
		if len(events) > 0 {
			slices.SortFunc(events, func(a, b store.HistoryEvent) int { return strings.Compare(string(a.ID[:]), string(b.ID[:])) })
			if err := p.Keep(ctx, events); err != nil {
				// The held keys are purged all the same: a Keep that keeps
				// failing (a bucket down, an event it refuses) must not let
				// them grow without limit.
				err = fmt.Errorf("keep %d done events (none deleted): %w", len(events), err)
				keys, kerr := e.PurgeHeldKeys(ctx, p.Limit)
				if kerr != nil {
					return res, errors.Join(err, fmt.Errorf("purge held dedup keys: %w", kerr))
				}
				res.Keys = keys
				return res, err
			}
			res.Kept = len(events)
			ids := make([]uuid.UUID, len(events))
			for i, ev := range events {
				ids[i] = ev.ID
			}
			if res.Events, err = e.DeleteExpired(ctx, ids); err != nil {
				return res, fmt.Errorf("delete %d kept done events: %w", len(ids), err)
			}
		}
		full = len(events) >= p.Limit
	}
	keys, err := e.PurgeHeldKeys(ctx, p.Limit)
	if err != nil {
		return res, fmt.Errorf("purge held dedup keys: %w", err)
	}
	res.Keys = keys
	res.More = full || keys >= p.Limit
	return res, nil
}
