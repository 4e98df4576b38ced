package main_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// Every numeric and duration flag of every command refuses a value the
// command would otherwise silently replace (a zero taken for the default:
// --lease 0s ran with 30s) or report by a Go field name (--concurrency -5
// was "Config.MaxConcurrency -5 is negative"): a usage error whose line
// names the flag.
func TestNumericFlagsAreCheckedByName(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "none.db")
	relay := []string{"relay", "--db", db, "--sink", "http://127.0.0.1:1/hook", "--webhook-secret", secret}
	endpointsRelay := []string{"relay", "--db", db, "--endpoints"}
	id := "0190b6d4-55b5-7a4c-9e7e-2f1c2b7a0b11"
	cases := []struct {
		cmd    []string
		flag   string
		values []string
	}{
		{relay, "timeout", []string{"0s", "-1s"}},
		{relay, "lease", []string{"0s", "-1s", "50ms"}},
		{relay, "backoff-min", []string{"0s", "-1s"}},
		{relay, "backoff-max", []string{"0s", "-1s", "1ms"}},
		{relay, "max-attempts", []string{"0", "-1"}},
		{relay, "batch", []string{"0", "-1"}},
		{relay, "concurrency", []string{"-5"}},
		{relay, "publish-batch", []string{"-1"}},
		{relay, "poll", []string{"0s", "-1s"}},
		{relay, "shutdown-timeout", []string{"0s", "-1s"}},
		{relay, "probe-interval", []string{"0s", "-1s"}},
		{relay, "metrics-sample", []string{"0s", "-1s"}},
		{relay, "heartbeat", []string{"0s", "-1s", "51s"}},
		{relay, "dedup-window", []string{"-1s"}},
		{endpointsRelay, "disable-after", []string{"0s", "-1s"}},
		{endpointsRelay, "attempts-retention", []string{"0s", "-1s"}},
		{endpointsRelay, "breaker-failures", []string{"0", "-1"}},
		{[]string{"status", "--db", db}, "types", []string{"-1"}},
		{[]string{"failed", "list", "--db", db}, "limit", []string{"0", "-1", "10001"}},
		{[]string{"failed", "list", "--db", db}, "scan", []string{"0", "-1", "1000001"}},
		{[]string{"endpoints", "add", "--db", db, "--url", "https://h.example/"}, "concurrency", []string{"0", "-1"}},
		{[]string{"endpoints", "add", "--db", db, "--url", "https://h.example/"}, "rate", []string{"-1"}},
		{[]string{"endpoints", "rotate-secret", "--db", db, id}, "grace", []string{"-1s"}},
		{[]string{"endpoints", "test", "--db", db, id}, "timeout", []string{"0s", "-1s"}},
		{[]string{"endpoints", "attempts", "--db", db, id}, "limit", []string{"0", "-1"}},
		{[]string{"demo", "--db", db}, "events", []string{"0", "-1"}},
		{[]string{"demo", "--db", db}, "rate", []string{"0", "-1"}},
		{[]string{"demo", "--db", db}, "timeout", []string{"0s", "-1s"}},
		{[]string{"demo", "--db", db}, "fault-rate", []string{"-0.5", "1.5"}},
		{[]string{"chaos", "--db", "postgres://127.0.0.1:1/x"}, "duration", []string{"0s", "-1s"}},
		{[]string{"chaos", "--db", "postgres://127.0.0.1:1/x"}, "events-per-second", []string{"0", "-1"}},
		{[]string{"chaos", "--db", "postgres://127.0.0.1:1/x"}, "lease", []string{"0s", "-1s"}},
		{[]string{"chaos", "--db", "postgres://127.0.0.1:1/x"}, "relays", []string{"0", "-1"}},
		{[]string{"chaos", "--db", "postgres://127.0.0.1:1/x"}, "sources", []string{"1", "-1"}},
		{[]string{"bench", "--db", db}, "events", []string{"-1"}},
		{[]string{"bench", "--db", db}, "duration", []string{"-1s"}},
		{[]string{"bench", "--db", db}, "clients", []string{"0", "-1"}},
		{[]string{"bench", "--db", db}, "inbox-clients", []string{"0", "-1"}},
		{[]string{"bench", "--db", db}, "ordered-aggregates", []string{"0", "-1"}},
		{[]string{"bench", "--db", db}, "receiver-latency", []string{"-1s"}},
		{[]string{"bench", "--db", db}, "sources-count", []string{"0", "-1", "2"}},
		{[]string{"bench", "--db", db}, "source-events-per-second", []string{"0", "-1"}},
		{[]string{"bench", "--db", db}, "sources-backlog", []string{"-1"}},
		{[]string{"bench", "--db", db}, "sources-window", []string{"-1s", "500ms"}},
		{[]string{"console", "--db", db}, "sample", []string{"0s", "-1s"}},
		{[]string{"console", "--db", db}, "session-idle", []string{"0s", "-1s"}},
		{[]string{"console", "--db", db}, "session-max", []string{"0s", "-1s"}},
		{[]string{"status", "--db", db}, "watch", []string{"0s", "-1s"}},
		{[]string{"relay", "--sources", "s.yaml"}, "sources-every", []string{"0s", "-1s"}},
		{[]string{"relay", "--sources", "s.yaml"}, "source-conns", []string{"0", "-1"}},
	}
	for _, c := range cases {
		for _, v := range c.values {
			args := append(append([]string{}, c.cmd...), "--"+c.flag+"="+v)
			last := runFailsWith(t, command(args...), 2)
			if !strings.Contains(last, "--"+c.flag) || strings.Contains(last, "Config.") {
				t.Errorf("postbox %s: %q, want the flag --%s named", strings.Join(args, " "), last, c.flag)
			}
		}
	}
}
