package inbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/inbox"
	"github.com/postbox-go/postbox/postboxtest/testlog"
	"github.com/postbox-go/postbox/signature"
)

// FuzzHandler feeds the handler arbitrary deliveries, signed or not, their
// metadata headers (event type, sequence) changed after signing or their
// metadata signature removed (tamper: 1–4 sets the covered header of that
// number to forged, 5 removes the metadata signature), and checks that
// only a verified, well-formed one reaches Process, intact, with the
// metadata that was signed.
func FuzzHandler(f *testing.F) {
	id := "0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e"
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, false, "", "order.created", uint8(0), "")
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, true, "3", "", uint8(0), "")
	f.Add([]byte(`{"event_id":"`+id+`"}`), "0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6f", int64(0), true, true, "", "", uint8(0), "")
	f.Add([]byte(`{"event_id":`), id, int64(0), true, false, "", "", uint8(0), "")
	f.Add([]byte(`[]`), id, int64(-600), true, true, "-1", "", uint8(0), "")
	f.Add([]byte(`"x"`), "msg_1", int64(0), false, false, "9223372036854775808", "\x00", uint8(0), "")
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, false, "1", "order.created", uint8(1), "order.ignored")
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, true, "1", "order.created", uint8(3), "43")
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, false, "1", "order.created", uint8(4), "9223372036854775807")
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, false, "", "order.created", uint8(4), " ")
	f.Add([]byte(`{"event_id":"`+id+`"}`), id, int64(0), true, true, "2", "order.created", uint8(5), "")

	handlers := map[signature.Scheme]http.Handler{}
	signers := map[signature.Scheme]*signature.Signer{}
	var got *inbox.Event
	for scheme, secret := range map[signature.Scheme]string{signature.Standard: standardSecret, signature.XSignature: xSecret} {
		h, err := inbox.NewHandler(inbox.HandlerConfig{
			Scheme:       scheme,
			Secrets:      []string{secret},
			MaxBodyBytes: 4096,
			Logger:       testlog.Discard(),
			Process: func(_ context.Context, ev *inbox.Event) (inbox.Outcome, error) {
				got = ev
				return inbox.Processed, nil
			},
		})
		if err != nil {
			f.Fatal(err)
		}
		handlers[scheme] = h
		if signers[scheme], err = signature.NewSigner(scheme, secret); err != nil {
			f.Fatal(err)
		}
	}

	covered := [...]string{inbox.HeaderEventType, inbox.HeaderAggregateType, inbox.HeaderAggregateID, inbox.HeaderSequence}
	f.Fuzz(func(t *testing.T, body []byte, id string, skew int64, sign, xsig bool, seq, eventType string, tamper uint8, forged string) {
		scheme := signature.Standard
		if xsig {
			scheme = signature.XSignature
		}
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set(inbox.HeaderSequence, seq)
		req.Header.Set(inbox.HeaderEventType, eventType)
		req.Header.Set(inbox.HeaderAggregateID, "42")
		signed := signature.Metadata{EventType: trim(eventType), AggregateID: "42", Sequence: trim(seq)}
		ts := time.Now().Add(time.Duration(skew%1_000_000) * time.Second)
		if sign && signers[scheme].Sign(req.Header, id, ts, body) != nil {
			sign = false
		}
		stripped := false
		switch n := int(tamper); {
		case n >= 1 && n <= len(covered):
			req.Header.Set(covered[n-1], forged)
		case n == len(covered)+1:
			req.Header.Del(inbox.HeaderMetadataSignature)
			stripped = true
		}
		if !sign {
			req.Header.Set("Webhook-Id", id)
			req.Header.Set("Webhook-Timestamp", "1")
			req.Header.Set("Webhook-Signature", "v1,AAAA")
			req.Header.Set("X-Event-Id", id)
			req.Header.Set("X-Timestamp", "1")
			req.Header.Set("X-Signature", "sha256=00")
		}
		got = nil
		rec := httptest.NewRecorder()
		handlers[scheme].ServeHTTP(rec, req)

		allowed := []int{http.StatusOK, http.StatusBadRequest, http.StatusUnauthorized, http.StatusRequestEntityTooLarge}
		if !slices.Contains(allowed, rec.Code) {
			t.Fatalf("answered %d", rec.Code)
		}
		if !sign && rec.Code != http.StatusUnauthorized && rec.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("unsigned request answered %d", rec.Code)
		}
		if stripped && rec.Code == http.StatusOK {
			t.Fatalf("delivery without its metadata signature answered %d", rec.Code)
		}
		if (got != nil) != (rec.Code == http.StatusOK) {
			t.Fatalf("answered %d, Process called: %v", rec.Code, got != nil)
		}
		if got == nil {
			return
		}
		if !sign || !json.Valid(got.Payload) || !bytes.Equal(got.Payload, body) || got.ID == uuid.Nil || got.Seq < 0 {
			t.Fatalf("Process got %+v from a delivery of %q (signed: %v)", got, body, sign)
		}
		wantSeq, _ := strconv.ParseInt(signed.Sequence, 10, 64) // 0 for none
		if got.EventType != signed.EventType || got.AggregateType != signed.AggregateType || got.AggregateID != signed.AggregateID || got.Seq != wantSeq {
			t.Fatalf("Process got metadata %q %q %q %d, signed %+v", got.EventType, got.AggregateType, got.AggregateID, got.Seq, signed)
		}
		if want, err := uuid.Parse(id); err != nil || want != got.ID {
			t.Fatalf("Process got id %s from id header %q", got.ID, id)
		}
		if xsig {
			var signed struct {
				EventID string `json:"event_id"`
			}
			if err := json.Unmarshal(body, &signed); err != nil || uuid.MustParse(signed.EventID) != got.ID {
				t.Fatalf("x-signature event %s processed with body %q", got.ID, body)
			}
		}
	})
}

// trim is a header value as an HTTP server reads it.
func trim(s string) string { return strings.Trim(s, " \t") }
