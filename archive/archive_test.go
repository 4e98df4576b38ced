package archive_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/memblob"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// backends are the buckets every test runs on: in memory and on disk.
var backends = []struct {
	name string
	open func(t testing.TB) *blob.Bucket
}{
	{"mem", func(t testing.TB) *blob.Bucket { return memblob.OpenBucket(nil) }},
	{"file", func(t testing.TB) *blob.Bucket {
		b, err := fileblob.OpenBucket(t.TempDir(), &fileblob.Options{NoTempDir: true})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}},
}

// forEach runs test on an archive in each backend; it also gets the
// bucket, to look at or spoil what the archive wrote.
func forEach(t *testing.T, test func(t *testing.T, a *archive.Archive, b *blob.Bucket)) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			b := be.open(t)
			a := archive.New(b, "")
			t.Cleanup(func() { _ = a.Close() })
			test(t, a, b)
		})
	}
}

// base is the hour the tests' events are written in.
var base = time.Date(2026, 3, 14, 15, 0, 0, 0, time.UTC)

// idAt is a UUIDv7 of time t, n its counter bits: ids in the order of (t, n).
func idAt(t time.Time, n int) uuid.UUID {
	var id uuid.UUID
	ms := uint64(t.UnixMilli())
	for i := 0; i < 6; i++ {
		id[i] = byte(ms >> (40 - 8*i))
	}
	id[6] = 0x70 | byte(n>>8)&0x0f
	id[7] = byte(n)
	id[8] = 0x80
	return id
}

// event is a plain delivered event, n-th of its minute.
func event(created time.Time, n int) store.HistoryEvent {
	return store.HistoryEvent{
		Event: postbox.Event{
			ID: idAt(created, n), AggregateType: "order", AggregateID: fmt.Sprint(n),
			EventType: "order.created", Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)),
			Headers: map[string]string{"traceparent": "00-abc"},
		},
		OutboxSeq:   int64(n),
		CreatedAt:   created,
		ProcessedAt: created.Add(time.Second),
	}
}

// events is n plain events written from start, one a second.
func events(start time.Time, n int) []store.HistoryEvent {
	var es []store.HistoryEvent
	for i := range n {
		es = append(es, event(start.Add(time.Duration(i)*time.Second), i))
	}
	return es
}

// readAll reads what p selects, checking the batches' sizes.
func readAll(t *testing.T, a *archive.Archive, p archive.ReadParams) []store.HistoryEvent {
	t.Helper()
	var got []store.HistoryEvent
	max := p.BatchSize
	if max <= 0 {
		max = archive.DefaultBatchSize
	}
	err := a.Read(context.Background(), p, func(batch []store.HistoryEvent) error {
		if len(batch) == 0 || len(batch) > max {
			t.Errorf("a batch of %d events (BatchSize %d)", len(batch), max)
		}
		got = append(got, batch...)
		return nil
	})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return got
}

func ids(es []store.HistoryEvent) []uuid.UUID {
	var out []uuid.UUID
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// keys lists the bucket's keys under prefix.
func keys(t *testing.T, b *blob.Bucket, prefix string) []string {
	t.Helper()
	var out []string
	it := b.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(context.Background())
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.Key)
	}
}

func keep(t *testing.T, a *archive.Archive, es []store.HistoryEvent) {
	t.Helper()
	if err := a.Keep(context.Background(), es); err != nil {
		t.Fatalf("Keep: %v", err)
	}
}

// same reports how want and got differ, events compared field by field
// (payloads as compact JSON, times as instants).
func same(t *testing.T, want, got []store.HistoryEvent) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("read %d events, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		var compact bytes.Buffer
		if err := json.Compact(&compact, w.Payload); err != nil {
			t.Fatal(err)
		}
		switch {
		case w.ID != g.ID, w.AggregateType != g.AggregateType, w.AggregateID != g.AggregateID,
			w.EventType != g.EventType, w.DedupKey != g.DedupKey, w.OutboxSeq != g.OutboxSeq:
			t.Errorf("event %d: read %+v, want %+v", i, g.Event, w.Event)
		case !bytes.Equal(compact.Bytes(), g.Payload):
			t.Errorf("event %d: payload %.80q, want %.80q", i, g.Payload, compact.Bytes())
		case !w.CreatedAt.Equal(g.CreatedAt) || !w.ProcessedAt.Equal(g.ProcessedAt):
			t.Errorf("event %d: times %v %v, want %v %v", i, g.CreatedAt, g.ProcessedAt, w.CreatedAt, w.ProcessedAt)
		case len(w.Headers) != len(g.Headers):
			t.Errorf("event %d: headers %v, want %v", i, g.Headers, w.Headers)
		}
		for k, v := range w.Headers {
			if g.Headers[k] != v {
				t.Errorf("event %d: header %q = %q, want %q", i, k, g.Headers[k], v)
			}
		}
	}
}

// Hostile events (a payload of megabytes that does not compress, so that
// its object is read as a stream; unicode and HTML in every string; odd
// header names; zero times; a pretty-printed payload) come back as they
// were kept, in id order.
func TestKeepReadRoundTrip(t *testing.T) {
	noise := make([]byte, 6<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	huge, _ := json.Marshal(map[string]string{"blob": base64.StdEncoding.EncodeToString(noise)})
	zero := store.HistoryEvent{Event: postbox.Event{ID: idAt(time.Time{}, 1), Payload: []byte(`null`)}}
	hostile := []store.HistoryEvent{
		event(base.Add(3*time.Minute), 3),
		{
			Event: postbox.Event{
				ID: idAt(base.Add(time.Minute), 1), AggregateType: "commande \u00e9t\u00e9 \U0001F4E6", AggregateID: "<script>&amp;\n\"'\\",
				EventType: "ordre.cr\u00e9\u00e9 \u2028", Payload: []byte("{\n  \"a\" : [1, 2.50, 1e400, \"\\u0000\"],\n  \"<b>\": \"&\"\n}\n"),
				DedupKey: "key\x00with nul",
				Headers:  map[string]string{"": "empty name", "X-\u00c9": "\u65e5\u672c", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "nl": "a\r\nb"},
			},
			OutboxSeq:   -1,
			CreatedAt:   base.Add(time.Minute + 123456789*time.Nanosecond).In(time.FixedZone("x", 5*3600)),
			ProcessedAt: base.Add(time.Hour),
		},
		{Event: postbox.Event{ID: idAt(base.Add(2*time.Minute), 2), EventType: "huge", Payload: huge}, CreatedAt: base.Add(2 * time.Minute), ProcessedAt: base.Add(2 * time.Minute)},
		zero,
	}
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		keep(t, a, hostile)
		want := slices.Clone(hostile)
		slices.SortFunc(want, func(x, y store.HistoryEvent) int { return bytes.Compare(x.ID[:], y.ID[:]) })
		same(t, want, readAll(t, a, archive.ReadParams{}))
		// Two hours, two objects (the zero time's and base's).
		if got := keys(t, b, "events/"); len(got) != 2 {
			t.Errorf("objects %v, want one for year 1 and one for %v", got, base)
		}
	})
}
