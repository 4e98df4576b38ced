package signature_test

import (
	"errors"
	"testing"

	"github.com/postbox-go/postbox/signature"
)

func TestParseScheme(t *testing.T) {
	for _, tc := range []struct {
		name string
		want signature.Scheme
	}{
		{"standard", signature.Standard},
		{"Standard", signature.Standard},
		{"x-signature", signature.XSignature},
		{"X-Signature", signature.XSignature},
	} {
		got, err := signature.ParseScheme(tc.name)
		if err != nil || got != tc.want {
			t.Errorf("ParseScheme(%q) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	for _, name := range []string{"", "hmac", "xsignature", "v1"} {
		if _, err := signature.ParseScheme(name); !errors.Is(err, signature.ErrUnknownScheme) {
			t.Errorf("ParseScheme(%q): got %v, want ErrUnknownScheme", name, err)
		}
	}
}

func TestSchemeStringRoundTrips(t *testing.T) {
	for _, s := range []signature.Scheme{signature.Standard, signature.XSignature} {
		got, err := signature.ParseScheme(s.String())
		if err != nil || got != s {
			t.Errorf("ParseScheme(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	if got := signature.Scheme(7).String(); got != "Scheme(7)" {
		t.Errorf("String of an unknown scheme = %q", got)
	}
}

func TestSignsID(t *testing.T) {
	if !signature.Standard.SignsID() {
		t.Error("Standard signs the id")
	}
	if signature.XSignature.SignsID() {
		t.Error("XSignature does not sign the id")
	}
}

func TestHeaderNames(t *testing.T) {
	for scheme, want := range map[signature.Scheme][3]string{
		signature.Standard:   {"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"},
		signature.XSignature: {"X-Event-Id", "X-Timestamp", "X-Signature"},
	} {
		id, ts, sig := scheme.HeaderNames()
		if [3]string{id, ts, sig} != want {
			t.Errorf("%v: %q %q %q, want %q", scheme, id, ts, sig, want)
		}
	}
}
