package main_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
)

// hostile is what a producer, a receiver or a relay row may hold to drive
// a terminal: set its title (OSC … BEL), clear the screen, go back to the
// start of the line to fake one, a C1 CSI, a right-to-left override, a
// tab to shift the columns.
const hostile = "evil\x1b]0;pwned\x07\x1b[2J\rfake\u009b31m\u202e\tcol"

// rawControls lists what must never reach the terminal raw.
var rawControls = []string{"\x1b", "\x07", "\r", "\u009b", "\u202e", "\t"}

// Every command that prints text written by producers, receivers or relays
// (status, failed list, --group-by error, failed show, endpoints list,
// show, attempts, the dry runs), in tables, plain text and JSON, escapes
// its control characters: written by plain SQL, they reach the output as
// \x1b, \u009b, never raw.
func TestHostileTextIsEscaped(t *testing.T) {
	s, db := schemaStore(t)
	ctx := context.Background()
	schema := s.Schema()
	q := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, strings.ReplaceAll(sql, "{schema}", schema), args...); err != nil {
			t.Fatal(err)
		}
	}
	failedID, endpointID, sealedID := uuid.New(), uuid.New(), uuid.New()
	q(`insert into {schema}.outbox_events (id, aggregate_type, aggregate_id, event_type, payload, dedup_key, status, retries, processed_at, last_error, headers)
		values ($1, $2, $2, $2, jsonb_build_object('k', $2::text), $2, 'failed', 1, now(), $2, jsonb_build_object($2::text, $2::text))`, failedID, hostile)
	q(`insert into {schema}.outbox_events (aggregate_type, aggregate_id, event_type, payload) values ('a', '1', $1, '{}')`, hostile+"pending")
	q(`insert into {schema}.relay_presence (relay_id, host, mode, sink, version, sink_down_since, sink_error)
		values ($1, $1, $1, $1, $1, now(), $1)`, hostile)
	q(`insert into {schema}.endpoints (id, name, url, types, secret) values ($1, $2, 'https://h.example/' || $2, $2, 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')`, endpointID, hostile)
	// A sealed endpoint whose every text column shown is hostile: its
	// filter, envelope, signature profile, sealing key id, fingerprint and
	// kinds of authentication.
	q(`insert into {schema}.endpoints (id, name, url, secret, sealed, sealed_key, sealed_fingerprint, auth, filter, envelope, signature)
		values ($1, 'sealed', 'https://h.example/', '', '\x01'::bytea, $2, $2, $2, $2, $2, $2)`, sealedID, hostile)
	q(`insert into {schema}.endpoint_attempts (endpoint_id, event_id, event_type, attempt, status_code, error, response)
		values ($1, $2, $3, 1, 500, $3, $3)`, endpointID, failedID, hostile)

	for _, args := range [][]string{
		{"status"},
		{"status", "--json"},
		{"failed", "list"},
		{"failed", "list", "--json"},
		{"failed", "list", "--group-by", "error"},
		{"failed", "list", "--group-by", "error", "--json"},
		{"failed", "show", failedID.String()},
		{"failed", "show", "--json", failedID.String()},
		{"failed", "purge", "--older-than", "0s", "--dry-run"},
		{"endpoints", "list"},
		{"endpoints", "list", "--json"},
		{"endpoints", "show", endpointID.String()},
		{"endpoints", "show", "--json", endpointID.String()},
		{"endpoints", "show", sealedID.String()},
		{"endpoints", "show", "--json", sealedID.String()},
		{"endpoints", "attempts", endpointID.String()},
		{"endpoints", "attempts", "--json", endpointID.String()},
		{"endpoints", "remove", "--dry-run", endpointID.String()},
	} {
		out := runOK(t, append(args, db...)...)
		for _, c := range rawControls {
			if strings.Contains(out, c) {
				t.Errorf("postbox %s printed %q raw:\n%q", strings.Join(args, " "), c, out)
			}
		}
		if !utf8.ValidString(out) {
			t.Errorf("postbox %s printed invalid UTF-8: %q", strings.Join(args, " "), out)
		}
		escaped := `evil\x1b]` // as printable writes it
		if slices.Contains(args, "--json") {
			escaped = `evil\u001b]` // as JSON writes it
		}
		if !strings.Contains(out, escaped) {
			t.Errorf("postbox %s did not print the hostile text escaped (%s):\n%s", strings.Join(args, " "), escaped, out)
		}
	}
}
