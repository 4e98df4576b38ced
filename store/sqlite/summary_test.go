package sqlite_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// AttemptSummary reads each endpoint's attempts since the time given as
// one range of endpoint_attempts_endpoint_at_idx (endpoint_id, at), with
// the planner's statistics and without: never the whole attempts log,
// whose index on at alone went in migration 0011. Its counts are those of
// the rows in the range.
func TestAttemptSummaryReadsTheEndpointTimeIndex(t *testing.T) {
	s := newStore(t, sqlite.Config{TablePrefix: "app_"})
	ctx := context.Background()
	const endpoints, perEndpoint = 20, 2500
	for range endpoints {
		if _, err := s.EndpointCreate(ctx, store.Endpoint{Name: "p", URL: "https://example.com/p", Secret: "whsec_p", Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// One attempt a second before base, every other one a success.
	base := time.Now().Truncate(time.Second)
	_, err := s.DB().ExecContext(ctx, `with recursive g(n) as (select 1 union all select n + 1 from g where n < ?2)
insert into `+s.Table("endpoint_attempts")+` (endpoint_id, event_id, attempt, error, at)
select e.id, lower(hex(randomblob(16))), 1, case when g.n % 2 = 0 then '' else 'boom' end, ?1 - g.n * 1000000
from `+s.Table("endpoints")+` e, g`, base.UnixMicro(), perEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	since := base.Add(-100*time.Second - time.Second/2) // the attempts of n = 1 to 100
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := s.DB().ExecContext(ctx, "analyze"); err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.DB().QueryContext(ctx, "explain query plan "+s.Query("attempt_summary"),
			since.UnixMicro(), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro(), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "SEARCH a USING INDEX app_endpoint_attempts_endpoint_at_idx (endpoint_id=? AND at>?)") ||
			strings.Contains(text, "SCAN a") {
			t.Errorf("analyzed %t: the summary does not read one index range per endpoint:\n%s", analyzed, text)
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
