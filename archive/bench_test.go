package archive_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/fileblob"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// benchEvents are n events with 1 KB payloads, as a retention batch: one
// a millisecond from start.
func benchEvents(start time.Time, n int) []store.HistoryEvent {
	es := make([]store.HistoryEvent, n)
	for i := range es {
		es[i] = event(start.Add(time.Duration(i)*time.Millisecond), i)
		es[i].Payload = fmt.Appendf(nil, `{"n":%d,"text":%q}`, i, strings.Repeat(fmt.Sprintf("lorem %d ipsum ", i), 100)[:1000])
	}
	return es
}

// BenchmarkKeep is Keep of retention batches of 1000 events with 1 KB
// payloads on a file bucket: events/s.
func BenchmarkKeep(b *testing.B) {
	bucket, err := fileblob.OpenBucket(b.TempDir(), &fileblob.Options{NoTempDir: true})
	if err != nil {
		b.Fatal(err)
	}
	a := archive.New(bucket, "")
	defer a.Close()
	const batch = 1000
	ctx := context.Background()
	n := 0
	for b.Loop() {
		if err := a.Keep(ctx, benchEvents(base.Add(time.Duration(n)*time.Second), batch)); err != nil {
			b.Fatal(err)
		}
		n++
	}
	b.ReportMetric(float64(n*batch)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkRead is Read of 20 objects of 1000 events with 1 KB payloads
// on a file bucket, whole: events/s.
func BenchmarkRead(b *testing.B) {
	bucket, err := fileblob.OpenBucket(b.TempDir(), &fileblob.Options{NoTempDir: true})
	if err != nil {
		b.Fatal(err)
	}
	a := archive.New(bucket, "")
	defer a.Close()
	ctx := context.Background()
	const objects, batch = 20, 1000
	for i := range objects {
		if err := a.Keep(ctx, benchEvents(base.Add(time.Duration(i)*time.Second), batch)); err != nil {
			b.Fatal(err)
		}
	}
	total := 0
	for b.Loop() {
		err := a.Read(ctx, archive.ReadParams{}, func(es []store.HistoryEvent) error {
			total += len(es)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "events/s")
}
