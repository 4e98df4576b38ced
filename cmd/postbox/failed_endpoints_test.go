package main_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// failDelivery writes a failed delivery of event to endpoint, with
// lastError, as a relay's lane leaves it.
func failDelivery(t *testing.T, s *postgres.Store, event, endpoint uuid.UUID, eventType, lastError string) {
	t.Helper()
	_, err := s.Pool().Exec(context.Background(), "insert into "+s.Table("endpoint_deliveries")+
		" (event_id, endpoint_id, aggregate_type, aggregate_id, event_type, payload, status, attempts, last_error, processed_at)"+
		" values ($1, $2, 'order', '1', $3, '{\"n\": 1}', 'failed', 3, $4, now())", event, endpoint, eventType, lastError)
	if err != nil {
		t.Fatal(err)
	}
}

// deliveryStatus is the status of event's delivery to endpoint, "" when
// there is none.
func deliveryStatus(t *testing.T, s *postgres.Store, event, endpoint uuid.UUID) string {
	t.Helper()
	var status string
	err := s.Pool().QueryRow(context.Background(), "select coalesce(max(status), '') from "+s.Table("endpoint_deliveries")+
		" where event_id = $1 and endpoint_id = $2", event, endpoint).Scan(&status)
	if err != nil {
		t.Fatal(err)
	}
	return status
}

// failed list, show, retry and purge take --endpoint NAME|ID|all: they
// work on endpoints' failed deliveries, each listed with its endpoint,
// grouped by error across endpoints; without it they keep to the outbox,
// and list says that endpoints' deliveries failed too. failed show of an
// event that failed at two endpoints shows both; endpoints retry is
// failed retry --endpoint X --all.
func TestFailedEndpointDeliveries(t *testing.T) {
	s, db := schemaStore(t)
	partner := addEndpointCmd(t, db, "--url", "https://partner.invalid/", "--name", "partner")
	backup := addEndpointCmd(t, db, "--url", "https://backup.invalid/", "--name", "backup")
	both, partnerOnly := uuid.New(), uuid.New()
	failDelivery(t, s, both, partner, "order.created", "status 500: upstream 1 busy")
	failDelivery(t, s, both, backup, "order.created", "status 500: upstream 2 busy")
	failDelivery(t, s, partnerOnly, partner, "order.paid", "127.0.0.1 is loopback: refused")
	outboxFailed := failEvents(t, s.Driver(), "order.shipped", 1, func(int) string { return "gone" })

	var all failedListJSON
	jsonOut(t, &all, append([]string{"failed", "list", "--json", "--endpoint", "all"}, db...)...)
	if len(all.Events) != 3 {
		t.Fatalf("failed list --endpoint all lists %d deliveries, want 3: %+v", len(all.Events), all)
	}
	var named struct {
		Events []struct {
			ID           string `json:"id"`
			Endpoint     string `json:"endpoint"`
			EndpointName string `json:"endpoint_name"`
		} `json:"events"`
	}
	jsonOut(t, &named, append([]string{"failed", "list", "--json", "--endpoint", partner.String()}, db...)...)
	if len(named.Events) != 2 {
		t.Fatalf("failed list --endpoint <partner's id> lists %+v, want its 2 deliveries", named.Events)
	}
	for _, e := range named.Events {
		if e.Endpoint != partner.String() || e.EndpointName != "partner" {
			t.Errorf("failed list --endpoint <partner's id>: %+v, want the partner endpoint named", e)
		}
	}
	table := runOK(t, append([]string{"failed", "list", "--endpoint", "backup"}, db...)...)
	if !regexp.MustCompile(`ENDPOINT`).MatchString(table) || !regexp.MustCompile(both.String()+`\s+backup\s+order\.created`).MatchString(table) ||
		strings.Contains(table, partnerOnly.String()) {
		t.Errorf("failed list --endpoint backup:\n%s", table)
	}
	outbox := runOK(t, append([]string{"failed", "list"}, db...)...)
	if !strings.Contains(outbox, outboxFailed[0]) || strings.Contains(outbox, both.String()) || !strings.Contains(outbox, "--endpoint all") {
		t.Errorf("failed list without --endpoint: want the outbox's failed event only, and a word on the endpoints':\n%s", outbox)
	}

	var groups groupsJSON
	jsonOut(t, &groups, append([]string{"failed", "list", "--group-by", "error", "--json", "--endpoint", "all"}, db...)...)
	if len(groups.Groups) != 2 || groups.Groups[0].Count != 2 || groups.Groups[0].Fingerprint != "status N: upstream N busy" {
		t.Errorf("failed list --group-by error --endpoint all: %+v, want the two endpoints' status 500 in one group of 2", groups.Groups)
	}

	show := runOK(t, append([]string{"failed", "show", both.String()}, db...)...)
	for _, want := range []string{"endpoint    partner (" + partner.String() + ")", "endpoint    backup (" + backup.String() + ")",
		"last error  status 500: upstream 1 busy", "last error  status 500: upstream 2 busy"} {
		if !strings.Contains(show, want) {
			t.Errorf("failed show of an event that failed at two endpoints lacks %q:\n%s", want, show)
		}
	}
	var shown []struct {
		EndpointName string `json:"endpoint_name"`
	}
	jsonOut(t, &shown, append([]string{"failed", "show", "--json", "--endpoint", "backup", both.String()}, db...)...)
	if len(shown) != 1 || shown[0].EndpointName != "backup" {
		t.Errorf("failed show --json --endpoint backup: %+v, want its one delivery", shown)
	}

	if out := runOK(t, append([]string{"failed", "retry", "--endpoint", "partner", "--all"}, db...)...); !strings.Contains(out, "retried 2 failed deliveries") {
		t.Errorf("failed retry --endpoint partner --all printed %q", out)
	}
	if st := [3]string{deliveryStatus(t, s, both, partner), deliveryStatus(t, s, partnerOnly, partner), deliveryStatus(t, s, both, backup)}; st != [3]string{store.StatusPending, store.StatusPending, store.StatusFailed} {
		t.Errorf("after retry --endpoint partner: %v, want the partner's two pending and the backup's failed", st)
	}
	if r, err := s.Get(context.Background(), uuid.MustParse(outboxFailed[0])); err != nil || r.Status != store.StatusFailed {
		t.Errorf("retry --endpoint touched the outbox: %+v, %v", r, err)
	}
	if out := runOK(t, append([]string{"failed", "purge", "--endpoint", "all", "--older-than", "0s", "--dry-run"}, db...)...); !strings.Contains(out, "would purge 1 failed deliveries") || !strings.Contains(out, "backup") {
		t.Errorf("failed purge --endpoint all --dry-run printed %q", out)
	}
	if out := runOK(t, append([]string{"failed", "purge", "--endpoint", "backup", "--older-than", "0s"}, db...)...); !strings.Contains(out, "purged 1 failed deliveries") {
		t.Errorf("failed purge --endpoint backup printed %q", out)
	}
	if st := deliveryStatus(t, s, both, backup); st != "" {
		t.Errorf("the purged delivery is %q", st)
	}

	failDelivery(t, s, partnerOnly, backup, "order.paid", "status 410")
	if out := runOK(t, append([]string{"endpoints", "retry", "backup"}, db...)...); !strings.Contains(out, "retried 1 failed deliveries") {
		t.Errorf("endpoints retry backup printed %q", out)
	}
	if st := deliveryStatus(t, s, partnerOnly, backup); st != store.StatusPending {
		t.Errorf("after endpoints retry backup: %q, want pending", st)
	}
	if errText := runFails(t, command(append([]string{"failed", "list", "--endpoint", "nosuch"}, db...)...)); !strings.Contains(errText, `no endpoint named "nosuch"`) {
		t.Errorf("failed list --endpoint nosuch said %q", errText)
	}
}
