package signature_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
)

func newVerifier(t testing.TB, scheme signature.Scheme, secrets ...string) *signature.Verifier {
	t.Helper()
	v, err := signature.NewVerifier(scheme, 0, secrets...)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return vectorTime }
	return v
}

func TestVerifyStandard(t *testing.T) {
	key := vectorKey(t)
	ts := strconv.Itoa(vectorTimestamp)
	at := func(d time.Duration) string { return strconv.FormatInt(vectorTime.Add(d).Unix(), 10) }
	signedAt := func(d time.Duration) http.Header {
		return http.Header{
			"Webhook-Id":        {vectorID},
			"Webhook-Timestamp": {at(d)},
			"Webhook-Signature": {standardEntry(key, vectorID, at(d), vectorBody)},
		}
	}
	with := func(name, value string) http.Header {
		h := signedAt(0)
		if value == "" {
			h.Del(name)
		} else {
			h.Set(name, value)
		}
		return h
	}
	rotated := strings.Repeat("r", 32)
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		want error
	}{
		{"published vector", signedAt(0), vectorBody, nil},
		{"5 minutes old", signedAt(-5 * time.Minute), vectorBody, nil},
		{"5 minutes ahead", signedAt(5 * time.Minute), vectorBody, nil},
		{"too old", signedAt(-5*time.Minute - time.Second), vectorBody, signature.ErrTimestampOutOfTolerance},
		{"too far ahead", signedAt(5*time.Minute + time.Second), vectorBody, signature.ErrTimestampOutOfTolerance},
		{"no id", with("webhook-id", ""), vectorBody, signature.ErrMissingHeaders},
		{"no timestamp", with("webhook-timestamp", ""), vectorBody, signature.ErrMissingHeaders},
		{"no signature", with("webhook-signature", ""), vectorBody, signature.ErrMissingHeaders},
		{"x-signature headers", http.Header{"X-Event-Id": {vectorID}, "X-Timestamp": {ts}, "X-Signature": {vectorSignature}}, vectorBody, signature.ErrMissingHeaders},
		{"id with dot", with("webhook-id", "msg.1"), vectorBody, signature.ErrInvalidID},
		{"timestamp not a number", with("webhook-timestamp", "yesterday"), vectorBody, signature.ErrMalformedHeader},
		{"timestamp with sign", with("webhook-timestamp", "+"+ts), vectorBody, signature.ErrMalformedHeader},
		{"timestamp with fraction", with("webhook-timestamp", ts+".0"), vectorBody, signature.ErrMalformedHeader},
		{"timestamp in milliseconds", with("webhook-timestamp", ts+"000"), vectorBody, signature.ErrTimestampOutOfTolerance},
		{"timestamp overflows", with("webhook-timestamp", "99999999999999999999"), vectorBody, signature.ErrMalformedHeader},
		{"largest timestamp", with("webhook-timestamp", "9223372036854775807"), vectorBody, signature.ErrTimestampOutOfTolerance},
		{"signature not base64", with("webhook-signature", "v1,!!!"), vectorBody, signature.ErrMalformedHeader},
		{"signature too short", with("webhook-signature", "v1,AAAA"), vectorBody, signature.ErrMalformedHeader},
		{"other version only", with("webhook-signature", "v1a,"+strings.TrimPrefix(vectorSignature, "v1,")), vectorBody, signature.ErrMalformedHeader},
		{"non-canonical base64", with("webhook-signature", strings.Replace(vectorSignature, "OE=", "OF=", 1)), vectorBody, signature.ErrMalformedHeader},
		{"body changed", signedAt(0), `{"test": 2432232315}`, signature.ErrNoMatchingSignature},
		{"body re-encoded", signedAt(0), `{"test":2432232314}`, signature.ErrNoMatchingSignature},
		{"id changed", with("webhook-id", "msg_other"), vectorBody, signature.ErrNoMatchingSignature},
		{"timestamp changed", with("webhook-timestamp", at(time.Second)), vectorBody, signature.ErrNoMatchingSignature},
		{"unknown secret", with("webhook-signature", standardEntry([]byte(rotated), vectorID, ts, vectorBody)), vectorBody, signature.ErrNoMatchingSignature},
		{"any entry matches", with("webhook-signature", "v1a,xyz v1,"+strings.Repeat("A", 43)+"= "+vectorSignature), vectorBody, nil},
		{"entries in several header lines", http.Header{
			"Webhook-Id":        {vectorID},
			"Webhook-Timestamp": {ts},
			"Webhook-Signature": {"v1," + strings.Repeat("A", 43) + "=", vectorSignature},
		}, vectorBody, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, got, err := newVerifier(t, signature.Standard, vectorSecret).Verify(tc.h, []byte(tc.body))
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				if id != "" || !got.IsZero() {
					t.Fatalf("failed verify returned id %q, time %v", id, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if id != vectorID || got.Unix() != mustAtoi(t, tc.h.Get("webhook-timestamp")) {
				t.Fatalf("got id %q time %v", id, got)
			}
		})
	}
}

func TestVerifyXSignature(t *testing.T) {
	ts := strconv.Itoa(vectorTimestamp)
	sig := xEntry(xSecret, ts, vectorBody)
	signed := func(sig string) http.Header {
		return http.Header{"X-Event-Id": {"evt-1"}, "X-Timestamp": {ts}, "X-Signature": {sig}}
	}
	for _, tc := range []struct {
		name string
		h    http.Header
		body string
		want error
	}{
		{"valid", signed(sig), vectorBody, nil},
		{"upper-case hex", signed("sha256=" + strings.ToUpper(strings.TrimPrefix(sig, "sha256="))), vectorBody, nil},
		{"comma-separated", signed("sha256=" + strings.Repeat("0", 64) + "," + sig), vectorBody, nil},
		{"comma and space", signed(xEntry(xSecretOld, ts, vectorBody) + ", " + sig), vectorBody, nil},
		{"not hex", signed("sha256=" + strings.Repeat("z", 64)), vectorBody, signature.ErrMalformedHeader},
		{"wrong algorithm", signed("sha1=" + strings.TrimPrefix(sig, "sha256=")), vectorBody, signature.ErrMalformedHeader},
		{"standard form", signed(vectorSignature), vectorBody, signature.ErrMalformedHeader},
		{"body changed", signed(sig), vectorBody + " ", signature.ErrNoMatchingSignature},
		{"too old", http.Header{"X-Event-Id": {"evt-1"}, "X-Timestamp": {"1614264000"}, "X-Signature": {xEntry(xSecret, "1614264000", vectorBody)}}, vectorBody, signature.ErrTimestampOutOfTolerance},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, _, err := newVerifier(t, signature.XSignature, xSecret).Verify(tc.h, []byte(tc.body))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == nil && id != "evt-1" {
				t.Fatalf("id %q", id)
			}
		})
	}
}

// The article's defect, kept visible: XSignature verifies a request whose id
// was swapped, which is why SignsID reports false.
func TestVerifyXSignatureDoesNotCoverID(t *testing.T) {
	ts := strconv.Itoa(vectorTimestamp)
	h := http.Header{"X-Event-Id": {"replayed-under-new-id"}, "X-Timestamp": {ts}, "X-Signature": {xEntry(xSecret, ts, vectorBody)}}
	id, _, err := newVerifier(t, signature.XSignature, xSecret).Verify(h, []byte(vectorBody))
	if err != nil || id != "replayed-under-new-id" {
		t.Fatalf("got %q, %v", id, err)
	}
}

func TestVerifyAcceptsAnySecretDuringRotation(t *testing.T) {
	newSecret := "whsec_" + strings.Repeat("QUJD", 8)
	v := newVerifier(t, signature.Standard, vectorSecret, newSecret)
	for _, secrets := range [][]string{{vectorSecret}, {newSecret}, {newSecret, vectorSecret}} {
		s, err := signature.NewSigner(signature.Standard, secrets...)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := v.Verify(h, []byte(vectorBody)); err != nil {
			t.Errorf("signed with %d secrets: %v", len(secrets), err)
		}
	}
}

func TestVerifyUsesWallClockByDefault(t *testing.T) {
	s, err := signature.NewSigner(signature.Standard, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := signature.NewVerifier(signature.Standard, time.Minute, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	fresh, stale := http.Header{}, http.Header{}
	if err := s.Sign(fresh, vectorID, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(stale, vectorID, time.Now().Add(-2*time.Minute), nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Verify(fresh, nil); err != nil {
		t.Errorf("fresh: %v", err)
	}
	if _, _, err := v.Verify(stale, nil); !errors.Is(err, signature.ErrTimestampOutOfTolerance) {
		t.Errorf("2 minutes old with 1 minute tolerance: got %v", err)
	}
}

func TestVerifyMissingHeadersAreNamed(t *testing.T) {
	_, _, err := newVerifier(t, signature.Standard, vectorSecret).Verify(http.Header{"Webhook-Id": {vectorID}}, nil)
	if err == nil || !strings.Contains(err.Error(), "Webhook-Timestamp, Webhook-Signature") {
		t.Fatalf("got %v", err)
	}
}

func mustAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
