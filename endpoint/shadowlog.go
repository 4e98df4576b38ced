package endpoint

import (
	"context"
	"log/slog"
)

// quietHandler logs at most at level Info what a shadow endpoint's lane
// logs: a shadow endpoint never alerts (its deliveries that fail are
// dropped, not dead letters).
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.Handler.Enabled(ctx, min(level, slog.LevelInfo))
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = min(r.Level, slog.LevelInfo)
	return h.Handler.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(attrs)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.Handler.WithGroup(name)}
}
