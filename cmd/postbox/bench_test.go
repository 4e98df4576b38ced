package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/internal/pgtest"
)

// TestBenchInboxAndUnknownScenario runs `postbox bench --scenarios inbox`
// in its own process with its flags, and checks that the JSON report has
// the inbox's measures at the concurrency --inbox-clients asked for; and
// that an unknown scenario fails the command, naming it.
func TestBenchInboxAndUnknownScenario(t *testing.T) {
	out := runOK(t, "bench", "--db", pgtest.URL(), "--scenarios", "inbox", "--duration", "1s", "--inbox-clients", "4", "--json")
	var rep struct {
		Params struct {
			Scenarios    []string `json:"scenarios"`
			InboxClients int      `json:"inbox_clients"`
		} `json:"params"`
		Measures []struct {
			Key   string  `json:"key"`
			Value float64 `json:"value"`
		} `json:"measures"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, out)
	}
	if len(rep.Params.Scenarios) != 1 || rep.Params.Scenarios[0] != "inbox" || rep.Params.InboxClients != 4 {
		t.Errorf("params %+v, want the inbox scenario with 4 clients", rep.Params)
	}
	got := map[string]float64{}
	for _, m := range rep.Measures {
		got[m.Key] = m.Value
	}
	for _, key := range []string{"inbox.handler", "inbox.pgx", "inbox.ratio"} {
		if !(got[key] > 0) {
			t.Errorf("measure %s = %v, want a positive number (measures: %v)", key, got[key], got)
		}
	}

	cmd := command("bench", "--db", pgtest.URL(), "--scenarios", "drain-noop,no-such-scenario")
	var errOut strings.Builder
	cmd.Stderr = &errOut
	if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), `"no-such-scenario"`) {
		t.Errorf("unknown scenario: err %v, stderr %q; want a failure naming it", err, errOut.String())
	}
}
