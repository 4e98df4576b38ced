// Package kafkalog hands the log lines of a franz-go client to slog, for
// the Kafka sink and the Kafka inbox consumer.
package kafkalog

import (
	"context"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// New returns a franz-go logger that writes the client's warnings and
// errors to l, prefixed "kafka client: ".
func New(l *slog.Logger) kgo.Logger { return logger{l} }

type logger struct{ l *slog.Logger }

func (logger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (l logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	lv := slog.LevelWarn
	if level == kgo.LogLevelError {
		lv = slog.LevelError
	}
	l.l.Log(context.Background(), lv, "kafka client: "+msg, keyvals...)
}
