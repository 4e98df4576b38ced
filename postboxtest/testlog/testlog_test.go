package testlog

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Discard's logger formats nothing: it is enabled at no level.
func TestDiscardIsEnabledAtNoLevel(t *testing.T) {
	h := Discard().Handler()
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
		if h.Enabled(context.Background(), level) {
			t.Errorf("Discard is enabled at %v", level)
		}
	}
}

// The writer hands lines on while its test runs and drops them once it
// ended.
func TestWriterDropsWhatComesAfterTheEnd(t *testing.T) {
	var out bytes.Buffer
	w := &testWriter{out: &out}
	log := slog.New(slog.NewTextHandler(w, nil))
	log.Info("while the test runs")
	w.end()
	log.Info("after the test")
	if got := out.String(); !strings.Contains(got, "while the test runs") || strings.Contains(got, "after the test") {
		t.Fatalf("written: %q, want only the line before the end", got)
	}
}

// A logger of a test that ended may still be called, by a goroutine of the
// code under test that outlived it: the line is dropped, and the call does
// not panic even once every test ended (as a write to the test's output
// would). The test binary runs the subtest again in a child process, whose
// TestMain logs after its tests, to read what the child printed.
func TestNewDropsWhatComesAfterTheTest(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Run("short", func(t *testing.T) {
			late = New(t)
			late.Info("during the subtest")
		})
		late.Info("after the subtest")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNewDropsWhatComesAfterTheTest$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "during the subtest") || strings.Contains(string(out), "after") {
		t.Fatalf("child's output:\n%s\nwant the line during the subtest, none after", out)
	}
}

// childEnv marks the child process of TestNewDropsWhatComesAfterTheTest.
const childEnv = "TESTLOG_CHILD"

// late is the logger of the child's subtest, which TestMain calls again
// once every test ended.
var late *slog.Logger

func TestMain(m *testing.M) {
	code := m.Run()
	if late != nil {
		late.Info("after every test")
	}
	os.Exit(code)
}
