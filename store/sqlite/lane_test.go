package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// A delivery row the store cannot read comes back from a lane's claim as
// ClaimedEvent.Invalid, naming its columns, without failing the claim or the
// rows beside it.
func TestLaneClaimReadsHostileRowsAlone(t *testing.T) {
	s := newStore(t, sqlite.Config{})
	ctx := context.Background()
	e, err := s.EndpointCreate(ctx, store.Endpoint{Name: "h", URL: "https://example.com/h", Secret: "whsec_h", Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	var routes []store.Route
	for range 3 {
		routes = append(routes, store.Route{Event: postbox.Event{ID: postbox.NewID(), EventType: "t", Payload: []byte(`{}`)}, Endpoints: []uuid.UUID{e.ID}})
	}
	if _, err := s.Driver().DeliveryInsert(ctx, routes); err != nil {
		t.Fatal(err)
	}
	for i, set := range []string{
		"headers = '[1]', attempts = 'many', payload = x'00ff'",
		"created_at = 'yesterday', event_type = ''",
	} {
		if _, err := s.DB().ExecContext(ctx, "update endpoint_deliveries set "+set+" where event_id = ?", routes[i].Event.ID.String()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Driver().EndpointLane(e).Claim(ctx, store.ClaimParams{Owner: "r", Limit: 10, Lease: time.Minute})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim = %+v, %v; want the 3 rows", got, err)
	}
	byID := map[uuid.UUID]store.ClaimedEvent{}
	for _, d := range got {
		byID[d.ID] = d
	}
	for i, columns := range [][]string{{"attempts", "headers", "payload"}, {"created_at", "event_type"}, nil} {
		d := byID[routes[i].Event.ID]
		for _, c := range columns {
			if !strings.Contains(d.Invalid, c+": ") {
				t.Errorf("row %d: Invalid = %q, want it to name %s", i, d.Invalid, c)
			}
		}
		if columns == nil && (d.Invalid != "" || d.Attempt != 1) {
			t.Errorf("healthy row = %+v, want it read", d)
		}
		if d.OutboxSeq == 0 {
			t.Errorf("row %d: OutboxSeq not set", i)
		}
	}
}
