package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/store"
)

// AttemptSummary reads each endpoint's attempts since the time given as
// one range of endpoint_attempts_endpoint_at_idx (endpoint_id, at), with
// the planner's statistics and without (never analyzed, as under
// autovacuum off): never the whole attempts log, whose index on at alone
// went in migration 0011. Its counts are those of the rows in the range.
func TestAttemptSummaryReadsTheEndpointTimeIndex(t *testing.T) {
	s := pgtest.Store(t)
	ctx := context.Background()
	const endpoints, perEndpoint = 20, 2500
	for range endpoints {
		if _, err := s.EndpointCreate(ctx, store.Endpoint{Name: "p", URL: "https://example.com/p", Secret: "whsec_p", Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// One attempt a second before base, every other one a success.
	base := time.Now().Truncate(time.Second)
	_, err := s.Pool().Exec(ctx, `insert into `+s.Table("endpoint_attempts")+` (endpoint_id, event_id, attempt, error, at)
select e.id, gen_random_uuid(), 1, case when g % 2 = 0 then '' else 'boom' end, $1::timestamptz - g * interval '1 second'
from `+s.Table("endpoints")+` e, generate_series(1, $2::int) as g`, base, perEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	since := base.Add(-100*time.Second - time.Second/2) // the attempts of g = 1 to 100
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := s.Pool().Exec(ctx, "analyze "+s.Table("endpoint_attempts")+"; analyze "+s.Table("endpoints")); err != nil {
				t.Fatal(err)
			}
		}
		plan := explain(t, s.Pool(), s.Query("attempt_summary"), pgtype.Timestamptz{Time: since, Valid: true},
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
		if !strings.Contains(plan, "endpoint_attempts_endpoint_at_idx") || strings.Contains(plan, "Seq Scan on endpoint_attempts") {
			t.Errorf("analyzed %t: the summary does not read one index range per endpoint:\n%s", analyzed, plan)
		}
	}
	got, err := s.AttemptSummary(ctx, since)
	if err != nil || len(got) != endpoints {
		t.Fatalf("summary = %d endpoints, %v; want %d", len(got), err, endpoints)
	}
	for _, g := range got {
		if g.Attempts != 100 || g.Succeeded != 50 || !g.Last.Equal(base.Add(-time.Second)) {
			t.Errorf("summary %+v, want 50 of 100 attempts, the last at %v", g, base.Add(-time.Second))
		}
	}
}
