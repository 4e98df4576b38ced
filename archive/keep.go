package archive

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"gocloud.dev/blob"

	"github.com/postbox-go/postbox/store"
)

const (
	// callTimeout bounds one small bucket call: an entry read or written,
	// a page of a listing.
	callTimeout = time.Minute
	// objectTimeout bounds writing an object, and reading one whole.
	objectTimeout = 10 * time.Minute
)

// Keep writes events to the archive: the relay's Config.Archive and
// store.ExpireParams.Keep. Its events are sorted by id (an id given twice
// is kept once) and written as one object for each hour (UTC) in which
// they were written (CreatedAt), each object followed by its manifest
// entry. It returns nil only once every object and its entry are
// complete; an error leaves objects complete or absent, never partial.
// Keep given the same events again (a crash before the rows were
// removed) writes the same objects again, byte for byte. No events: nothing to do.
//
// Keep keeps any event a store holds, so that one odd row never stops
// retention: the nil id (Read hands it first), a payload that is not JSON
// (kept base64 and handed back as it was), a time outside the years 0000
// to 9999, which an object's RFC 3339 times cannot hold (kept as the
// nearest time within them, which Read hands on, the original beside it
// in the object). Strings that are not UTF-8 are kept with U+FFFD in
// place of their invalid bytes, as in any JSON.
func (a *Archive) Keep(ctx context.Context, events []store.HistoryEvent) error {
	if len(events) == 0 {
		return nil
	}
	sorted := make([]*store.HistoryEvent, len(events))
	for i := range events {
		sorted[i] = &events[i]
	}
	slices.SortStableFunc(sorted, func(x, y *store.HistoryEvent) int {
		return cmp.Or(hourOf(x.CreatedAt).Compare(hourOf(y.CreatedAt)), bytes.Compare(x.ID[:], y.ID[:]))
	})
	sorted = slices.CompactFunc(sorted, func(x, y *store.HistoryEvent) bool { return x.ID == y.ID })
	// Every object is encoded before any is written: an event Keep
	// refuses leaves nothing written.
	var objects []encoded
	for len(sorted) > 0 {
		hour := hourOf(sorted[0].CreatedAt)
		n := 1
		for n < len(sorted) && hourOf(sorted[n].CreatedAt).Equal(hour) {
			n++
		}
		o, err := encode(hour, sorted[:n])
		if err != nil {
			return err
		}
		objects = append(objects, o)
		sorted = sorted[n:]
	}
	for _, o := range objects {
		if err := a.write(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// encoded is an object ready to be written, and its entry.
type encoded struct {
	name  name
	data  []byte
	entry Object
}

// encode makes the object of one hour's events, sorted by id.
func encode(hour time.Time, events []*store.HistoryEvent) (encoded, error) {
	var obj bytes.Buffer
	gz := gzip.NewWriter(&obj)
	ndjson := sha256.New()
	enc := json.NewEncoder(io.MultiWriter(gz, ndjson))
	enc.SetEscapeHTML(false)
	entry := Object{
		Count:        len(events),
		MinID:        events[0].ID,
		MaxID:        events[len(events)-1].ID,
		MinCreatedAt: keptTime(events[0].CreatedAt),
		MaxCreatedAt: keptTime(events[0].CreatedAt),
	}
	types := map[string]bool{}
	for _, e := range events {
		if err := encodeLine(enc, e); err != nil {
			return encoded{}, fmt.Errorf("archive: keep: %w", err)
		}
		entry.MinCreatedAt = minTime(entry.MinCreatedAt, keptTime(e.CreatedAt))
		entry.MaxCreatedAt = maxTime(entry.MaxCreatedAt, keptTime(e.CreatedAt))
		types[e.EventType] = true
	}
	if err := gz.Close(); err != nil {
		return encoded{}, fmt.Errorf("archive: keep: %w", err)
	}
	n := name{hour: hour, minID: entry.MinID, maxID: entry.MaxID, sum: hex.EncodeToString(ndjson.Sum(nil))[:sumLen]}
	entry.Key = n.objectKey()
	entry.Bytes = int64(obj.Len())
	sum := sha256.Sum256(obj.Bytes())
	entry.SHA256 = hex.EncodeToString(sum[:])
	entry.EventTypes = entryTypes(types)
	return encoded{name: n, data: obj.Bytes(), entry: entry}, nil
}

// write writes an object, then its entry. It does not ask first whether
// they are there (a round trip for each object, on every Keep): an
// object's name comes from its events, so writing it again writes the
// same events, in the same bytes (gzip as this program writes it), and
// mends an object spoiled since. The entry follows the object, so that an
// entry is never there without its complete object.
func (a *Archive) write(ctx context.Context, o encoded) error {
	entry, entryKey := o.entry, o.name.entryKey()
	if err := a.writeObject(ctx, entry.Key, o.data); err != nil {
		return err
	}
	doc, err := json.Marshal(entry)
	if err != nil {
		return fmt.Errorf("archive: keep: entry %s: %w", entryKey, err)
	}
	wctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if err := a.bucket.WriteAll(wctx, entryKey, append(doc, '\n'), &blob.WriterOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("archive: keep: write entry %s: %w", entryKey, err)
	}
	return nil
}

// writeObject writes an object whole, or nothing: the bucket discards a
// write whose context was canceled before Close.
func (a *Archive) writeObject(ctx context.Context, key string, data []byte) error {
	wctx, cancel := context.WithTimeout(ctx, objectTimeout)
	defer cancel()
	sum := md5.Sum(data)
	w, err := a.bucket.NewWriter(wctx, key, &blob.WriterOptions{ContentType: "application/gzip", ContentMD5: sum[:]})
	if err != nil {
		return fmt.Errorf("archive: keep: write %s: %w", key, err)
	}
	if _, err := w.Write(data); err != nil {
		cancel()
		_ = w.Close()
		return fmt.Errorf("archive: keep: write %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("archive: keep: write %s: %w", key, err)
	}
	return nil
}

// entryTypes is what an entry lists of an object's event types: all of
// them, sorted, or none (unknown) when they are many or long.
func entryTypes(types map[string]bool) []string {
	if len(types) > maxEntryTypes {
		return nil
	}
	size := 0
	for t := range types {
		size += len(t)
	}
	if size > maxEntryTypeBytes {
		return nil
	}
	list := make([]string, 0, len(types))
	for t := range types {
		list = append(list, t)
	}
	slices.Sort(list)
	return list
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
