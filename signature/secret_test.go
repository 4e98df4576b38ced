package signature_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
)

func TestSecrets(t *testing.T) {
	raw23 := strings.Repeat("k", signature.SecretMinLen-1)
	raw24 := strings.Repeat("k", signature.SecretMinLen)
	whsec := func(n int) string {
		return "whsec_" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat("s", n)))
	}
	for _, tc := range []struct {
		name    string
		scheme  signature.Scheme
		secrets []string
		want    error // nil: accepted
	}{
		{"none", signature.Standard, nil, signature.ErrEmptySecret},
		{"empty", signature.Standard, []string{""}, signature.ErrEmptySecret},
		{"empty whsec key", signature.Standard, []string{"whsec_"}, signature.ErrEmptySecret},
		{"one of two empty", signature.Standard, []string{raw24, ""}, signature.ErrEmptySecret},
		{"raw 23 bytes", signature.Standard, []string{raw23}, signature.ErrSecretTooShort},
		{"raw 24 bytes", signature.Standard, []string{raw24}, nil},
		{"whsec key 23 bytes", signature.Standard, []string{whsec(23)}, signature.ErrSecretTooShort},
		{"whsec key 24 bytes", signature.Standard, []string{whsec(24)}, nil},
		{"whsec not base64", signature.Standard, []string{"whsec_" + strings.Repeat("!", 32)}, signature.ErrMalformedSecret},
		// XSignature uses secrets as bytes: "whsec_" is no prefix there.
		{"x-signature raw 23 bytes", signature.XSignature, []string{raw23}, signature.ErrSecretTooShort},
		{"x-signature whsec as bytes", signature.XSignature, []string{"whsec_" + strings.Repeat("!", 18)}, nil},
		{"x-signature empty", signature.XSignature, []string{""}, signature.ErrEmptySecret},
		{"unknown scheme", signature.Scheme(9), []string{raw24}, signature.ErrUnknownScheme},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errS := signature.NewSigner(tc.scheme, tc.secrets...)
			_, errV := signature.NewVerifier(tc.scheme, 0, tc.secrets...)
			for _, err := range []error{errS, errV} {
				if tc.want == nil && err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				for _, s := range tc.secrets {
					if err != nil && s != "" && strings.Contains(err.Error(), s) {
						t.Fatalf("error %q reveals the secret", err)
					}
				}
			}
		})
	}
}

func TestNewVerifierRefusesNegativeTolerance(t *testing.T) {
	if _, err := signature.NewVerifier(signature.Standard, -time.Second, vectorSecret); err == nil {
		t.Fatal("negative tolerance accepted")
	}
}
