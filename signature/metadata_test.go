package signature_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/signature"
)

// metadataContent is the documented signed content of the metadata, built
// here the long way so the tests do not trust the package's code.
func metadataContent(id, eventType, aggregateType, aggregateID, sequence string) string {
	return "postbox-metadata-v1\n" + id + "\n" + eventType + "\n" + aggregateType + "\n" + aggregateID + "\n" + sequence
}

// orderHeader is the metadata of an order event, as a sender sets it
// before signing.
func orderHeader() http.Header {
	return http.Header{
		signature.HeaderEventType:     {"order.created"},
		signature.HeaderAggregateType: {"order"},
		signature.HeaderAggregateID:   {"42"},
		signature.HeaderSequence:      {"7"},
	}
}

// signHeader signs body with secret in scheme over h's metadata.
func signHeader(t *testing.T, scheme signature.Scheme, secret string, h http.Header, id string) http.Header {
	t.Helper()
	s, err := signature.NewSigner(scheme, secret)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Sign(h, id, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	return h
}

// The metadata signature is the scheme's signature of the documented
// content in place of the body: an independent implementation of either
// scheme verifies it by hashing that content.
func TestSignMetadataIsTheSchemesSignatureOfItsContent(t *testing.T) {
	content := metadataContent(vectorID, "order.created", "order", "42", "7")
	t.Run("standard v1", func(t *testing.T) {
		h := signHeader(t, signature.Standard, vectorSecret, orderHeader(), vectorID)
		if got, want := h.Get(signature.HeaderMetadataSignature), standardEntry(vectorKey(t), vectorID, "1614265330", content); got != want {
			t.Fatalf("metadata signature %q, want %q", got, want)
		}
		if got := h.Get("Webhook-Signature"); got != vectorSignature {
			t.Fatalf("body signature %q changed, want the published vector's %q", got, vectorSignature)
		}
	})
	t.Run("x-signature", func(t *testing.T) {
		h := signHeader(t, signature.XSignature, xSecret, orderHeader(), "evt-1")
		content := metadataContent("evt-1", "order.created", "order", "42", "7")
		if got, want := h.Get(signature.HeaderMetadataSignature), xEntry(xSecret, "1614265330", content); got != want {
			t.Fatalf("metadata signature %q, want %q", got, want)
		}
		if got, want := h.Get("X-Signature"), xEntry(xSecret, "1614265330", vectorBody); got != want {
			t.Fatalf("body signature %q, want %q", got, want)
		}
	})
	t.Run("standard v1a", func(t *testing.T) {
		h := signHeader(t, signature.Standard, svixSecretKey, orderHeader(), vectorID)
		entries := strings.Fields(h.Get(signature.HeaderMetadataSignature))
		if len(entries) != 1 || !hasV1a(t, entries, vectorID+".1614265330."+content) {
			t.Fatalf("metadata signature %q is no v1a signature of %q", entries, content)
		}
		if got := h.Get("Webhook-Signature"); got != svixSignature {
			t.Fatalf("body signature %q, want Svix's %q", got, svixSignature)
		}
	})
}

// Absent metadata headers are signed as empty, so none can be added on the
// way; values are signed trimmed, as HTTP servers read them.
func TestSignMetadataAbsentAndPadded(t *testing.T) {
	h := signHeader(t, signature.Standard, vectorSecret, http.Header{}, vectorID)
	if got, want := h.Get(signature.HeaderMetadataSignature), standardEntry(vectorKey(t), vectorID, "1614265330", metadataContent(vectorID, "", "", "", "")); got != want {
		t.Fatalf("no metadata: signature %q, want %q", got, want)
	}
	h = signHeader(t, signature.Standard, vectorSecret, http.Header{signature.HeaderEventType: {" \torder.created \t"}}, vectorID)
	if got, want := h.Get(signature.HeaderMetadataSignature), standardEntry(vectorKey(t), vectorID, "1614265330", metadataContent(vectorID, "order.created", "", "", "")); got != want {
		t.Fatalf("padded event type: signature %q, want %q", got, want)
	}
}

func TestSignRefusesAmbiguousMetadata(t *testing.T) {
	s, err := signature.NewSigner(signature.Standard, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]http.Header{
		"two event types":         {signature.HeaderEventType: {"order.created", "order.paid"}},
		"line feed in an id":      {signature.HeaderAggregateID: {"42\norder.paid"}},
		"carriage return in type": {signature.HeaderEventType: {"order\r"}},
	} {
		before := len(h)
		if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); !errors.Is(err, signature.ErrMalformedHeader) {
			t.Errorf("%s: got %v, want ErrMalformedHeader", name, err)
		}
		if len(h) != before {
			t.Errorf("%s: Sign set headers %v", name, h)
		}
	}
}

// The schemes and keys a metadata signature is checked with, each with the
// secret that signs and the one that verifies.
var metadataSchemes = []struct {
	name           string
	scheme         signature.Scheme
	signer, verify string
	id             string
}{
	{"standard v1", signature.Standard, vectorSecret, vectorSecret, vectorID},
	{"standard v1a", signature.Standard, svixSecretKey, svixPublicKey, vectorID},
	{"x-signature", signature.XSignature, xSecret, xSecret, "evt-1"},
}

func TestVerifyMetadata(t *testing.T) {
	for _, k := range metadataSchemes {
		t.Run(k.name, func(t *testing.T) {
			v := newVerifier(t, k.scheme, k.verify)
			signed := func() http.Header { return signHeader(t, k.scheme, k.signer, orderHeader(), k.id) }
			idName, tsName, sigName := k.scheme.HeaderNames()
			with := func(name string, values ...string) http.Header {
				h := signed()
				h[name] = values
				if values == nil {
					delete(h, name)
				}
				return h
			}
			other := signHeader(t, k.scheme, k.signer, orderHeader(), "other-id")
			for _, tc := range []struct {
				name string
				h    http.Header
				want error
			}{
				{"as signed", signed(), nil},
				{"event type changed", with(signature.HeaderEventType, "order.ignored"), signature.ErrNoMatchingSignature},
				{"event type removed", with(signature.HeaderEventType), signature.ErrNoMatchingSignature},
				{"aggregate type changed", with(signature.HeaderAggregateType, "invoice"), signature.ErrNoMatchingSignature},
				{"aggregate id changed", with(signature.HeaderAggregateID, "43"), signature.ErrNoMatchingSignature},
				{"sequence changed", with(signature.HeaderSequence, "9223372036854775807"), signature.ErrNoMatchingSignature},
				{"sequence removed", with(signature.HeaderSequence), signature.ErrNoMatchingSignature},
				{"value moved to the next header", func() http.Header {
					h := with(signature.HeaderAggregateType, "")
					h.Set(signature.HeaderEventType, "order.created\norder")
					return h
				}(), signature.ErrMalformedHeader},
				{"event type twice", with(signature.HeaderEventType, "order.created", "order.ignored"), signature.ErrMalformedHeader},
				{"id changed", with(idName, "other-id"), signature.ErrNoMatchingSignature},
				{"timestamp changed", with(tsName, "1614265331"), signature.ErrNoMatchingSignature},
				{"timestamp too old", with(tsName, "1614264000"), signature.ErrTimestampOutOfTolerance},
				{"metadata signature of another event", with(signature.HeaderMetadataSignature, other.Get(signature.HeaderMetadataSignature)), signature.ErrNoMatchingSignature},
				{"body signature as the metadata's", with(signature.HeaderMetadataSignature, signed().Get(sigName)), signature.ErrNoMatchingSignature},
				{"unsigned", with(signature.HeaderMetadataSignature), signature.ErrMetadataUnsigned},
				{"no id", with(idName), signature.ErrMissingHeaders},
			} {
				t.Run(tc.name, func(t *testing.T) {
					md, err := v.VerifyMetadata(tc.h)
					if !errors.Is(err, tc.want) {
						t.Fatalf("got %v, want %v", err, tc.want)
					}
					want := signature.Metadata{EventType: "order.created", AggregateType: "order", AggregateID: "42", Sequence: "7"}
					if tc.want != nil {
						want = signature.Metadata{}
					}
					if md != want {
						t.Fatalf("metadata %+v, want %+v", md, want)
					}
				})
			}
		})
	}
}

// The body signature is unchanged by the metadata and checked apart from
// it: Verify passes a request whose metadata was changed, VerifyMetadata
// refuses it.
func TestVerifyChecksTheBodyOnly(t *testing.T) {
	h := signHeader(t, signature.Standard, vectorSecret, orderHeader(), vectorID)
	h.Set(signature.HeaderEventType, "order.ignored")
	v := newVerifier(t, signature.Standard, vectorSecret)
	if _, _, err := v.Verify(h, []byte(vectorBody)); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, err := v.VerifyMetadata(h); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Fatalf("VerifyMetadata: got %v, want ErrNoMatchingSignature", err)
	}
}

// During a rotation the metadata signature holds an entry per secret, and
// a verifier holding any one of them accepts it.
func TestVerifyMetadataDuringRotation(t *testing.T) {
	s, err := signature.NewSigner(signature.Standard, vectorSecret, svixSecretKey)
	if err != nil {
		t.Fatal(err)
	}
	h := orderHeader()
	if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(h.Get(signature.HeaderMetadataSignature))); n != 2 {
		t.Fatalf("%d metadata signature entries, want 2", n)
	}
	for _, key := range []string{vectorSecret, svixPublicKey} {
		if _, err := newVerifierAt(t, vectorTime, key).VerifyMetadata(h); err != nil {
			t.Errorf("verify with %.10s…: %v", key, err)
		}
	}
}

// An ed25519 signature verifies what it signed only: a v1a metadata entry
// whose signature bytes were flipped is refused.
func TestVerifyMetadataV1aFlipped(t *testing.T) {
	h := signHeader(t, signature.Standard, svixSecretKey, orderHeader(), vectorID)
	sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h.Get(signature.HeaderMetadataSignature), "v1a,"))
	if err != nil || len(sig) != ed25519.SignatureSize {
		t.Fatalf("metadata signature %q: %v", h.Get(signature.HeaderMetadataSignature), err)
	}
	sig[0] ^= 1
	h.Set(signature.HeaderMetadataSignature, "v1a,"+base64.StdEncoding.EncodeToString(sig))
	if _, err := newVerifierAt(t, vectorTime, svixPublicKey).VerifyMetadata(h); !errors.Is(err, signature.ErrNoMatchingSignature) {
		t.Fatalf("got %v", err)
	}
}

// FuzzVerifyMetadata feeds arbitrary metadata and metadata signatures to a
// Standard verifier. Properties: VerifyMetadata never panics; what it
// accepts carries an entry equal to the HMAC of the documented content,
// computed here with crypto/hmac, and it returns exactly the (trimmed)
// header values; and what a Signer signs verifies, with the values it was
// given, unless a value holds a line break.
func FuzzVerifyMetadata(f *testing.F) {
	f.Add("order.created", "order", "42", "7", "")
	f.Add(" order.created\t", "", "", "", "v1,AAAA")
	f.Add("a\nb", "order", "42", "", "")
	f.Add("", "", "", "", standardEntry([]byte("k"), vectorID, "1614265330", metadataContent(vectorID, "", "", "", "")))

	v := newVerifier(f, signature.Standard, vectorSecret)
	s, err := signature.NewSigner(signature.Standard, vectorSecret)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, eventType, aggregateType, aggregateID, sequence, sig string) {
		h := http.Header{
			signature.HeaderEventType:     {eventType},
			signature.HeaderAggregateType: {aggregateType},
			signature.HeaderAggregateID:   {aggregateID},
			signature.HeaderSequence:      {sequence},
		}
		want := signature.Metadata{EventType: trimmed(eventType), AggregateType: trimmed(aggregateType), AggregateID: trimmed(aggregateID), Sequence: trimmed(sequence)}
		forged := h.Clone()
		forged.Set("Webhook-Id", vectorID)
		forged.Set("Webhook-Timestamp", "1614265330")
		forged.Set(signature.HeaderMetadataSignature, sig)
		if md, err := v.VerifyMetadata(forged); err == nil {
			entry := standardEntry(vectorKey(t), vectorID, "1614265330", metadataContent(vectorID, want.EventType, want.AggregateType, want.AggregateID, want.Sequence))
			if !containsFold(strings.Fields(sig), entry) || md != want {
				t.Fatalf("verified %q for %+v, want an entry %q and %+v", sig, md, entry, want)
			}
		}

		err := s.Sign(h, vectorID, vectorTime, nil)
		if strings.ContainsAny(eventType+aggregateType+aggregateID+sequence, "\r\n") {
			if !errors.Is(err, signature.ErrMalformedHeader) {
				t.Fatalf("Sign of a value with a line break: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if md, err := v.VerifyMetadata(h); err != nil || md != want {
			t.Fatalf("signed %+v, verified %+v: %v", want, md, err)
		}
	})
}

// trimmed is a header value as an HTTP server reads it.
func trimmed(s string) string { return strings.Trim(s, " \t") }
