package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// foldEvery is how often a folded warning or error is written again,
// with the count of those folded meanwhile.
const foldEvery = 5 * time.Minute

// folding is a slog.Handler that writes a warning or an error once and
// drops the same message's repeats (a relay whose claims fail logs each
// one) until the source changes state (reset), or foldEvery passed, when
// it is written again with repeated=N. Lines below warning pass as they
// are. Handlers made by WithAttrs and WithGroup share the folds.
type folding struct {
	next  slog.Handler
	folds *folds
}

// folds is the state folding's handlers share: by message, when it was
// last written and how many were dropped since.
type folds struct {
	mu   sync.Mutex
	seen map[string]*fold
}

type fold struct {
	written time.Time
	dropped int
}

func newFolding(next slog.Handler) *folding {
	return &folding{next: next, folds: &folds{seen: map[string]*fold{}}}
}

func (h *folding) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *folding) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return h.next.Handle(ctx, r)
	}
	h.folds.mu.Lock()
	f := h.folds.seen[r.Message]
	now := time.Now()
	if f != nil && now.Sub(f.written) < foldEvery {
		f.dropped++
		h.folds.mu.Unlock()
		return nil
	}
	dropped := 0
	if f != nil {
		dropped = f.dropped
	}
	h.folds.seen[r.Message] = &fold{written: now}
	h.folds.mu.Unlock()
	if dropped > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int("repeated", dropped))
	}
	return h.next.Handle(ctx, r)
}

func (h *folding) WithAttrs(as []slog.Attr) slog.Handler {
	return &folding{next: h.next.WithAttrs(as), folds: h.folds}
}

func (h *folding) WithGroup(name string) slog.Handler {
	return &folding{next: h.next.WithGroup(name), folds: h.folds}
}

// reset forgets the folds: the next warning or error of each message is
// written.
func (h *folding) reset() {
	h.folds.mu.Lock()
	clear(h.folds.seen)
	h.folds.mu.Unlock()
}
