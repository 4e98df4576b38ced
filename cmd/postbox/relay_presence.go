package main

import (
	"context"
	"maps"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/relay/presence"
)

// describeSink describes the sink rawURL names for the presence table,
// without credentials, and returns the texts that must never reach it: a
// password (in the URL or $POSTBOX_SINK_PASSWORD), the values of the URL's
// query but those that name the destination (NATS subject, RabbitMQ
// exchange and routing key, Kafka topic), and a webhook's path and query,
// which may hold a token: a webhook is described by its scheme and host
// alone, as in its log lines.
func describeSink(rawURL string, webhookSecrets string) (desc string, secrets []string) {
	secrets = strings.FieldsFunc(webhookSecrets, func(r rune) bool { return r == ' ' || r == ',' })
	if p := os.Getenv(envSinkPassword); p != "" {
		secrets = append(secrets, p)
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" {
		return "a sink URL that does not parse", secrets
	}
	if p, ok := u.User.Password(); ok && p != "" {
		secrets = append(secrets, p)
	}
	scheme := strings.ToLower(u.Scheme)
	where := scheme + "://" + u.Host
	var names []string
	switch scheme {
	case "http", "https":
		desc = "webhook " + where
		if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
			desc += "/…"
		}
		if len(u.Path) > 1 {
			secrets = append(secrets, u.Path)
		}
	case "amqp", "amqps":
		desc = "amqp " + where + u.EscapedPath()
		names = []string{"exchange", "routing_key"}
	case "nats":
		desc = "nats " + where
		names = []string{"subject"}
	case "kafka":
		desc = "kafka " + where
		names = []string{"topic"}
	default:
		desc = scheme + " " + where
	}
	for key, values := range u.Query() {
		public := false
		for _, n := range names {
			public = public || key == n
		}
		for _, v := range values {
			if public {
				desc += " " + key + "=" + v
			} else if v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
	}
	// Texts this short are no secret, and replacing them would garble
	// the error.
	secrets = slices.DeleteFunc(secrets, func(s string) bool { return len(s) < minSecretLen })
	return desc, secrets
}

// minSecretLen is the length of the shortest text describeSink takes for
// a secret.
const minSecretLen = 4

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

// runWithPresence runs the relay r with run while hb keeps its row in the
// presence table, and deletes the row once run has returned (or, on a
// second signal, before the process exits: leavePresence).
func runWithPresence(ctx context.Context, hb *presence.Heartbeat, r *relay.Relay, run func(context.Context) error) error {
	running.Lock()
	running.heartbeats[hb] = true
	running.Unlock()
	defer func() {
		running.Lock()
		delete(running.heartbeats, hb)
		running.Unlock()
	}()
	hbCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		hb.Run(hbCtx, r)
	}()
	err := run(ctx)
	stop()
	<-done
	return err
}

// running holds the heartbeats of the relays this process runs.
var running = struct {
	sync.Mutex
	heartbeats map[*presence.Heartbeat]bool
}{heartbeats: map[*presence.Heartbeat]bool{}}

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
	heartbeats := slices.Collect(maps.Keys(running.heartbeats))
	running.Unlock()
	var wg sync.WaitGroup
	for _, hb := range heartbeats {
		wg.Go(func() { hb.Leave(ctx) })
	}
	wg.Wait()
}
