package main_test

import (
	"fmt"
	"hash/fnv"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// The relay's flags that mean nothing in one mode are refused in it, by a
// usage error that names the flag and says why: --webhook-secret with
// --endpoints (each endpoint has its secret), the flags of endpoints mode
// without it, --sink beside --endpoints.
func TestRelayFlagsRefusedByMode(t *testing.T) {
	db := []string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "none.db")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--endpoints", "--webhook-secret", secret}, "--webhook-secret ($WEBHOOK_SECRET) does not apply with --endpoints: each endpoint signs with its own secret"},
		{[]string{"--endpoints", "--sink", "https://h.example/"}, "give --endpoints or --sink (--webhook-url), not both"},
		{[]string{"--sink", "https://h.example/", "--webhook-secret", secret, "--breaker-failures", "3"}, "--breaker-failures ($POSTBOX_BREAKER_FAILURES) applies only with --endpoints"},
		{[]string{"--sink", "https://h.example/", "--webhook-secret", secret, "--allow-private-endpoints"}, "--allow-private-endpoints ($POSTBOX_ALLOW_PRIVATE_ENDPOINTS) applies only with --endpoints"},
	} {
		if last := usageError(t, append(append([]string{"relay"}, c.args...), db...)...); !strings.Contains(last, c.want) {
			t.Errorf("relay %q said %q, want %q", c.args, last, c.want)
		}
	}
}

// --signature x-signature reaches every endpoint: each signs its requests
// with its own secret, in the X-Signature scheme.
func TestEndpointsRelayXSignature(t *testing.T) {
	s, db := schemaStore(t)
	srv, good, bad := xSignatureReceiver(t, secret)
	addEndpointCmd(t, db, "--url", srv.URL, "--allow-private", "--secret", secret)
	for i := range 5 {
		insertTyped(t, s, fmt.Sprint(i), "order.created")
	}
	logs, _ := startRelayLogged(t, append(db, "--endpoints", "--signature", "x-signature", "--poll", "100ms")...)
	waitFor(t, "5 verified deliveries", 20*time.Second, func() bool { return good.Load() == 5 })
	if bad.Load() != 0 {
		t.Fatalf("%d requests failed the X-Signature check", bad.Load())
	}
	if !strings.Contains(logs.String(), "signature=x-signature") {
		t.Errorf("the relay did not say at start that endpoints are signed with x-signature:\n%s", logs)
	}
}

// With --ordered each endpoint receives each aggregate's events in order,
// although a third of the first attempts to one endpoint fail: its lane
// holds back the aggregate until the failed event is delivered, and the
// other endpoint receives everything.
func TestEndpointsRelayOrdered(t *testing.T) {
	s, db := schemaStore(t)
	runOK(t, append([]string{"migrate", "--ordered"}, db...)...)
	flaky := receiver.New(t, secret, func(_ http.ResponseWriter, _ *http.Request, d receiver.Delivery, n int) int {
		h := fnv.New32a()
		h.Write([]byte(d.ID))
		if n == 1 && h.Sum32()%3 == 0 {
			return http.StatusServiceUnavailable
		}
		return 0
	})
	healthy := receiver.New(t, secret, nil)
	addEndpointCmd(t, db, "--url", flaky.URL, "--allow-private", "--secret", secret, "--concurrency", "4")
	addEndpointCmd(t, db, "--url", healthy.URL, "--allow-private", "--secret", secret, "--concurrency", "4")
	const aggregates, perAggregate = 5, 12
	want := map[string][]string{}
	for i := range aggregates * perAggregate {
		agg := fmt.Sprint(i % aggregates)
		want[agg] = append(want[agg], insertTyped(t, s, agg, "order.created"))
	}
	startRelayLogged(t, append(db, "--endpoints", "--ordered", "--poll", "100ms", "--backoff-min", "10ms", "--backoff-max", "50ms")...)
	for name, rc := range map[string]*receiver.Receiver{"flaky": flaky, "healthy": healthy} {
		rc.WaitAccepted(t, aggregates*perAggregate, 60*time.Second)
		got := map[string][]string{}
		for _, d := range rc.Accepted() {
			got[d.AggregateID] = append(got[d.AggregateID], d.ID)
		}
		for agg, ids := range want {
			if !slices.Equal(got[agg], ids) {
				t.Errorf("%s endpoint, aggregate %s: received %v, want %v in that order", name, agg, got[agg], ids)
			}
		}
	}
}
