package sinktest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink"
)

// followers is how many events the cases below publish after the one that
// fails: each must be delivered.
const followers = 20

// An event over the sink's size limit fails at once, permanently, with an
// error giving its size; it is never delivered, and the events after it
// are.
func testOversizeFailsAlone(t *testing.T, d Destination, _ Features) {
	if d.MaxPayload == 0 {
		t.Skip("the destination declares no MaxPayload")
	}
	big := newMessage("agg-big", 0)
	big.Payload = []byte(`"` + strings.Repeat("x", d.MaxPayload-1) + `"`)
	err := d.Sink.Publish(t.Context(), big)
	if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
		t.Fatalf("Publish of %d bytes over a limit of %d: %v (%v), want a permanent failure", len(big.Payload), d.MaxPayload, err, kind)
	}
	if size := strconv.Itoa(len(big.Payload)); !strings.Contains(err.Error(), size) {
		t.Errorf("error %q does not give the event's size, %s bytes", err, size)
	}
	publishFollowers(t, d, big.ID)
}

// Headers a hostile producer may write: each event carrying one is
// delivered or fails alone, permanently, and never disturbs the events
// after it (a broken connection, an outage).
func testHostileHeadersFailAlone(t *testing.T, d Destination, _ Features) {
	hostile := []Header{
		{"", "empty name"},
		{"with space", "v"},
		{"with:colon", "v"},
		{"with\r\nnewline", "v"},
		{"with\x00nul", "v"},
		{"X-Newline", "v\r\nX-Forged: 1"},
		{"X-Nul", "v\x00w"},
		{"X-Bad-Utf8-\xff", "v"},
		{"X-Bad-Utf8", "v\xff\xfe"},
		{strings.Repeat("n", 300), "a name over 255 bytes"},
		{"X-Big", strings.Repeat("v", 200<<10)},
		{"Authorization", "Bearer forged"},
		{"CC", "elsewhere"},
	}
	var delivered []uuid.UUID
	for i, h := range hostile {
		m := newMessage("agg-hostile", i)
		m.Headers[h.Name] = h.Value
		err := d.Sink.Publish(t.Context(), m)
		if kind, _, _ := sink.Classify(err); err != nil && kind != sink.Permanent {
			t.Errorf("header %.40q: %v (%v), want delivered or a permanent failure", h.Name, err, kind)
		}
		if err == nil {
			delivered = append(delivered, m.ID)
		}
		next := newMessage("agg-next", i)
		if err := d.Sink.Publish(t.Context(), next); err != nil {
			t.Fatalf("the event after header %.40q: %v", h.Name, err)
		}
		delivered = append(delivered, next.ID)
	}
	waitFor(t, d, "every event published", func(ds []Delivery) bool {
		got := byID(ds)
		for _, id := range delivered {
			if len(got[id]) == 0 {
				return false
			}
		}
		return true
	})
}

// Each header the sink declares refused fails its event alone,
// permanently, naming the header; the events after it are delivered.
func testRefusedHeadersFailAlone(t *testing.T, d Destination, refused []Header) {
	if len(refused) == 0 {
		t.Skip("the sink declares no refused header")
	}
	var failed []uuid.UUID
	for i, h := range refused {
		m := newMessage("agg-refused", i)
		m.Headers[h.Name] = h.Value
		err := d.Sink.Publish(t.Context(), m)
		if kind, _, _ := sink.Classify(err); err == nil || kind != sink.Permanent {
			t.Fatalf("header %.40q: %v (%v), want a permanent failure", h.Name, err, kind)
		}
		if !namesHeader(err.Error(), h.Name) {
			t.Errorf("error %q does not name header %.40q", err, h.Name)
		}
		failed = append(failed, m.ID)
	}
	publishFollowers(t, d, failed...)
}

// publishFollowers publishes followers events, each of which must be
// delivered, and checks that none of the failed ids was.
func publishFollowers(t *testing.T, d Destination, failed ...uuid.UUID) {
	t.Helper()
	ids := make([]uuid.UUID, followers)
	for i := range ids {
		m := newMessage("agg-after", i)
		if err := d.Sink.Publish(t.Context(), m); err != nil {
			t.Fatalf("publish %d after the failed event: %v", i, err)
		}
		ids[i] = m.ID
	}
	got := byID(waitFor(t, d, "the events after the failed one", func(ds []Delivery) bool {
		got := byID(ds)
		for _, id := range ids {
			if len(got[id]) == 0 {
				return false
			}
		}
		return true
	}))
	for _, id := range failed {
		if len(got[id]) != 0 {
			t.Errorf("the failed event %v was delivered", id)
		}
	}
}

// namesHeader reports whether msg names the header: the first 32 bytes of
// its name, as they are or quoted, in any case.
func namesHeader(msg, name string) bool {
	name = name[:min(len(name), 32)]
	quoted := strconv.Quote(name)
	msg, name, quoted = strings.ToLower(msg), strings.ToLower(name), strings.ToLower(quoted[1:len(quoted)-1])
	return strings.Contains(msg, name) || strings.Contains(msg, quoted)
}
