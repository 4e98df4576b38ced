package console

import (
	"testing"
	"time"
)

// The chart's minutes: written events that left the unfinished ones were
// delivered; a rise of the failed count is failures; samples older than an
// hour fall off.
func TestSamplesPerMinute(t *testing.T) {
	s := newSamples(15 * time.Second)
	now := time.Date(2026, 11, 30, 12, 30, 40, 0, time.UTC)
	at := func(minutesAgo int, sec int) time.Time {
		return now.Truncate(time.Minute).Add(time.Duration(-minutesAgo)*time.Minute + time.Duration(sec)*time.Second)
	}
	s.add(sample{at: at(90, 0), seq: 0})   // before the hour: no bar
	s.add(sample{at: at(2, 10), seq: 100}) // 100 written since, none left: counted in minute -2
	s.add(sample{at: at(1, 0), seq: 150, unfinished: 20, failed: 5})
	s.add(sample{at: at(1, 30), seq: 200, unfinished: 10, failed: 7})
	s.add(sample{at: at(0, 5), seq: 200, unfinished: 12, failed: 12}) // 2 failures retried, 5 failed
	got := s.perMinute(now)
	if len(got) != chartMinutes {
		t.Fatalf("%d minutes, want %d", len(got), chartMinutes)
	}
	last := got[len(got)-1]
	if !last.Start.Equal(now.Truncate(time.Minute)) {
		t.Fatalf("last minute starts %v, want %v", last.Start, now.Truncate(time.Minute))
	}
	want := map[int]minute{
		chartMinutes - 3: {Delivered: 100},
		chartMinutes - 2: {Delivered: (50 - 20) + (50 + 10), Failed: 5 + 2},
		chartMinutes - 1: {Delivered: 0, Failed: 5},
	}
	for i, m := range got {
		w := want[i]
		if m.Delivered != w.Delivered || m.Failed != w.Failed {
			t.Errorf("minute %d (%v): delivered %d failed %d, want %d and %d", i, m.Start, m.Delivered, m.Failed, w.Delivered, w.Failed)
		}
	}
	c := newChart(got)
	if c.TotalDelivered != 190 || c.MaxDelivered != 100 || c.Bars[chartMinutes-3].DeliveredH != rowHeight {
		t.Fatalf("chart: %+v", c.Bars[chartMinutes-3])
	}
}

// The samples kept stop at an hour's worth.
func TestSamplesKeepAnHour(t *testing.T) {
	s := newSamples(time.Minute)
	for i := range 500 {
		s.add(sample{seq: int64(i)})
	}
	if len(s.list) != s.keep || s.list[len(s.list)-1].seq != 499 {
		t.Fatalf("kept %d samples (want %d), the last %d", len(s.list), s.keep, s.list[len(s.list)-1].seq)
	}
}
