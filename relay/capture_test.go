package relay_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// capture is a slog.Handler that keeps every record with its attributes
// resolved and unescaped (as a handler of the application's might print
// them), for tests that read what the relay logged.
type capture struct {
	mu      *sync.Mutex
	records *[]captured
	attrs   []slog.Attr
}

// captured is one record: its level, message and attribute values, the
// values as text.
type captured struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newCapture() *capture { return &capture{mu: &sync.Mutex{}, records: new([]captured)} }

func (c *capture) logger() *slog.Logger { return slog.New(c) }

func (c *capture) Enabled(context.Context, slog.Level) bool { return true }

func (c *capture) Handle(_ context.Context, r slog.Record) error {
	rec := captured{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	add := func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve().String()
		return true
	}
	for _, a := range c.attrs {
		add(a)
	}
	r.Attrs(add)
	c.mu.Lock()
	defer c.mu.Unlock()
	*c.records = append(*c.records, rec)
	return nil
}

func (c *capture) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &capture{mu: c.mu, records: c.records, attrs: append(append([]slog.Attr(nil), c.attrs...), attrs...)}
}

func (c *capture) WithGroup(string) slog.Handler { return c }

// all returns the records so far.
func (c *capture) all() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]captured(nil), *c.records...)
}

// matching returns the records whose message contains msg.
func (c *capture) matching(msg string) []captured {
	var out []captured
	for _, r := range c.all() {
		if strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}
