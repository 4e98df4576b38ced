package archive

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// Object is an archived object's manifest entry: what the object holds,
// and what Read checks it against.
type Object struct {
	// Key is the object's key in the archive (under its prefix).
	Key string `json:"key"`
	// Count is how many events it holds, Bytes its size (compressed),
	// SHA256 the hex SHA-256 of its bytes.
	Count  int    `json:"count"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
	// MinID and MaxID are its first and last event ids.
	MinID uuid.UUID `json:"min_id"`
	MaxID uuid.UUID `json:"max_id"`
	// MinCreatedAt and MaxCreatedAt bound when its events were written.
	MinCreatedAt time.Time `json:"min_created_at"`
	MaxCreatedAt time.Time `json:"max_created_at"`
	// EventTypes are its events' types, sorted, when there are at most
	// maxEntryTypes of them (empty otherwise: unknown).
	EventTypes []string `json:"event_types,omitempty"`
}

const (
	// eventsDir and manifestDir hold the objects and their entries.
	eventsDir   = "events/"
	manifestDir = "manifest/"
	objectExt   = ".ndjson.gz"
	entryExt    = ".json"
	// hourLayout is an hour's folder under eventsDir and manifestDir.
	hourLayout = "2006/01/02/15/"
	// sumLen is how many hex digits of the SHA-256 of an object's NDJSON
	// name it.
	sumLen = 16
	// maxEntryTypes and maxEntryTypeBytes bound the event types an entry
	// lists.
	maxEntryTypes     = 64
	maxEntryTypeBytes = 4096
	// maxEntryBytes bounds an entry Read accepts.
	maxEntryBytes = 1 << 20
)

// name is what an object's key says: the hour its events were written
// in, its first and last ids, and the start of its NDJSON's SHA-256.
type name struct {
	hour  time.Time
	minID uuid.UUID
	maxID uuid.UUID
	sum   string
}

func (n name) base() string {
	return n.minID.String() + "_" + n.maxID.String() + "_" + n.sum
}

// objectKey and entryKey are where the object and its entry are.
func (n name) objectKey() string {
	return eventsDir + n.hour.Format(hourLayout) + n.base() + objectExt
}

func (n name) entryKey() string {
	return manifestDir + n.hour.Format(hourLayout) + n.base() + entryExt
}

// parseEntryKey reads a manifest entry's key; ok is false for a key that
// is no entry (something else stored under manifest/).
func parseEntryKey(key string) (n name, ok bool) {
	rest, ok := strings.CutPrefix(key, manifestDir)
	if !ok || len(rest) < len(hourLayout) {
		return n, false
	}
	hour, err := time.Parse(hourLayout, rest[:len(hourLayout)])
	if err != nil || hour.Format(hourLayout) != rest[:len(hourLayout)] {
		return n, false
	}
	base, ok := strings.CutSuffix(rest[len(hourLayout):], entryExt)
	if !ok || len(base) != 36+1+36+1+sumLen || base[36] != '_' || base[73] != '_' {
		return n, false
	}
	minID, err1 := uuid.Parse(base[:36])
	maxID, err2 := uuid.Parse(base[37:73])
	sum := base[74:]
	if err1 != nil || err2 != nil || !isHex(sum) || bytes.Compare(minID[:], maxID[:]) > 0 {
		return n, false
	}
	n = name{hour: hour, minID: minID, maxID: maxID, sum: sum}
	if n.entryKey() != key {
		// Upper-case or braced uuids: not a name Keep writes.
		return n, false
	}
	return n, true
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// line is an event as an object's line holds it.
type line struct {
	ID            uuid.UUID         `json:"id"`
	Seq           int64             `json:"seq"`
	AggregateType string            `json:"aggregate_type"`
	AggregateID   string            `json:"aggregate_id"`
	EventType     string            `json:"event_type"`
	Payload       json.RawMessage   `json:"payload"`
	Headers       map[string]string `json:"headers"`
	DedupKey      string            `json:"dedup_key"`
	CreatedAt     string            `json:"created_at"`
	ProcessedAt   string            `json:"processed_at"`
	// PayloadBase64 holds, base64, a payload that is not JSON (a store
	// that does not check it let a producer write it); Payload is null
	// then.
	PayloadBase64 *string `json:"payload_base64,omitempty"`
	// CreatedAtOriginal and ProcessedAtOriginal hold, as Unix seconds and
	// nanoseconds ("-62198755200.5"), a time outside the years 0000 to
	// 9999 that RFC 3339 cannot write: CreatedAt and ProcessedAt hold the
	// nearest time within them, which Read hands on.
	CreatedAtOriginal   string `json:"created_at_original,omitempty"`
	ProcessedAtOriginal string `json:"processed_at_original,omitempty"`
}

// minTimeKept and maxTimeKept bound the times a line holds as they are:
// RFC 3339's years 0000 to 9999.
var (
	minTimeKept = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTimeKept = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
)

// clampTime is t within the years 0000 to 9999 (UTC), and t as Unix
// seconds and nanoseconds when it was not.
func clampTime(t time.Time) (kept time.Time, original string) {
	t = t.UTC()
	switch {
	case t.Before(minTimeKept):
		kept = minTimeKept
	case t.After(maxTimeKept):
		kept = maxTimeKept
	default:
		return t, ""
	}
	return kept, fmt.Sprintf("%d.%09d", t.Unix(), t.Nanosecond())
}

// formatTime is t as a line holds it: RFC 3339 with nanoseconds, UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// encodeLine writes e as one line of NDJSON. It keeps any event a store
// holds: the nil id, a payload that is not JSON (base64, in
// payload_base64), a time outside the years 0000 to 9999 (the nearest
// within them, the original in created_at_original or
// processed_at_original).
func encodeLine(enc *json.Encoder, e *store.HistoryEvent) error {
	created, createdOriginal := clampTime(e.CreatedAt)
	processed, processedOriginal := clampTime(e.ProcessedAt)
	l := line{
		ID: e.ID, Seq: e.OutboxSeq, AggregateType: e.AggregateType, AggregateID: e.AggregateID,
		EventType: e.EventType, Payload: e.Payload, Headers: e.Headers, DedupKey: e.DedupKey,
		CreatedAt: formatTime(created), ProcessedAt: formatTime(processed),
		CreatedAtOriginal: createdOriginal, ProcessedAtOriginal: processedOriginal,
	}
	if !json.Valid(e.Payload) {
		b64 := base64.StdEncoding.EncodeToString(e.Payload)
		l.Payload, l.PayloadBase64 = json.RawMessage("null"), &b64
	}
	// The encoder compacts the payload (a line holds no newline) and, with
	// HTML escaping off, keeps its strings as they were.
	if err := enc.Encode(l); err != nil {
		return fmt.Errorf("event %s: %w", e.ID, err)
	}
	return nil
}

// decoder reads an object's events, refusing what Keep would not have
// written: a line that is not one event (id, JSON payload, RFC 3339
// times), ids out of order, more lines than want. It bounds no line: Keep
// writes an event of any size, and Read decodes only an object checked
// against its entry (size and SHA-256), which Keep wrote.
type decoder struct {
	gz   *gzip.Reader
	r    *bufio.Reader
	n    int // lines read
	want int // lines expected; -1: any
	last uuid.UUID
}

// newDecoder reads the gzip stream r holding want events (-1: any number).
func newDecoder(r io.Reader, want int) (*decoder, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("not gzip: %w", err)
	}
	return &decoder{gz: gz, r: bufio.NewReaderSize(gz, 64<<10), want: want}, nil
}

// next returns the next event, or io.EOF after the last one (then the
// gzip stream is complete and its checksum checked).
func (d *decoder) next() (store.HistoryEvent, error) {
	raw, err := d.readLine()
	if err == io.EOF {
		if d.want >= 0 && d.n != d.want {
			return store.HistoryEvent{}, fmt.Errorf("%d events where its entry says %d", d.n, d.want)
		}
		return store.HistoryEvent{}, io.EOF
	}
	if err != nil {
		return store.HistoryEvent{}, err
	}
	d.n++
	if d.want >= 0 && d.n > d.want {
		return store.HistoryEvent{}, fmt.Errorf("more events than the %d its entry says", d.want)
	}
	e, err := decodeLine(raw)
	if err != nil {
		return store.HistoryEvent{}, fmt.Errorf("line %d: %w", d.n, err)
	}
	if d.n > 1 && bytes.Compare(e.ID[:], d.last[:]) <= 0 {
		return store.HistoryEvent{}, fmt.Errorf("line %d: id %s does not follow %s", d.n, e.ID, d.last)
	}
	d.last = e.ID
	return e, nil
}

// readLine returns the next line without its newline, io.EOF at the end.
func (d *decoder) readLine() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := d.r.ReadSlice('\n')
		switch {
		case err == nil:
			if buf == nil {
				return chunk[:len(chunk)-1], nil
			}
			buf = append(buf, chunk...)
			return buf[:len(buf)-1], nil
		case err == bufio.ErrBufferFull:
			buf = append(buf, chunk...)
		case err == io.EOF:
			if len(buf)+len(chunk) > 0 {
				return nil, fmt.Errorf("line %d does not end (truncated object)", d.n+1)
			}
			return nil, io.EOF
		default:
			return nil, fmt.Errorf("line %d: %w", d.n+1, err)
		}
	}
}

// decodeLine is one line's event.
func decodeLine(raw []byte) (store.HistoryEvent, error) {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return store.HistoryEvent{}, fmt.Errorf("not an event: %w", err)
	}
	if len(l.Payload) == 0 {
		return store.HistoryEvent{}, fmt.Errorf("event %s: no payload", l.ID)
	}
	payload := []byte(l.Payload)
	if l.PayloadBase64 != nil {
		if string(l.Payload) != "null" {
			return store.HistoryEvent{}, fmt.Errorf("event %s: a payload and a payload_base64", l.ID)
		}
		var err error
		if payload, err = base64.StdEncoding.DecodeString(*l.PayloadBase64); err != nil {
			return store.HistoryEvent{}, fmt.Errorf("event %s: payload_base64: %w", l.ID, err)
		}
	}
	created, err := time.Parse(time.RFC3339Nano, l.CreatedAt)
	if err != nil {
		return store.HistoryEvent{}, fmt.Errorf("event %s: created_at %q: not an RFC 3339 time", l.ID, truncate(l.CreatedAt))
	}
	processed, err := time.Parse(time.RFC3339Nano, l.ProcessedAt)
	if err != nil {
		return store.HistoryEvent{}, fmt.Errorf("event %s: processed_at %q: not an RFC 3339 time", l.ID, truncate(l.ProcessedAt))
	}
	return store.HistoryEvent{
		Event: postbox.Event{
			ID: l.ID, AggregateType: l.AggregateType, AggregateID: l.AggregateID,
			EventType: l.EventType, Payload: payload, DedupKey: l.DedupKey, Headers: l.Headers,
		},
		OutboxSeq:   l.Seq,
		CreatedAt:   keptTime(created),
		ProcessedAt: keptTime(processed),
	}, nil
}

// truncate shortens a hostile value quoted in an error.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// hourOf is the hour (UTC) whose folder holds an event written at t
// (the last or first of the years 0000 to 9999 for a t outside them).
func hourOf(t time.Time) time.Time { return keptTime(t).Truncate(time.Hour) }

// keptTime is t as Read hands it on: UTC, within the years 0000 to 9999.
func keptTime(t time.Time) time.Time {
	kept, _ := clampTime(t)
	return kept
}
