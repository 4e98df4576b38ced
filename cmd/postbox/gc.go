package main

import (
	"log/slog"
	"runtime/debug"
)

// relayGCPercent is the garbage collector's target of `postbox relay` when
// the environment does not set GOGC: the heap may grow to three times what
// is live between collections (Go's default is twice). A relay's live heap
// is small and bounded (its claims and deliveries in flight), while it
// allocates for every delivery; at 200 the webhook relay spends about
// 10 % less CPU per event (`postbox bench --scenarios webhook`: 29–35 →
// 27–34 µs, signed webhooks / the bare HTTP limit 0.640–0.688 → 0.689–0.737)
// for 5 MiB more peak resident memory (42.5 → 47.6 MiB draining a
// 1,000,000 backlog, `--scenarios scale`).
const relayGCPercent = 200

// setRelayGC sets the garbage collector's target to relayGCPercent unless
// getenv gives GOGC (which the Go runtime has applied already; GOMEMLIMIT
// applies either way), and logs the target in force.
func setRelayGC(getenv func(string) string, logger *slog.Logger) {
	if v := getenv("GOGC"); v != "" {
		logger.Info("garbage collector target from GOGC", "gogc", v)
		return
	}
	debug.SetGCPercent(relayGCPercent)
	logger.Info("garbage collector target: postbox relay's default (set GOGC to change it)", "gogc", relayGCPercent)
}
