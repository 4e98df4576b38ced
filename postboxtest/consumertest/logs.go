package consumertest

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// logs is a slog.Handler that keeps every record, for the suite to read
// what the consumer logged.
type logs struct {
	mu      *sync.Mutex
	records *[]record
	attrs   []slog.Attr
}

// record is one log line: its level, message and attributes (groups
// flattened).
type record struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

// int returns the record's integer attribute key, or -1 when it has none.
func (r record) int(key string) int64 {
	if v, ok := r.attrs[key]; ok && v.Kind() == slog.KindInt64 {
		return v.Int64()
	}
	return -1
}

func newLogs() *logs { return &logs{mu: &sync.Mutex{}, records: &[]record{}} }

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }

func (l *logs) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	for _, a := range l.attrs {
		rec.attrs[a.Key] = a.Value.Resolve()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.Resolve()
		return true
	})
	l.mu.Lock()
	*l.records = append(*l.records, rec)
	l.mu.Unlock()
	return nil
}

func (l *logs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logs{mu: l.mu, records: l.records, attrs: append(append([]slog.Attr(nil), l.attrs...), attrs...)}
}

// WithGroup keeps the attributes of the group under their own names: the
// suite reads the consumer's own attributes, never grouped.
func (l *logs) WithGroup(string) slog.Handler { return l }

// find returns the records at level or above whose message contains msg.
func (l *logs) find(level slog.Level, msg string) []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var found []record
	for _, r := range *l.records {
		if r.level >= level && strings.Contains(r.msg, msg) {
			found = append(found, r)
		}
	}
	return found
}

// String returns every record, a line each.
func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range *l.records {
		b.WriteString(r.level.String() + " " + r.msg)
		for k, v := range r.attrs {
			b.WriteString(" " + k + "=" + v.String())
		}
		b.WriteByte('\n')
	}
	return b.String()
}
