package main_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// status shows each endpoint's deliveries (pending, processing, failed,
// the oldest pending one's age, since when it fails) in text and JSON,
// and their sum beside the outbox's counts: an endpoint's backlog is not
// hidden behind an empty outbox and a relay whose fan-out is up.
func TestStatusShowsEndpointDeliveries(t *testing.T) {
	s, db := schemaStore(t)
	ctx := context.Background()
	partner := addEndpointCmd(t, db, "--url", "https://partner.invalid/hooks", "--name", "partner")
	addEndpointCmd(t, db, "--url", "https://quiet.invalid/hooks", "--name", "quiet")
	q := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.Pool().Exec(ctx, strings.ReplaceAll(sql, "{schema}", s.Schema()), args...); err != nil {
			t.Fatal(err)
		}
	}
	q(`insert into {schema}.endpoint_deliveries (event_id, endpoint_id, event_type, payload, created_at)
		select gen_random_uuid(), $1, 'order.created', '{}', now() - interval '2 minutes' from generate_series(1, 88)`, partner)
	q(`insert into {schema}.endpoint_deliveries (event_id, endpoint_id, event_type, payload, status, attempts, last_error, processed_at)
		values (gen_random_uuid(), $1, 'order.created', '{}', 'failed', 5, 'status 500', now())`, partner)
	q(`update {schema}.endpoints set failing_since = now() - interval '5 minutes' where id = $1`, partner)
	q(`insert into {schema}.relay_presence (relay_id, host, mode, sink) values ('r1', 'h', 'endpoints', 'endpoints from the database')`)

	var st struct {
		Pending            int64 `json:"pending"`
		EndpointDeliveries struct {
			Pending int64   `json:"pending"`
			Failed  int64   `json:"failed"`
			Oldest  float64 `json:"oldest_pending_age_seconds"`
		} `json:"endpoint_deliveries"`
		Endpoints []struct {
			Name         string     `json:"name"`
			State        string     `json:"state"`
			Pending      int64      `json:"pending"`
			Processing   int64      `json:"processing"`
			Failed       int64      `json:"failed"`
			Oldest       float64    `json:"oldest_pending_age_seconds"`
			FailingSince *time.Time `json:"failing_since"`
		} `json:"endpoints"`
	}
	jsonOut(t, &st, append([]string{"status", "--json"}, db...)...)
	if st.Pending != 0 || st.EndpointDeliveries.Pending != 88 || st.EndpointDeliveries.Failed != 1 || st.EndpointDeliveries.Oldest < 100 {
		t.Errorf("status --json: outbox pending %d, endpoint deliveries %+v; want 0, and 88 pending, 1 failed, the oldest 2 minutes old", st.Pending, st.EndpointDeliveries)
	}
	if len(st.Endpoints) != 2 {
		t.Fatalf("status --json shows %d endpoints, want 2", len(st.Endpoints))
	}
	p, quiet := st.Endpoints[0], st.Endpoints[1]
	if p.Name != "partner" || p.State != "enabled" || p.Pending != 88 || p.Processing != 0 || p.Failed != 1 || p.Oldest < 100 ||
		p.FailingSince == nil || time.Since(*p.FailingSince) < 4*time.Minute {
		t.Errorf("status --json, the partner endpoint: %+v", p)
	}
	if quiet.Name != "quiet" || quiet.Pending != 0 || quiet.FailingSince != nil {
		t.Errorf("status --json, the quiet endpoint: %+v", quiet)
	}

	text := runOK(t, append([]string{"status"}, db...)...)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`endpoint deliveries\s+88 pending, 0 processing, 1 failed, oldest pending 2m`),
		regexp.MustCompile(`partner\s+enabled\s+88\s+0\s+1\s+2m\S*\s+since \S+ \(5m`),
		regexp.MustCompile(`quiet\s+enabled\s+0\s+0\s+0\s+-\s+-`),
		regexp.MustCompile(`r1\s+endpoints\s+.*fan-out up; each endpoint's deliveries below`),
	} {
		if !want.MatchString(text) {
			t.Errorf("status lacks %s:\n%s", want, text)
		}
	}
	if strings.Contains(text, "sink up") {
		t.Errorf("status says \"sink up\" of an endpoints-mode relay:\n%s", text)
	}
}

// status shows each endpoint's breaker as its relay recorded it: closed,
// open until its next probe, or probing once that time passed; "-" for an
// endpoint that is not enabled (no lane runs for it), whatever a lane left.
// --json gives the time as recorded, absent while the breaker is closed.
func TestStatusShowsEndpointBreaker(t *testing.T) {
	s, db := schemaStore(t)
	ctx := context.Background()
	closed := addEndpointCmd(t, db, "--url", "https://closed.invalid/hooks", "--name", "closed")
	paused := addEndpointCmd(t, db, "--url", "https://paused.invalid/hooks", "--name", "paused")
	probing := addEndpointCmd(t, db, "--url", "https://probing.invalid/hooks", "--name", "probing")
	off := addEndpointCmd(t, db, "--url", "https://off.invalid/hooks", "--name", "off")
	runOK(t, append([]string{"endpoints", "disable", off.String()}, db...)...)
	now := time.Now().Truncate(time.Microsecond)
	until := map[uuid.UUID]time.Time{paused: now.Add(time.Hour), probing: now.Add(-2 * time.Minute), off: now.Add(time.Hour)}
	for id, at := range until {
		if err := s.Driver().EndpointBreaker(ctx, id, at); err != nil {
			t.Fatal(err)
		}
	}

	var st struct {
		Endpoints []struct {
			ID               uuid.UUID  `json:"id"`
			BreakerOpenUntil *time.Time `json:"breaker_open_until"`
		} `json:"endpoints"`
	}
	jsonOut(t, &st, append([]string{"status", "--json"}, db...)...)
	if len(st.Endpoints) != 4 {
		t.Fatalf("status --json shows %d endpoints, want 4", len(st.Endpoints))
	}
	for _, e := range st.Endpoints {
		want, open := until[e.ID]
		switch {
		case e.ID == closed && e.BreakerOpenUntil != nil:
			t.Errorf("status --json: the closed breaker is open until %v", *e.BreakerOpenUntil)
		case open && (e.BreakerOpenUntil == nil || !e.BreakerOpenUntil.Equal(want)):
			t.Errorf("status --json: endpoint %s's breaker open until %v, want %v", e.ID, e.BreakerOpenUntil, want)
		}
	}
	// endpoints show --json and list --json (admin.View) give it too.
	var shown struct {
		BreakerOpenUntil *time.Time `json:"breaker_open_until"`
		UpdatedAt        time.Time  `json:"updated_at"`
	}
	jsonOut(t, &shown, append([]string{"endpoints", "show", "--json", "paused"}, db...)...)
	if shown.BreakerOpenUntil == nil || !shown.BreakerOpenUntil.Equal(until[paused]) || shown.UpdatedAt.IsZero() {
		t.Errorf("endpoints show --json paused: breaker open until %v, updated at %v; want %v and a time", shown.BreakerOpenUntil, shown.UpdatedAt, until[paused])
	}
	var listed []struct {
		Name             string     `json:"name"`
		BreakerOpenUntil *time.Time `json:"breaker_open_until"`
	}
	jsonOut(t, &listed, append([]string{"endpoints", "list", "--json"}, db...)...)
	for _, e := range listed {
		if (e.Name == "closed") != (e.BreakerOpenUntil == nil) {
			t.Errorf("endpoints list --json: %s's breaker open until %v", e.Name, e.BreakerOpenUntil)
		}
	}

	text := runOK(t, append([]string{"status"}, db...)...)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)breaker$`),
		regexp.MustCompile(`(?m)^closed\s+enabled\s+.*\s+closed$`),
		regexp.MustCompile(`(?m)^paused\s+enabled\s+.*\s+open until ` + regexp.QuoteMeta(until[paused].UTC().Format(time.RFC3339)) + ` \(next probe in (59m\S*|1h0m0s)\)$`),
		regexp.MustCompile(`(?m)^probing\s+enabled\s+.*\s+open, probing since ` + regexp.QuoteMeta(until[probing].UTC().Format(time.RFC3339)) + ` \(2m\S*\)$`),
		regexp.MustCompile(`(?m)^off\s+disabled\s+.*\s+-$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("status lacks %s:\n%s", want, text)
		}
	}
}
