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
	"strings"
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

// Keep given the same events twice (the relay crashed after the first
// Keep, before deleting the rows) leaves one object and one entry, with the
// same bytes; with the object written and its entry missing (the crash
// came between the two), Keep completes the entry; with the entry there,
// it writes the object again, mending it (it does not look first: see
// TestKeepReadsNothing).
func TestKeepIsIdempotent(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		ctx := context.Background()
		es := events(base, 50)
		keep(t, a, es)
		objects, entries := keys(t, b, "events/"), keys(t, b, "manifest/")
		if len(objects) != 1 || len(entries) != 1 {
			t.Fatalf("objects %v, entries %v: want one of each", objects, entries)
		}
		first, err := b.ReadAll(ctx, objects[0])
		if err != nil {
			t.Fatal(err)
		}
		entry, err := b.ReadAll(ctx, entries[0])
		if err != nil {
			t.Fatal(err)
		}

		// The same events, shuffled and one given twice.
		again := slices.Clone(es)
		slices.Reverse(again)
		again = append(again, es[7])
		keep(t, a, again)
		if got := keys(t, b, ""); !slices.Equal(got, append(slices.Clone(objects), entries...)) {
			t.Fatalf("after a second Keep the bucket holds %v, want %v and %v", got, objects, entries)
		}
		if second, _ := b.ReadAll(ctx, objects[0]); !bytes.Equal(first, second) {
			t.Errorf("the second Keep wrote other bytes")
		}

		// Crash between object and entry.
		if err := b.Delete(ctx, entries[0]); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, a, archive.ReadParams{}); len(got) != 0 {
			t.Errorf("an object without its entry was read: %d events", len(got))
		}
		keep(t, a, es)
		if got, _ := b.ReadAll(ctx, entries[0]); !bytes.Equal(got, entry) {
			t.Errorf("Keep again wrote the entry %s, want %s", got, entry)
		}
		same(t, es, readAll(t, a, archive.ReadParams{}))

		// Entry there, object spoiled: Keep writes the same bytes again.
		if err := b.WriteAll(ctx, objects[0], []byte("spoiled"), nil); err != nil {
			t.Fatal(err)
		}
		keep(t, a, es)
		if got, _ := b.ReadAll(ctx, objects[0]); !bytes.Equal(got, first) {
			t.Errorf("Keep with the entry there left the object %.40q, want its bytes again", got)
		}
		same(t, es, readAll(t, a, archive.ReadParams{}))
	})
}

// Keep of no events writes nothing; Keep writes one object for each hour
// its events were written in, under that hour.
func TestKeepObjectPerHour(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		keep(t, a, nil)
		if got := keys(t, b, ""); len(got) != 0 {
			t.Fatalf("Keep(nil) wrote %v", got)
		}
		var es []store.HistoryEvent
		for h := range 3 {
			es = append(es, events(base.Add(time.Duration(h)*time.Hour+59*time.Minute), 2)...)
		}
		keep(t, a, es)
		objects, entries := keys(t, b, "events/"), keys(t, b, "manifest/")
		for h := range 3 {
			hour := base.Add(time.Duration(h) * time.Hour).Format("2006/01/02/15/")
			n := 0
			for _, k := range objects {
				if strings.HasPrefix(k, "events/"+hour) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d objects under events/%s, want 1 (objects %v)", n, hour, objects)
			}
		}
		if len(objects) != 3 || len(entries) != 3 {
			t.Errorf("objects %v, entries %v: want three of each", objects, entries)
		}
		var total int
		err := a.Objects(context.Background(), store.HistoryFilter{}, func(o archive.Object) error {
			total += o.Count
			if o.Count != 2 || len(o.EventTypes) != 1 || o.EventTypes[0] != "order.created" {
				t.Errorf("entry %+v: want 2 events of order.created", o)
			}
			return nil
		})
		if err != nil || total != 6 {
			t.Errorf("Objects counted %d events (%v), want 6", total, err)
		}
	})
}

// spoil replaces what key holds.
func spoil(t *testing.T, b *blob.Bucket, key string, data []byte) {
	t.Helper()
	if err := b.WriteAll(context.Background(), key, data, nil); err != nil {
		t.Fatal(err)
	}
}

// A window reads only the objects that can hold events written within
// it: those of other hours (object and entry) and, within its hour, an
// object whose events all came before the window, are spoiled, and Read
// does not notice.
func TestReadWindowOpensOnlyOverlapping(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		// Hours 10 to 14 of the day before base, then two more objects in
		// hour 12: 12:00-12:09 and 12:40-12:49.
		day := base.Add(-24 * time.Hour).Truncate(24 * time.Hour)
		for h := 10; h <= 14; h++ {
			keep(t, a, events(day.Add(time.Duration(h)*time.Hour+20*time.Minute), 10))
		}
		keep(t, a, events(day.Add(12*time.Hour), 10))
		late := events(day.Add(12*time.Hour+40*time.Minute), 10)
		keep(t, a, late)
		// Also a month and a year away.
		keep(t, a, events(day.AddDate(0, 1, 0), 3))
		keep(t, a, events(day.AddDate(-1, 0, 0), 3))

		inWindow := day.Add(12*time.Hour + 30*time.Minute)
		for _, k := range keys(t, b, "") {
			if !strings.Contains(k, day.Add(12*time.Hour).Format("/2006/01/02/15/")) {
				spoil(t, b, k, []byte("spoiled"))
			}
		}
		// The 12:00-12:09 and 12:20-12:29 objects: before the window.
		for _, k := range keys(t, b, "events/") {
			if strings.HasPrefix(k, "events/"+day.Add(12*time.Hour).Format("2006/01/02/15/")+idAt(day.Add(12*time.Hour), 0).String()[:8]) {
				spoil(t, b, k, []byte("spoiled"))
			}
		}
		got := readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{Since: inWindow, Until: day.Add(13 * time.Hour)}})
		same(t, late, got)

		// Without a window the spoiled objects are read, and refused.
		err := a.Read(context.Background(), archive.ReadParams{}, func([]store.HistoryEvent) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "manifest entry manifest/") {
			t.Errorf("Read of spoiled entries: %v, want an error naming the entry", err)
		}
	})
}

// Objects whose ids overlap (retention batches go by processed_at, and an
// event replayed and delivered again is archived again) are merged in id
// order, each id once, in batches of at most BatchSize.
func TestReadMergesOverlappingObjects(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		es := events(base, 30)
		keep(t, a, es[0:20])
		keep(t, a, es[10:30])
		keep(t, a, append(slices.Clone(es[5:15:15]), es[25]))
		var odd []store.HistoryEvent
		for i := 1; i < 30; i += 2 {
			odd = append(odd, es[i])
		}
		keep(t, a, odd)
		if got := keys(t, b, "events/"); len(got) != 4 {
			t.Fatalf("objects %v, want 4", got)
		}
		same(t, es, readAll(t, a, archive.ReadParams{BatchSize: 7}))
		same(t, es, readAll(t, a, archive.ReadParams{BatchSize: 1}))
	})
}

// After resumes exactly after an id, present or not; objects wholly at or
// before it are not opened.
func TestReadAfterResumes(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		first := events(base, 10)
		second := events(base.Add(time.Minute), 10)
		keep(t, a, first)
		keep(t, a, second)
		all := append(slices.Clone(first), second...)
		for i := range all {
			same(t, all[i+1:], readAll(t, a, archive.ReadParams{After: all[i].ID, BatchSize: 3}))
		}
		// An id between two events: resume at the next.
		between := idAt(base.Add(30*time.Second), 0)
		same(t, second, readAll(t, a, archive.ReadParams{After: between}))

		for _, k := range keys(t, b, "events/") {
			if strings.Contains(k, "/"+first[0].ID.String()) {
				spoil(t, b, k, []byte("spoiled"))
			}
		}
		same(t, second, readAll(t, a, archive.ReadParams{After: first[9].ID}))
		same(t, second[1:], readAll(t, a, archive.ReadParams{After: second[0].ID}))
	})
}

// Read opens an object only when the merge reaches its first id: fn's
// error stops it before a later, spoiled object is read.
func TestReadOpensLazily(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		keep(t, a, events(base, 10))
		later := events(base.Add(time.Minute), 10)
		keep(t, a, later)
		for _, k := range keys(t, b, "events/") {
			if strings.Contains(k, "/"+later[0].ID.String()) {
				spoil(t, b, k, []byte("spoiled"))
			}
		}
		stop := fmt.Errorf("enough")
		err := a.Read(context.Background(), archive.ReadParams{BatchSize: 10}, func([]store.HistoryEvent) error { return stop })
		if err != stop {
			t.Errorf("Read: %v, want fn's error before the spoiled object", err)
		}
	})
}

// The filter's types, aggregate and window are applied to each event.
func TestReadFilters(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		es := events(base, 12)
		for i := range es {
			if i%3 == 0 {
				es[i].EventType = "payment.succeeded"
			}
		}
		keep(t, a, es)
		pick := func(keep func(i int) bool) []store.HistoryEvent {
			var out []store.HistoryEvent
			for i := range es {
				if keep(i) {
					out = append(out, es[i])
				}
			}
			return out
		}
		same(t, pick(func(i int) bool { return i%3 != 0 }), readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{EventTypes: []string{"order.*"}}}))
		same(t, pick(func(i int) bool { return i == 4 }), readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{AggregateType: "order", AggregateID: "4"}}))
		same(t, pick(func(i int) bool { return i >= 3 && i < 7 }), readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{Since: base.Add(3 * time.Second), Until: base.Add(7 * time.Second)}}))
		same(t, nil, readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{EventTypes: []string{"refund.*"}}}))

		err := a.Read(context.Background(), archive.ReadParams{Filter: store.HistoryFilter{Since: base, Until: base}}, func([]store.HistoryEvent) error { return nil })
		if err == nil {
			t.Error("Read of an empty window: no error")
		}
	})
}

// A corrupt, truncated, replaced or foreign object, or an entry that lies,
// stops Read with an error naming the object (or entry), never a panic and
// never an event of the spoiled object.
func TestReadRefusesCorruptObjects(t *testing.T) {
	ctx := context.Background()
	spoilers := map[string]func(obj, entry []byte, other []byte) (newObj, newEntry []byte){
		"a flipped byte": func(obj, entry, _ []byte) ([]byte, []byte) {
			obj = slices.Clone(obj)
			obj[len(obj)/2] ^= 0x40
			return obj, entry
		},
		"truncated": func(obj, entry, _ []byte) ([]byte, []byte) { return obj[:len(obj)-9], entry },
		"garbage after": func(obj, entry, _ []byte) ([]byte, []byte) {
			return append(slices.Clone(obj), "\x1f\x8bjunk"...), entry
		},
		"another object": func(_, entry, other []byte) ([]byte, []byte) { return other, entry },
		"empty":          func(_, entry, _ []byte) ([]byte, []byte) { return []byte{}, entry },
		"entry not JSON": func(obj, _, _ []byte) ([]byte, []byte) { return obj, []byte("{not json") },
		"entry count": func(obj, entry, _ []byte) ([]byte, []byte) {
			return obj, bytes.Replace(entry, []byte(`"count":40`), []byte(`"count":41`), 1)
		},
		"entry elsewhere": func(obj, entry, _ []byte) ([]byte, []byte) {
			return obj, bytes.Replace(entry, []byte(`"key":"events/`), []byte(`"key":"../events/`), 1)
		},
		"entry huge": func(obj, _, _ []byte) ([]byte, []byte) {
			return obj, append([]byte(`{"key":"`), bytes.Repeat([]byte("a"), 2<<20)...)
		},
	}
	for what, spoiler := range spoilers {
		t.Run(what, func(t *testing.T) {
			forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
				good := events(base, 40)
				keep(t, a, good)
				keep(t, a, events(base.Add(time.Hour), 40))
				objects, entries := keys(t, b, "events/"), keys(t, b, "manifest/")
				obj, _ := b.ReadAll(ctx, objects[0])
				entry, _ := b.ReadAll(ctx, entries[0])
				other, _ := b.ReadAll(ctx, objects[1])
				newObj, newEntry := spoiler(obj, entry, other)
				if bytes.Equal(newEntry, entry) && bytes.Equal(newObj, obj) {
					t.Fatal("the spoiler spoiled nothing")
				}
				spoil(t, b, objects[0], newObj)
				spoil(t, b, entries[0], newEntry)
				handed := 0
				err := a.Read(ctx, archive.ReadParams{}, func(batch []store.HistoryEvent) error {
					handed += len(batch)
					return nil
				})
				if err == nil || !(strings.Contains(err.Error(), objects[0]) || strings.Contains(err.Error(), entries[0])) {
					t.Fatalf("Read: %v, want an error naming %s or %s", err, objects[0], entries[0])
				}
				if handed != 0 {
					t.Errorf("Read handed %d events before refusing", handed)
				}
				t.Log(err)
			})
		})
	}
}

// Keep keeps any event a store holds, so that one odd row (written by a
// plain-SQL producer) never stops retention: the nil id, a payload that
// is not JSON (nor UTF-8), times outside the years 0000 to 9999. Read
// hands them back: the nil id first, also to a Read after the zero id,
// the payload byte for byte, a time as the nearest within those years.
func TestKeepKeepsOddEvents(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		notJSON := event(base, 1)
		notJSON.Payload = []byte("{oops\xff\n")
		empty := event(base, 5)
		empty.Payload = nil
		future := event(base, 2)
		future.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
		late := event(base, 3)
		late.ProcessedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
		noID := event(base, 4)
		noID.ID = uuid.Nil
		keep(t, a, []store.HistoryEvent{event(base, 9), notJSON, empty, future, late, noID})

		got := readAll(t, a, archive.ReadParams{})
		byID := map[uuid.UUID]store.HistoryEvent{}
		for _, e := range got {
			byID[e.ID] = e
		}
		if len(got) != 6 || len(byID) != 6 {
			t.Fatalf("read %d events (%d ids), want 6", len(got), len(byID))
		}
		if got[0].ID != uuid.Nil || got[0].OutboxSeq != 4 {
			t.Errorf("first event read: %v, want the nil id's", got[0].ID)
		}
		if p := byID[notJSON.ID].Payload; !bytes.Equal(p, notJSON.Payload) {
			t.Errorf("payload %q, want %q", p, notJSON.Payload)
		}
		if p := byID[empty.ID].Payload; len(p) != 0 {
			t.Errorf("empty payload read as %q", p)
		}
		if c := byID[future.ID].CreatedAt; !c.Equal(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)) {
			t.Errorf("created_at of year 10000 read as %v", c)
		}
		if p := byID[late.ID].ProcessedAt; !p.Equal(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("processed_at of year -1 read as %v", p)
		}
		// The year-10000 event is in the last hour's object, found by a
		// window.
		last := readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{Since: time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC)}})
		if !slices.Equal(ids(last), []uuid.UUID{future.ID}) {
			t.Errorf("the last hour holds %v, want %v", ids(last), future.ID)
		}
		// An object holding only the nil id is read too.
		only := event(base.Add(-time.Hour), 0)
		only.ID = uuid.Nil
		only.OutboxSeq = 77
		keep(t, a, []store.HistoryEvent{only})
		early := readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{Until: base}})
		if len(early) != 1 || early[0].ID != uuid.Nil || early[0].OutboxSeq != 77 {
			t.Errorf("the object of the nil id alone: read %v", ids(early))
		}
	})
}

// An object too large to be read whole into memory is checked in a first
// pass: a flipped byte near its end is refused before any event is handed
// on.
func TestReadRefusesCorruptLargeObject(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		ctx := context.Background()
		noise := make([]byte, 5<<20)
		if _, err := rand.Read(noise); err != nil {
			t.Fatal(err)
		}
		huge, _ := json.Marshal(base64.StdEncoding.EncodeToString(noise))
		es := events(base, 3)
		es[2].Payload = huge
		keep(t, a, es)
		objects := keys(t, b, "events/")
		obj, _ := b.ReadAll(ctx, objects[0])
		if len(obj) <= 4<<20 {
			t.Fatalf("the object has %d bytes: not a large one", len(obj))
		}
		same(t, es, readAll(t, a, archive.ReadParams{BatchSize: 1}))
		obj[len(obj)-100] ^= 1
		spoil(t, b, objects[0], obj)
		handed := 0
		err := a.Read(ctx, archive.ReadParams{BatchSize: 1}, func(batch []store.HistoryEvent) error {
			handed += len(batch)
			return nil
		})
		if err == nil || !strings.Contains(err.Error(), objects[0]) || handed != 0 {
			t.Errorf("Read: %v after %d events, want an error naming %s before any", err, handed, objects[0])
		}
	})
}

// A Keep whose context is canceled fails and leaves no entry (so nothing
// Read would trust); a Read whose context is canceled fails.
func TestCanceled(t *testing.T) {
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := a.Keep(ctx, events(base, 3)); err == nil {
			t.Error("Keep with a canceled context: no error")
		}
		if got := keys(t, b, "manifest/"); len(got) != 0 {
			t.Errorf("a canceled Keep left entries %v", got)
		}
		keep(t, a, events(base, 3))
		err := a.Read(ctx, archive.ReadParams{}, func([]store.HistoryEvent) error { return nil })
		if err == nil {
			t.Error("Read with a canceled context: no error")
		}
	})
}

// Every window (bounded, half-open, none; across hours, days, months,
// years) reads exactly the events a filter of all of them lets through:
// the manifest walk misses no folder.
func TestReadWindowsAgreeWithFilter(t *testing.T) {
	times := []time.Time{
		{},
		time.Date(2025, 12, 31, 23, 30, 0, 0, time.UTC),
		time.Date(2026, 1, 1, 0, 10, 0, 0, time.UTC),
		time.Date(2026, 1, 31, 23, 59, 59, 900, time.UTC),
		time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
		base, base.Add(59 * time.Minute), base.Add(time.Hour), base.Add(26 * time.Hour),
		time.Date(9999, 12, 31, 23, 59, 58, 0, time.UTC),
	}
	var all []store.HistoryEvent
	for i, at := range times {
		all = append(all, event(at, i), event(at.Add(time.Nanosecond), 100+i))
	}
	slices.SortFunc(all, func(x, y store.HistoryEvent) int { return bytes.Compare(x.ID[:], y.ID[:]) })
	var bounds []time.Time
	for _, at := range times {
		bounds = append(bounds, at, at.Add(time.Nanosecond), at.Add(2*time.Nanosecond), at.Add(-time.Hour), at.Add(time.Hour))
	}
	forEach(t, func(t *testing.T, a *archive.Archive, b *blob.Bucket) {
		keep(t, a, all[:7])
		keep(t, a, all[7:])
		for _, since := range bounds {
			for _, until := range bounds {
				f := store.HistoryFilter{Since: since, Until: until}
				if f.Check() != nil {
					continue
				}
				var want []store.HistoryEvent
				for _, e := range all {
					if f.Match(e.EventType, e.AggregateType, e.AggregateID, e.CreatedAt) {
						want = append(want, e)
					}
				}
				got := readAll(t, a, archive.ReadParams{Filter: f})
				if !slices.Equal(ids(got), ids(want)) {
					t.Fatalf("window [%v, %v): read %d events, want %d", since, until, len(got), len(want))
				}
			}
		}
	})
}

// Keep reads nothing on its way: an object's name comes from its content,
// so writing it (and its entry) again is harmless, and cheaper than a
// round trip to ask whether it is there; Keep given the same events again
// still leaves one object and one entry.
func TestKeepReadsNothing(t *testing.T) {
	b, c := countingBucket(memblob.OpenBucket(nil))
	a := archive.New(b, "")
	defer a.Close()
	es := append(events(base, 10), events(base.Add(time.Hour), 10)...)
	keep(t, a, es)
	keep(t, a, es)
	if len(c.reads) != 0 || len(c.lists) != 0 {
		t.Errorf("Keep read %v and listed %v", c.reads, c.lists)
	}
	if got := keys(t, b, "manifest/"); len(got) != 2 {
		t.Errorf("entries %v, want 2", got)
	}
	if got := keys(t, b, "events/"); len(got) != 2 {
		t.Errorf("objects %v, want 2", got)
	}
	same(t, es, readAll(t, a, archive.ReadParams{}))
}

// A bounded window lists only the manifest of the hours it covers, not
// the whole bucket: with 48 hours archived, Read and Objects of one hour
// list that hour's folder alone, and a window of three days lists the
// folders down to its hours, never the entries of an hour outside it.
func TestReadWindowListsItsHours(t *testing.T) {
	b, c := countingBucket(memblob.OpenBucket(nil))
	a := archive.New(b, "")
	defer a.Close()
	start := time.Date(2026, 2, 28, 12, 0, 0, 0, time.UTC) // across a day and a month
	for h := range 48 {
		keep(t, a, events(start.Add(time.Duration(h)*time.Hour), 3))
	}
	hour := start.Add(20 * time.Hour)
	folder := "manifest/" + hour.Format("2006/01/02/15/")
	one := store.HistoryFilter{Since: hour.Add(-10 * time.Minute), Until: hour.Add(50 * time.Minute)}
	c.reset()
	if got := readAll(t, a, archive.ReadParams{Filter: store.HistoryFilter{Since: hour, Until: hour.Add(time.Hour)}}); len(got) != 3 {
		t.Errorf("read %d events of the hour, want 3", len(got))
	}
	if !slices.Equal(c.lists, []string{folder}) || c.listed != 1 {
		t.Errorf("Read of one hour listed %v (%d keys), want %s alone (1 key)", c.lists, c.listed, folder)
	}
	c.reset()
	n := 0
	if err := a.Objects(context.Background(), one, func(archive.Object) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if prev := "manifest/" + hour.Add(-time.Hour).Format("2006/01/02/15/"); n != 1 || !slices.Equal(c.lists, []string{prev, folder}) {
		t.Errorf("Objects of an hour's end and the next's start: %d objects, listed %v, want 1 and %s, %s", n, c.lists, prev, folder)
	}

	// A long window (more hours than it lists one by one) goes down the
	// folders: it lists the entries of its hours, no more.
	long := store.HistoryFilter{Since: start.Add(2 * time.Hour), Until: start.Add(40 * time.Hour)}
	c.reset()
	if got := readAll(t, a, archive.ReadParams{Filter: long}); len(got) != 38*3 {
		t.Errorf("read %d events of 38 hours, want %d", len(got), 38*3)
	}
	for _, p := range c.lists {
		if h, err := time.Parse("manifest/2006/01/02/15/", p); err == nil && (h.Before(long.Since) || !h.Before(long.Until)) {
			t.Errorf("the window [%v, %v) listed the hour %s", long.Since, long.Until, p)
		}
	}
	if c.listed != 38 {
		t.Errorf("the window of 38 hours listed %d entries (prefixes %v)", c.listed, c.lists)
	}
}

// An event of any size Keep keeps, Read reads: a line longer than 64 MiB
// (once Read's limit, which left such an event, its row deleted, unread).
func TestReadLongLine(t *testing.T) {
	if testing.Short() {
		t.Skip("a 65 MiB event")
	}
	b, c := countingBucket(memblob.OpenBucket(nil))
	a := archive.New(b, "")
	defer a.Close()
	es := events(base, 3)
	es[1].Payload = []byte(`{"s":"` + strings.Repeat("a", 65<<20) + `"}`)
	keep(t, a, es)
	c.reset()
	same(t, es, readAll(t, a, archive.ReadParams{}))
}

// A large object (read as a stream, not whole into memory) is downloaded
// once: Read checks it as it comes, then decodes it.
func TestReadLargeObjectOnce(t *testing.T) {
	b, c := countingBucket(memblob.OpenBucket(nil))
	a := archive.New(b, "")
	defer a.Close()
	noise := make([]byte, 5<<20)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	huge, _ := json.Marshal(base64.StdEncoding.EncodeToString(noise))
	es := events(base, 3)
	es[2].Payload = huge
	keep(t, a, es)
	objects := keys(t, b, "events/")
	size := len(must(b.ReadAll(context.Background(), objects[0])))
	if size <= 4<<20 {
		t.Fatalf("the object has %d bytes: not a large one", size)
	}
	c.reset()
	same(t, es, readAll(t, a, archive.ReadParams{BatchSize: 1}))
	var objectReads int
	for _, k := range c.reads {
		if strings.HasPrefix(k, "events/") {
			objectReads++
		}
	}
	if objectReads != 1 || c.readBytes > int64(size)+1<<20 {
		t.Errorf("Read read the object %d times (%d bytes read in all, the object has %d)", objectReads, c.readBytes, size)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
