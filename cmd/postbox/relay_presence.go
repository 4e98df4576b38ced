package main

import (
	"context"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/postbox-go/postbox/service"
)

// buildVersion is the binary's version: its module version and VCS
// revision, as the build recorded them.
func buildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v
}

// running holds the relays this process runs, whose presence rows
// leavePresence deletes.
var running = struct {
	sync.Mutex
	relays map[*service.Relay]bool
}{relays: map[*service.Relay]bool{}}

// track adds r to the relays this process runs, until the returned
// function is called (once r.Run returned).
func track(r *service.Relay) (untrack func()) {
	running.Lock()
	running.relays[r] = true
	running.Unlock()
	return func() {
		running.Lock()
		delete(running.relays, r)
		running.Unlock()
	}
}

// presenceLeaveTimeout bounds leavePresence.
const presenceLeaveTimeout = 2 * time.Second

// leavePresence deletes the presence rows of the relays this process runs,
// within presenceLeaveTimeout: a process about to exit before its relays
// stopped (a second signal) calls it, so that postbox status does not
// show them stale.
func leavePresence() {
	ctx, cancel := context.WithTimeout(context.Background(), presenceLeaveTimeout)
	defer cancel()
	running.Lock()
	relays := slices.Collect(maps.Keys(running.relays))
	running.Unlock()
	var wg sync.WaitGroup
	for _, r := range relays {
		wg.Go(func() { r.Leave(ctx) })
	}
	wg.Wait()
}
