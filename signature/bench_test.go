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

func BenchmarkSign(b *testing.B) {
	for _, scheme := range []signature.Scheme{signature.Standard, signature.XSignature} {
		s, err := signature.NewSigner(scheme, xSecret)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range benchSizes {
			body := []byte(strings.Repeat("x", n))
			b.Run(fmt.Sprintf("scheme=%v/body=%d", scheme, n), func(b *testing.B) {
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
	for _, scheme := range []signature.Scheme{signature.Standard, signature.XSignature} {
		s, err := signature.NewSigner(scheme, xSecret)
		if err != nil {
			b.Fatal(err)
		}
		v, err := signature.NewVerifier(scheme, 0, xSecret)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range benchSizes {
			body := []byte(strings.Repeat("x", n))
			h := http.Header{}
			if err := s.Sign(h, vectorID, time.Now(), body); err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("scheme=%v/body=%d", scheme, n), func(b *testing.B) {
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
