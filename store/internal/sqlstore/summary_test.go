package sqlstore_test

import (
	"testing"
	"time"

	"github.com/postbox-go/postbox/store/internal/sqlstore"
)

// The since of an attempt summary is kept within the times a row may
// hold, so that no store encodes a time it cannot (a Go time beyond
// PostgreSQL's, or one whose Unix microseconds overflow): before year 1 is
// no bound at all, after year 9999 the start of year 10000.
func TestSummarySince(t *testing.T) {
	year1 := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	year10000 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now()
	for _, tc := range []struct {
		since     time.Time
		from      time.Time
		unbounded bool
	}{
		{time.Time{}, time.Time{}, true},
		{year1.Add(time.Microsecond), year1.Add(time.Microsecond), false},
		{year1.Add(-time.Microsecond), time.Time{}, true},
		{time.Unix(-1<<62, 0), time.Time{}, true},
		{now, now, false},
		{year10000.Add(-time.Microsecond), year10000.Add(-time.Microsecond), false},
		{year10000, year10000, false},
		{time.Unix(1<<62, 0), year10000, false},
	} {
		got := sqlstore.SummarySince(tc.since)
		if !got.From.Equal(tc.from) || got.Unbounded != tc.unbounded || !got.Min.Equal(year1) || !got.End.Equal(year10000) {
			t.Errorf("SummarySince(%v) = %+v, want from %v, unbounded %t, times of years 1 to 9999", tc.since, got, tc.from, tc.unbounded)
		}
	}
}
