package console

import (
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// chartMinutes is how far back the overview's chart goes.
const chartMinutes = 60

// sample is one reading of the store: its sequence (events ever written),
// its unfinished events (pending, processing and failed) and its failed
// ones; and what the overview shows of it, the counts, the counts by
// type and the endpoints' counts.
type sample struct {
	at         time.Time
	seq        int64
	unfinished int64
	failed     int64
	stats      store.StatusCounts
	types      []store.TypeStats
	// endpoints are the webhook endpoints with their deliveries' counts;
	// endpointsError is true when they could not be read.
	endpoints      []endpointRow
	endpointsError bool
}

// endpointRow is one webhook endpoint on the overview: what it is and
// its deliveries' counts. It holds no URL and no secret.
type endpointRow struct {
	ID     uuid.UUID
	Name   string
	State  string
	Shadow bool
	Counts store.DeliveryCounts
}

// endpointTotals sums the endpoints' pending, processing and failed
// deliveries; OldestPendingAge is the oldest of theirs.
func endpointTotals(rows []endpointRow) store.DeliveryCounts {
	var t store.DeliveryCounts
	for _, r := range rows {
		t.Pending += r.Counts.Pending
		t.Processing += r.Counts.Processing
		t.Failed += r.Counts.Failed
		t.Dropped += r.Counts.Dropped
		t.OldestPendingAge = max(t.OldestPendingAge, r.Counts.OldestPendingAge)
	}
	return t
}

// samples keeps the last hour of samples.
type samples struct {
	mu   sync.Mutex
	keep int
	list []sample
}

func newSamples(every time.Duration) *samples {
	return &samples{keep: int(chartMinutes*time.Minute/every) + 2}
}

func (s *samples) add(x sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, x)
	if len(s.list) > s.keep {
		s.list = append(s.list[:0], s.list[len(s.list)-s.keep:]...)
	}
}

// latest is the most recent sample; false before the first.
func (s *samples) latest() (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.list) == 0 {
		return sample{}, false
	}
	return s.list[len(s.list)-1], true
}

// minute is one bar of the chart.
type minute struct {
	Start     time.Time
	Delivered int64
	Failed    int64
}

// perMinute turns the samples into the events delivered and failed in each
// of the last chartMinutes minutes before now, oldest first. Between two
// samples, the events that left the unfinished ones, less those written
// meanwhile, were delivered (or purged); a rise of the failed count is
// failures (less retries of failed events made meanwhile). The first
// minutes after the console started stay empty.
func (s *samples) perMinute(now time.Time) []minute {
	s.mu.Lock()
	list := append([]sample(nil), s.list...)
	s.mu.Unlock()
	end := now.Truncate(time.Minute).Add(time.Minute)
	start := end.Add(-chartMinutes * time.Minute)
	out := make([]minute, chartMinutes)
	for i := range out {
		out[i].Start = start.Add(time.Duration(i) * time.Minute)
	}
	for i := 1; i < len(list); i++ {
		a, b := list[i-1], list[i]
		if b.at.Before(start) || !b.at.Before(end) {
			continue
		}
		m := &out[int(b.at.Sub(start)/time.Minute)]
		m.Delivered += max(0, (b.seq-a.seq)-(b.unfinished-a.unfinished))
		m.Failed += max(0, b.failed-a.failed)
	}
	return out
}
