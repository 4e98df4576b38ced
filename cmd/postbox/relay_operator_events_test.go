package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// Two postbox relay --endpoints over one database: an endpoint that fails
// every request is disabled after --disable-after by both, and the ops
// endpoint, subscribed to postbox.endpoint.*, receives one
// postbox.endpoint.disabled, signed with its own secret, with the
// documented payload; the outbox holds that one event. The failing
// endpoint, which takes every event type, is never sent one.
func TestRelayOperatorEventsReachTheOpsEndpointOnce(t *testing.T) {
	s, db := schemaStore(t)
	var operatorToDown atomic.Int64
	down := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, _ int) int {
		if endpoint.IsOperatorEvent(d.EventType) {
			operatorToDown.Add(1)
		}
		return http.StatusInternalServerError
	})
	opsSecret := newWhsec()
	ops := receiver.New(t, opsSecret, nil)
	downID := addEndpointCmd(t, db, "--name", "partner-down", "--url", down.URL+"/hooks", "--allow-private", "--secret", secret)
	addEndpointCmd(t, db, "--name", "ops", "--url", ops.URL, "--allow-private", "--secret", opsSecret, "--types", "postbox.endpoint.*")
	for _, id := range []string{"1", "2", "3"} {
		insertTyped(t, s, id, "order.created")
	}
	args := append(append([]string{}, db...), "--endpoints", "--poll", "100ms", "--retention", "1h", "--disable-after", "1s",
		"--backoff-min", "50ms", "--backoff-max", "100ms", "--max-attempts", "1000", "--breaker-failures", "1000")
	env := []string{keyring.EnvVar + "=" + secretsKey}
	first, _ := startRelayWithKey(t, env, args...)
	second, _ := startRelayWithKey(t, env, args...)

	var got receiver.Delivery
	waitFor(t, "the disabled event at the ops endpoint", 30*time.Second, func() bool {
		for _, d := range ops.Accepted() {
			if d.EventType == endpoint.EventEndpointDisabled {
				got = d
				return true
			}
		}
		return false
	})
	for _, logs := range []interface{ String() string }{first, second} {
		if !strings.Contains(logs.String(), `operator_events="on: postbox.endpoint.failing after 5m0s of failures`) || !strings.Contains(logs.String(), "operator_event_subscribers=1") {
			t.Errorf("a relay's start line does not say the operator events are on, with one subscriber:\n%s", logs)
		}
	}
	// Both relays are done with the endpoint (each disabled it, or found
	// it disabled), and every operator event written is delivered.
	waitFor(t, "both relays done with the disabled endpoint", 20*time.Second, func() bool {
		for _, logs := range []interface{ String() string }{first, second} {
			if l := logs.String(); !strings.Contains(l, "endpoint disabled: every attempt failed") && !strings.Contains(l, "endpoint no longer enabled: its lane stops") {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	count := func(query string, args ...any) int {
		var n int
		if err := s.Pool().QueryRow(ctx, query, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the operator events delivered", 20*time.Second, func() bool {
		return count("select count(*) from "+s.Table("outbox_events")+" where event_type like 'postbox.%' and status <> 'done'") == 0 &&
			count("select count(*) from "+s.Table("endpoint_deliveries")+" where event_type like 'postbox.%' and status <> 'done'") == 0
	})
	if n := count("select count(*) from "+s.Table("outbox_events")+" where event_type = $1", endpoint.EventEndpointDisabled); n != 1 {
		t.Errorf("the outbox holds %d %s events, want 1", n, endpoint.EventEndpointDisabled)
	}
	var types []string
	for _, d := range ops.Accepted() {
		types = append(types, d.EventType)
	}
	if len(types) != 1 || ops.BadSignatures() != 0 {
		t.Errorf("the ops endpoint received %q (%d bad signatures), want one %s, signed", types, ops.BadSignatures(), endpoint.EventEndpointDisabled)
	}
	if n := operatorToDown.Load(); n != 0 {
		t.Errorf("the failing endpoint was sent %d operator events", n)
	}

	if id, err := uuid.Parse(got.ID); err != nil || id.Version() != 5 || got.AggregateType != endpoint.AggregateEndpoint || got.AggregateID != downID.String() {
		t.Errorf("the disabled event: webhook-id %q, aggregate %s/%s; want a UUIDv5 about endpoint %s", got.ID, got.AggregateType, got.AggregateID, downID)
	}
	var failingSince time.Time
	if err := s.Pool().QueryRow(ctx, "select failing_since from "+s.Table("endpoints")+" where id = $1", downID).Scan(&failingSince); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Endpoint struct {
			ID, Name, URL string
		} `json:"endpoint"`
		State        string    `json:"state"`
		FailingSince time.Time `json:"failing_since"`
		LastError    string    `json:"last_error"`
		Deliveries   struct {
			Pending, Processing, Failed int64
		} `json:"deliveries"`
		ConsolePath string `json:"console_path"`
	}
	if err := json.Unmarshal(got.Body, &p); err != nil {
		t.Fatalf("the disabled event's payload %s: %v", got.Body, err)
	}
	switch {
	case p.Type != endpoint.EventEndpointDisabled || p.Endpoint.ID != downID.String() || p.Endpoint.Name != "partner-down" || p.Endpoint.URL != "webhook "+down.URL+"/…":
		t.Errorf("payload %s: want the disabled event of partner-down at webhook %s/… (its path not shown)", got.Body, down.URL)
	case p.State != "auto_disabled" || !p.FailingSince.Equal(failingSince):
		t.Errorf("payload %s: want state auto_disabled, failing_since %v", got.Body, failingSince)
	case !strings.Contains(p.LastError, "Internal Server Error") || p.Deliveries.Pending+p.Deliveries.Processing != 3:
		t.Errorf("payload %s: want the last error and the 3 deliveries waiting", got.Body)
	case p.ConsolePath != "/endpoints/"+downID.String() || !strings.Contains(p.Text, "postbox endpoints enable "+downID.String()):
		t.Errorf("payload %s: want the console path and the command that enables it", got.Body)
	}
}

// --operator-events=false turns them off, which the start line says; the
// flags of operator events are refused without --endpoints, and without
// --operator-events; their values are checked by name.
func TestRelayOperatorEventsFlags(t *testing.T) {
	_, db := schemaStore(t)
	logs, _ := startRelayWithKey(t, []string{keyring.EnvVar + "=" + secretsKey}, append(append([]string{}, db...), "--endpoints", "--operator-events=false")...)
	waitFor(t, "the start line", 20*time.Second, func() bool { return strings.Contains(logs.String(), "operator_events=off") })

	sqliteDB := []string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "none.db")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sink", "https://h.example/", "--webhook-secret", secret, "--operator-events=false"}, "--operator-events ($POSTBOX_OPERATOR_EVENTS) applies only with --endpoints"},
		{[]string{"--sink", "https://h.example/", "--webhook-secret", secret, "--notify-deadletters", "10"}, "--notify-deadletters ($POSTBOX_NOTIFY_DEADLETTERS) applies only with --endpoints"},
		{[]string{"--endpoints", "--operator-events=false", "--notify-failing-after", "1m"}, "--notify-failing-after ($POSTBOX_NOTIFY_FAILING_AFTER) applies only with --operator-events"},
		{[]string{"--endpoints", "--notify-failing-after", "0s"}, "--notify-failing-after 0s: want a value above zero"},
		{[]string{"--endpoints", "--notify-check-every", "-1s"}, "--notify-check-every -1s: want a value above zero"},
		{[]string{"--endpoints", "--notify-deadletters", "-1"}, "--notify-deadletters -1: must not be negative"},
	} {
		if last := usageError(t, append(append([]string{"relay"}, c.args...), sqliteDB...)...); !strings.Contains(last, c.want) {
			t.Errorf("relay %q said %q, want %q", c.args, last, c.want)
		}
	}
}
