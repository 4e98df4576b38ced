package service_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/relay"
	"github.com/postbox-go/postbox/service"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/sink/webhook/guard"
	"github.com/postbox-go/postbox/store"
)

// memArchive is an archive in a bucket in memory.
func memArchive(t *testing.T) *archive.Archive {
	t.Helper()
	a := archive.New(memblob.OpenBucket(nil), "")
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// archived counts the events a holds.
func archived(t *testing.T, a *archive.Archive) int {
	t.Helper()
	n := 0
	if err := a.Read(context.Background(), archive.ReadParams{BatchSize: 100}, func(batch []store.HistoryEvent) error {
		n += len(batch)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// delivered counts the delivered events the outbox keeps.
func delivered(t *testing.T, s store.Outbox) int64 {
	t.Helper()
	st, err := s.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Done
}

// RelayConfig.Archive needs a positive Relay.Retention, and is given
// alone (not beside Relay.Archive): NewRelay refuses the others with a
// *ConfigError naming Archive.
func TestArchiveNeedsRetention(t *testing.T) {
	s := sqliteStores(t)
	sk, err := webhook.New(webhook.Config{URL: "http://127.0.0.1:1/", Secrets: []string{secret}})
	if err != nil {
		t.Fatal(err)
	}
	a := memArchive(t)
	for _, c := range []struct {
		name  string
		relay relay.Config
		want  string
	}{
		{"no retention", relay.Config{}, "needs a positive Relay.Retention"},
		{"retention for ever", relay.Config{Retention: -1}, "needs a positive Relay.Retention"},
		{"Relay.Archive too", relay.Config{Retention: time.Hour, Archive: a.Keep}, "not both"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.relay.Logger = testlog.Discard()
			r, err := service.NewRelay(context.Background(), service.RelayConfig{Outbox: s.outbox, Sink: sk, Archive: a, Relay: c.relay})
			var refused *service.ConfigError
			if !errors.As(err, &refused) || r != nil || refused.Field != "Archive" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewRelay: %v, %v; want a *ConfigError of Archive saying %q", r, err, c.want)
			}
		})
	}
}

// runUntil runs a relay of cfg until cond holds, then stops it; it
// returns the relay's log.
func runUntil(t *testing.T, cfg service.RelayConfig, what string, cond func() bool) string {
	t.Helper()
	logs := &logbuf.Buffer{}
	cfg.Relay.Logger = slog.New(slog.NewTextHandler(logs, nil))
	r, err := service.NewRelay(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := start(t, r)
	waitFor(t, what, cond)
	stop()
	return logs.String()
}

// With an Archive, retention hands the delivered events to it before it
// removes them from the outbox: a relay keeps what it delivers (its
// Retention of an hour), and the next, whose Retention they are older
// than, archives them at its start (retention runs at start, then every
// minute), in sink mode on SQLite and in endpoints mode on PostgreSQL;
// there the endpoints' lanes, whose deliveries are copies of the outbox's
// events, archive nothing and do not fail (their stores refuse a Keep).
// NewRelay's start line says what retention does, naming the archive.
func TestRetentionArchivesDeliveredEvents(t *testing.T) {
	const n = 12
	t.Run("sink mode", func(t *testing.T) {
		s := sqliteStores(t)
		rcv := receiver.New(t, secret, nil)
		sk, err := webhook.New(webhook.Config{URL: rcv.URL, Secrets: []string{secret}})
		if err != nil {
			t.Fatal(err)
		}
		a := memArchive(t)
		enqueue(t, s.outbox, n)
		cfg := service.RelayConfig{Outbox: s.outbox, Sink: sk, Archive: a, Relay: relay.Config{PollInterval: 50 * time.Millisecond, Retention: time.Hour}}
		log := runUntil(t, cfg, "the events delivered and kept", func() bool { return delivered(t, s.outbox) == n })
		if !strings.Contains(log, "retention 1h0m0s, archive "+a.String()) {
			t.Errorf("the start line does not say what retention does:\n%s", log)
		}
		if got := archived(t, a); got != 0 {
			t.Fatalf("%d events archived within their retention", got)
		}
		cfg.Relay.Retention = time.Millisecond
		log = runUntil(t, cfg, "the delivered events archived and removed", func() bool { return delivered(t, s.outbox) == 0 })
		if got := archived(t, a); got != n {
			t.Fatalf("the archive holds %d events, want %d", got, n)
		}
		if strings.Contains(log, "retention failed") {
			t.Errorf("retention failed:\n%s", log)
		}
	})
	t.Run("endpoints mode", func(t *testing.T) {
		ctx := context.Background()
		s := pgStores(t)
		rcv := receiver.New(t, secret, nil)
		if _, err := s.endpoints.EndpointCreate(ctx, store.Endpoint{Name: "warehouse", URL: rcv.URL, Secret: secret, Concurrency: 2}); err != nil {
			t.Fatal(err)
		}
		a := memArchive(t)
		enqueue(t, s.outbox, n)
		cfg := service.RelayConfig{Outbox: s.outbox, Archive: a, Relay: relay.Config{PollInterval: 50 * time.Millisecond, Retention: time.Hour},
			Endpoints: &service.EndpointsConfig{Keyring: testKeyring, Store: s.endpoints, Retention: time.Hour,
				Guard: guard.Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}}}
		runUntil(t, cfg, "the events delivered", func() bool { return len(rcv.Accepted()) == n && delivered(t, s.outbox) == n })
		cfg.Relay.Retention = time.Millisecond
		log := runUntil(t, cfg, "the delivered events archived and removed", func() bool { return delivered(t, s.outbox) == 0 })
		if got := archived(t, a); got != n {
			t.Fatalf("the archive holds %d events, want %d", got, n)
		}
		if strings.Contains(log, "retention failed") || strings.Contains(log, store.ErrKeepUnsupported.Error()) {
			t.Errorf("a retention failed (a lane handed the archive?):\n%s", log)
		}
	})
}
