// Package testlog gives tests the loggers the code under test asks for:
// one that drops everything, and one that writes into the test's own
// output, shown when the test fails (or runs with -v). A test that reads
// what was logged writes into a postboxtest/logbuf.Buffer instead.
package testlog

import (
	"io"
	"log/slog"
	"sync"
	"testing"
)

// Discard returns a logger that drops every record, at no cost: its
// handler is enabled at no level, so no record is even formatted.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// New returns a logger that writes each record, as text, into t's output
// (t.Output): go test shows it under the test's name when the test fails,
// and for every test with -v, each parallel test's lines apart from the
// others'. Records logged once t and its cleanups have ended are dropped:
// a goroutine of the code under test may outlive the test by a moment,
// and its write to t's output would show nowhere, or panic once every
// test ended.
func New(t testing.TB) *slog.Logger {
	w := &testWriter{out: t.Output()}
	// Cleanups run last registered first: what is logged while the
	// cleanups registered after this one stop the code under test (a
	// relay, a server) still shows.
	t.Cleanup(w.end)
	return slog.New(slog.NewTextHandler(w, nil))
}

// testWriter hands the handler's lines to a test's output while the test
// runs.
type testWriter struct {
	mu    sync.Mutex
	out   io.Writer
	ended bool
}

// Write writes p (a record, a line that the text handler writes at once)
// to the test's output, or drops it once the test ended.
func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return len(p), nil
	}
	return w.out.Write(p)
}

// end drops what is written from now on.
func (w *testWriter) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ended = true
}
