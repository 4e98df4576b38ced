package signature_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
)

var benchSizes = []int{256, 4 << 10, 64 << 10}

// benchKeys are the signing kinds measured: HMAC in both schemes, and
// ed25519 (v1a).
var benchKeys = []struct {
	name           string
	scheme         signature.Scheme
	signer, verify string
}{
	{"standard", signature.Standard, xSecret, xSecret},
	{"x-signature", signature.XSignature, xSecret, xSecret},
	{"standard-v1a", signature.Standard, svixSecretKey, svixPublicKey},
}

func BenchmarkSign(b *testing.B) {
	for _, k := range benchKeys {
		s, err := signature.NewSigner(k.scheme, k.signer)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range benchSizes {
			body := []byte(strings.Repeat("x", n))
			b.Run(fmt.Sprintf("scheme=%s/body=%d", k.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(n))
				h := http.Header{}
				now := time.Now()
				for b.Loop() {
					if err := s.Sign(h, vectorID, now, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, k := range benchKeys {
		s, err := signature.NewSigner(k.scheme, k.signer)
		if err != nil {
			b.Fatal(err)
		}
		v, err := signature.NewVerifier(k.scheme, 0, k.verify)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range benchSizes {
			body := []byte(strings.Repeat("x", n))
			h := http.Header{}
			if err := s.Sign(h, vectorID, time.Now(), body); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("scheme=%s/body=%d", k.name, n), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(n))
				for b.Loop() {
					if _, _, err := v.Verify(h, body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkVerifyMetadata checks the metadata signature of a request
// carrying an order event's metadata, as the inbox does beside Verify.
func BenchmarkVerifyMetadata(b *testing.B) {
	for _, k := range benchKeys {
		s, err := signature.NewSigner(k.scheme, k.signer)
		if err != nil {
			b.Fatal(err)
		}
		v, err := signature.NewVerifier(k.scheme, 0, k.verify)
		if err != nil {
			b.Fatal(err)
		}
		h := http.Header{
			signature.HeaderEventType:     {"order.created"},
			signature.HeaderAggregateType: {"order"},
			signature.HeaderAggregateID:   {"0190f0b2-7b4c-7cc0-8d2e-3f1c9a4b5d6e"},
			signature.HeaderSequence:      {"42"},
		}
		if err := s.Sign(h, vectorID, time.Now(), nil); err != nil {
			b.Fatal(err)
		}
		b.Run("scheme="+k.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.VerifyMetadata(h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
