package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// FailedRow is what grouping reads of a failed event: where it is in the
// list, and its last error.
type FailedRow struct {
	ID uuid.UUID
	// Endpoint is the endpoint of a failed delivery; zero for an outbox
	// event.
	Endpoint  uuid.UUID
	Cursor    store.FailedCursor
	LastError string
}

// DeadLetterSQL runs a store's dead-letter statements (its
// deadletters.sql), each a statement, and a transaction, of its own. The
// lists are in the order of store.FailedCursor: the most recent failure
// first, then the highest sequence number; after is the cursor of the row
// before the first one wanted (zero: from the start).
//
// Each method works on the outbox's failed events when f.Endpoint is zero,
// and on the failed deliveries of endpoint f.Endpoint (of every endpoint
// for store.AnyEndpoint) otherwise: ids are then event ids, and the
// sequence numbers of the cursors the deliveries' own.
type DeadLetterSQL interface {
	// ListFailed runs failed_list: up to limit failed events that f lets
	// through, after the cursor.
	ListFailed(ctx context.Context, f store.FailedFilter, after store.FailedCursor, limit int) ([]store.Record, error)
	// ScanFailed runs failed_scan: like ListFailed, only what grouping
	// reads.
	ScanFailed(ctx context.Context, f store.FailedFilter, after store.FailedCursor, limit int) ([]FailedRow, error)
	// Retry sends up to limit failed events that f lets through back to
	// the queue (failed_retry), or those of ids (failed_retry_ids, with
	// len(ids) <= limit) when ids is not nil, and wakes the store's
	// relays; it returns how many it sent back.
	Retry(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error)
	// Purge deletes up to limit failed events that f lets through
	// (failed_purge), or those of ids (failed_purge_ids) when ids is not
	// nil; it returns how many it deleted.
	Purge(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error)
}

// DeadLetters carries out store.DeadLetters on a store's statements:
// defaults and limits, pages, batches, and grouping by error fingerprint,
// which is computed in Go (store.ErrorFingerprint) so that one
// implementation serves every store and a group id means the same on each.
type DeadLetters struct {
	store string
	d     DeadLetterSQL
}

// NewDeadLetters returns the dead-letter operations on d. storeName
// prefixes the errors ("postgres").
func NewDeadLetters(storeName string, d DeadLetterSQL) *DeadLetters {
	return &DeadLetters{store: storeName, d: d}
}

// List is store.DeadLetters' FailedList.
func (dl *DeadLetters) List(ctx context.Context, p store.FailedListParams) (store.FailedPage, error) {
	limit, err := bounded(p.Limit, store.FailedListLimitDefault, store.FailedListLimitMax)
	if err != nil {
		return store.FailedPage{}, fmt.Errorf("%s: list failed events: Limit %w", dl.store, err)
	}
	recs, err := dl.d.ListFailed(ctx, p.FailedFilter, p.After, limit+1)
	if err != nil {
		return store.FailedPage{}, fmt.Errorf("%s: list failed events: %w", dl.store, err)
	}
	page := store.FailedPage{Events: recs}
	if len(recs) > limit {
		page.Events = recs[:limit]
		last := page.Events[limit-1]
		page.Next = store.FailedCursor{ProcessedAt: last.ProcessedAt, OutboxSeq: last.OutboxSeq}
	}
	return page, nil
}

// Groups is store.DeadLetters' FailedGroups: it reads up to p.Scan failed
// events, the most recent first, in pages of store.FailedBatchMax.
func (dl *DeadLetters) Groups(ctx context.Context, p store.FailedGroupsParams) (store.FailedGroups, error) {
	scan, err := bounded(p.Scan, store.FailedGroupsScanDefault, store.FailedGroupsScanMax)
	if err != nil {
		return store.FailedGroups{}, fmt.Errorf("%s: group failed events: Scan %w", dl.store, err)
	}
	byID := map[string]*store.FailureGroup{}
	var out store.FailedGroups
	var after store.FailedCursor
	for out.Scanned < scan {
		limit := min(store.FailedBatchMax, scan-out.Scanned)
		rows, err := dl.d.ScanFailed(ctx, p.FailedFilter, after, limit)
		if err != nil {
			return store.FailedGroups{}, fmt.Errorf("%s: group failed events: %w", dl.store, err)
		}
		for _, r := range rows {
			fp := store.ErrorFingerprint(r.LastError)
			id := store.ErrorGroupID(fp)
			g := byID[id]
			if g == nil {
				// Rows come most recent first: the first one seen is the
				// group's latest.
				g = &store.FailureGroup{ID: id, Fingerprint: fp, Example: r.LastError, LastSeen: r.Cursor.ProcessedAt}
				byID[id] = g
			}
			g.Count++
			g.FirstSeen = r.Cursor.ProcessedAt
		}
		out.Scanned += len(rows)
		if len(rows) < limit {
			out.Complete = true
			break
		}
		after = rows[len(rows)-1].Cursor
	}
	if !out.Complete {
		more, err := dl.d.ScanFailed(ctx, p.FailedFilter, after, 1)
		if err != nil {
			return store.FailedGroups{}, fmt.Errorf("%s: group failed events: %w", dl.store, err)
		}
		out.Complete = len(more) == 0
	}
	for _, g := range byID {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b store.FailureGroup) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), b.LastSeen.Compare(a.LastSeen), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Retry is store.DeadLetters' FailedRetry.
func (dl *DeadLetters) Retry(ctx context.Context, p store.FailedRetryParams) (int, error) {
	return dl.change(ctx, "retry", p.FailedSelection, p.BatchSize, p.Progress, dl.d.Retry)
}

// Purge is store.DeadLetters' FailedPurge.
func (dl *DeadLetters) Purge(ctx context.Context, p store.FailedPurgeParams) (int, error) {
	return dl.change(ctx, "purge", p.FailedSelection, p.BatchSize, p.Progress, dl.d.Purge)
}

// batchStep changes up to limit failed events that f lets through, or
// those of ids when ids is not nil (DeadLetterSQL.Retry or Purge).
type batchStep func(ctx context.Context, f store.FailedFilter, ids []uuid.UUID, limit int) (int, error)

// change runs step in batches of at most batch rows until sel has nothing
// left, or ctx is done (checked between batches: a batch that started runs
// to its end).
func (dl *DeadLetters) change(ctx context.Context, op string, sel store.FailedSelection, batch int, progress func(int), step batchStep) (int, error) {
	if sel.IsZero() {
		return 0, fmt.Errorf("%s: %s failed events: %w", dl.store, op, store.ErrEmptySelection)
	}
	batch, err := bounded(batch, store.FailedBatchMax, store.FailedBatchMax)
	if err != nil {
		return 0, fmt.Errorf("%s: %s failed events: BatchSize %w", dl.store, op, err)
	}
	if sel.Group != "" && !store.ValidGroupID(sel.Group) {
		return 0, fmt.Errorf("%s: %s failed events: group %q is not a group id (12 lower-case hex digits)", dl.store, op, sel.Group)
	}
	work := context.WithoutCancel(ctx)
	done := 0
	stopped := func() error {
		if ctx.Err() == nil {
			return nil
		}
		return fmt.Errorf("%s: %s failed events: stopped after %d: %w", dl.store, op, done, context.Cause(ctx))
	}
	run := func(f store.FailedFilter, ids []uuid.UUID, limit int) (int, error) {
		if err := stopped(); err != nil {
			return 0, err
		}
		n, err := step(work, f, ids, limit)
		if err != nil {
			return 0, fmt.Errorf("%s: %s failed events (after %d): %w", dl.store, op, done, err)
		}
		done += n
		if progress != nil && n > 0 {
			progress(done)
		}
		return n, nil
	}
	// Events that fail again while this runs (relays keep delivering, and
	// a permanent error fails an event at once) are not chased: the
	// selection ends when the run begins. (On PostgreSQL processed_at is
	// the server's clock: a skew between the clocks moves this bound by
	// as much.)
	if begun := time.Now(); sel.FailedBefore.IsZero() || sel.FailedBefore.After(begun) {
		sel.FailedBefore = begun
	}
	switch {
	case sel.Group != "":
		err := dl.changeGroup(work, sel, batch, stopped, run)
		return done, err
	case len(sel.IDs) > 0:
		for chunk := range slices.Chunk(sel.IDs, batch) {
			if _, err := run(sel.FailedFilter, chunk, len(chunk)); err != nil {
				return done, err
			}
		}
		return done, nil
	}
	for {
		n, err := run(sel.FailedFilter, nil, batch)
		if err != nil || n < batch {
			return done, err
		}
	}
}

// changeGroup reads every failed event that sel's filter lets through, a
// batch at a time, and runs step on those of sel's group (and of sel.IDs,
// when set) in each batch. The failed deliveries of store.AnyEndpoint are
// changed one endpoint at a time (a step per endpoint present in the
// batch): an event's deliveries to other endpoints may be in other groups.
func (dl *DeadLetters) changeGroup(work context.Context, sel store.FailedSelection, batch int, stopped func() error, run func(store.FailedFilter, []uuid.UUID, int) (int, error)) error {
	var only map[uuid.UUID]bool
	if len(sel.IDs) > 0 {
		only = make(map[uuid.UUID]bool, len(sel.IDs))
		for _, id := range sel.IDs {
			only[id] = true
		}
	}
	var after store.FailedCursor
	for {
		if err := stopped(); err != nil {
			return err
		}
		rows, err := dl.d.ScanFailed(work, sel.FailedFilter, after, batch)
		if err != nil {
			return fmt.Errorf("%s: read failed events: %w", dl.store, err)
		}
		// The rows' endpoints in the order first met (the outbox's: zero
		// only), and the ids of the group's rows of each.
		var endpoints []uuid.UUID
		ids := map[uuid.UUID][]uuid.UUID{}
		for _, r := range rows {
			if (only == nil || only[r.ID]) && store.ErrorGroupID(store.ErrorFingerprint(r.LastError)) == sel.Group {
				if _, met := ids[r.Endpoint]; !met {
					endpoints = append(endpoints, r.Endpoint)
				}
				ids[r.Endpoint] = append(ids[r.Endpoint], r.ID)
			}
		}
		for _, e := range endpoints {
			f := sel.FailedFilter
			if e != uuid.Nil {
				f.Endpoint = e
			}
			if _, err := run(f, ids[e], len(ids[e])); err != nil {
				return err
			}
		}
		if len(rows) < batch {
			return nil
		}
		after = rows[len(rows)-1].Cursor
	}
}

// bounded is n, or def when n is zero; an error when n is negative or above
// most.
func bounded(n, def, most int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > most:
		return 0, fmt.Errorf("%d: want 1 to %d (0: %d)", n, most, def)
	}
	return n, nil
}
