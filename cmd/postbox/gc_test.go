package main

import (
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"
)

// postbox relay sets the garbage collector's target to relayGCPercent and
// says so, unless GOGC is set: then the runtime's setting stays.
func TestRelayGCTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	var logs strings.Builder
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	setRelayGC(func(string) string { return "" }, logger)
	if got := debug.SetGCPercent(100); got != relayGCPercent {
		t.Errorf("GOGC unset: target %d, want %d", got, relayGCPercent)
	}
	if !strings.Contains(logs.String(), "gogc=200") {
		t.Errorf("GOGC unset: the log does not give the target:\n%s", logs.String())
	}

	logs.Reset()
	setRelayGC(func(name string) string {
		if name == "GOGC" {
			return "50"
		}
		return ""
	}, logger)
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=50: the relay changed the target to %d", got)
	}
	if !strings.Contains(logs.String(), "gogc=50") {
		t.Errorf("GOGC=50: the log does not give it:\n%s", logs.String())
	}
}
