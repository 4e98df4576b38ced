package signature_test

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/postbox-go/postbox/signature"
)

func TestParseProfile(t *testing.T) {
	acme := signature.HeaderNames{ID: "Acme-Id", Timestamp: "Acme-Timestamp", Signature: "Acme-Signature"}
	custom := signature.HeaderNames{ID: "X-Acme-Id", Timestamp: "X-Acme-Ts", Signature: "X-Acme-Sig"}
	for _, c := range []struct {
		spec   string
		want   signature.Profile
		string string
	}{
		{"", signature.Profile{}, "standard"},
		{"standard", signature.Profile{}, "standard"},
		{" Standard ", signature.Profile{}, "standard"},
		{"x-signature", signature.Profile{Scheme: signature.XSignature}, "x-signature"},
		{"svix", signature.Svix, "svix"},
		{"SVIX", signature.Svix, "svix"},
		{"standard;prefix=svix", signature.Svix, "svix"},
		{"standard;prefix=acme", signature.Profile{Names: acme}, "standard;prefix=Acme"},
		{"x-signature; prefix = acme", signature.Profile{Scheme: signature.XSignature, Names: acme}, "x-signature;prefix=Acme"},
		{"x-signature;prefix=svix", signature.Profile{Scheme: signature.XSignature, Names: signature.SvixNames}, "x-signature;prefix=Svix"},
		{"standard;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig", signature.Profile{Names: custom}, "standard;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig"},
		{"x-signature;signature=x-acme-sig,id=x-acme-id,timestamp=x-acme-ts", signature.Profile{Scheme: signature.XSignature, Names: custom}, "x-signature;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig"},
		// The scheme's own names are its zero names.
		{"standard;prefix=webhook", signature.Profile{}, "standard"},
		{"x-signature;id=x-event-id,timestamp=x-timestamp,signature=x-signature", signature.Profile{Scheme: signature.XSignature}, "x-signature"},
	} {
		p, err := signature.ParseProfile(c.spec)
		if err != nil || p != c.want {
			t.Errorf("ParseProfile(%q) = %+v, %v, want %+v", c.spec, p, err, c.want)
			continue
		}
		if got := p.String(); got != c.string {
			t.Errorf("ParseProfile(%q).String() = %q, want %q", c.spec, got, c.string)
		}
	}
}

func TestParseProfileRefuses(t *testing.T) {
	for _, c := range []struct {
		spec string
		want error
		says string
	}{
		{"bogus", signature.ErrUnknownScheme, "want"},
		{";prefix=acme", signature.ErrUnknownScheme, "want"},
		{"svix;prefix=acme", signature.ErrInvalidProfile, "no parameters"},
		{"standard;", signature.ErrInvalidProfile, "key=value"},
		{"standard;prefix", signature.ErrInvalidProfile, "key=value"},
		{"standard;prefix=", signature.ErrInvalidProfile, "key=value"},
		{"standard;prefix=ac me", signature.ErrInvalidProfile, "token"},
		{"standard;prefix=acme,prefix=other", signature.ErrInvalidProfile, "twice"},
		{"standard;prefix=acme,id=X-Id", signature.ErrInvalidProfile, "prefix cannot"},
		{"standard;id=A,timestamp=B", signature.ErrInvalidProfile, "all three"},
		{"standard;id=A,timestamp=B,signature=C,color=red", signature.ErrInvalidProfile, "unknown parameter"},
		{"standard;id=A,timestamp=a,signature=C", signature.ErrInvalidProfile, "distinct"},
		{"standard;id=A,timestamp=B,signature=X:Sig", signature.ErrInvalidProfile, "token"},
		{"standard;id=A,timestamp=B,signature=Postbox-Metadata-Signature", signature.ErrInvalidProfile, "postbox header"},
		{"standard;prefix=postbox", signature.ErrInvalidProfile, "postbox header"},
		{"standard;id=Authorization,timestamp=B,signature=C", signature.ErrInvalidProfile, "request itself"},
		{"x-signature;id=A,timestamp=content-length,signature=C", signature.ErrInvalidProfile, "request itself"},
		{"standard;id=A,timestamp=B,signature=content-type", signature.ErrInvalidProfile, "request itself"},
		{"standard;prefix=proxy", signature.ErrInvalidProfile, "request itself"},
		{"standard;prefix=x-forwarded", signature.ErrInvalidProfile, "request itself"},
	} {
		p, err := signature.ParseProfile(c.spec)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("ParseProfile(%q) = %+v, %v, want %v saying %q", c.spec, p, err, c.want, c.says)
		}
	}
}

// A profile with some names but not all, or an unknown scheme, is refused
// by the constructors as by Validate.
func TestProfileConstructorsRefuseInvalidProfiles(t *testing.T) {
	for _, p := range []signature.Profile{
		{Names: signature.HeaderNames{ID: "Acme-Id"}},
		{Names: signature.HeaderNames{ID: "A", Timestamp: "B", Signature: "a"}},
		{Scheme: signature.Scheme(7)},
	} {
		if _, err := signature.NewProfileSigner(p, vectorSecret); err == nil {
			t.Errorf("NewProfileSigner(%+v) accepted it", p)
		}
		if _, err := signature.NewProfileVerifier(p, 0, vectorSecret); err == nil {
			t.Errorf("NewProfileVerifier(%+v) accepted it", p)
		}
		if err := p.Validate(); !errors.Is(err, signature.ErrInvalidProfile) && !errors.Is(err, signature.ErrUnknownScheme) {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
}

// A request signed under a profile carries the scheme's signature under
// the profile's names (computed here with crypto/hmac) and none of the
// scheme's own names; the profile's verifier accepts it, the scheme's own
// verifier finds no headers, and the metadata signature keeps its header.
func TestProfileSignsUnderItsNames(t *testing.T) {
	ts := strconv.Itoa(vectorTimestamp)
	for _, spec := range []string{
		"svix", "standard;prefix=acme", "standard;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig",
		"x-signature;prefix=acme", "x-signature;id=x-acme-id,timestamp=x-acme-ts,signature=x-acme-sig",
	} {
		t.Run(spec, func(t *testing.T) {
			p, err := signature.ParseProfile(spec)
			if err != nil {
				t.Fatal(err)
			}
			secret, want := vectorSecret, standardEntry(vectorKey(t), vectorID, ts, vectorBody)
			if p.Scheme == signature.XSignature {
				secret, want = xSecret, xEntry(xSecret, ts, vectorBody)
			}
			s, err := signature.NewProfileSigner(p, secret)
			if err != nil {
				t.Fatal(err)
			}
			h := orderHeader()
			if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
				t.Fatal(err)
			}
			n := p.HeaderNames()
			wantHeader := orderHeader()
			wantHeader[n.ID], wantHeader[n.Timestamp], wantHeader[n.Signature] = []string{vectorID}, []string{ts}, []string{want}
			assertHeader(t, h, wantHeader) // and none of the scheme's own names

			v, err := signature.NewProfileVerifier(p, 0, secret)
			if err != nil {
				t.Fatal(err)
			}
			v.Now = func() time.Time { return vectorTime }
			if gotID, _, err := v.Verify(h, []byte(vectorBody)); err != nil || gotID != vectorID {
				t.Errorf("Verify = %q, %v", gotID, err)
			}
			if _, _, err := v.Verify(h, []byte(vectorBody+" ")); !errors.Is(err, signature.ErrNoMatchingSignature) {
				t.Errorf("Verify of another body = %v", err)
			}
			if md, err := v.VerifyMetadata(h); err != nil || md.EventType != "order.created" {
				t.Errorf("VerifyMetadata = %+v, %v", md, err)
			}
			plain, err := signature.NewVerifier(p.Scheme, 0, secret)
			if err != nil {
				t.Fatal(err)
			}
			plain.Now = v.Now
			if _, _, err := plain.Verify(h, []byte(vectorBody)); !errors.Is(err, signature.ErrMissingHeaders) {
				t.Errorf("the scheme's own verifier: %v, want ErrMissingHeaders", err)
			}
		})
	}
}

// Svix's own library verifies what the svix profile signs, with every kind
// of HMAC secret, and refuses a changed body.
func TestSvixLibraryVerifiesTheSvixProfile(t *testing.T) {
	body := []byte(`{"type":"order.created","id":42}`)
	for _, secret := range []string{vectorSecret, "whsec_" + "c3ZpeC1jb21wYXRpYmxlLXNlY3JldC1rZXktMzI="} {
		s, err := signature.NewProfileSigner(signature.Svix, secret)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		if err := s.Sign(h, "msg_2bq4", time.Now(), body); err != nil {
			t.Fatal(err)
		}
		if h.Get("webhook-signature") != "" {
			t.Fatal("the svix profile set webhook-signature: the svix library would verify that instead")
		}
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("svix Verify: %v", err)
		}
		if err := wh.Verify(append(body, ' '), h); err == nil {
			t.Error("svix verified a changed body")
		}
	}
}

// And the reverse: what Svix's library signs, the svix profile verifies.
func TestSvixProfileVerifiesTheSvixLibrary(t *testing.T) {
	wh, err := svix.NewWebhook(vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	body := []byte(`{"hello":"world"}`)
	sig, err := wh.Sign("msg_svix1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set("svix-id", "msg_svix1")
	h.Set("svix-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("svix-signature", sig)
	v, err := signature.NewProfileVerifier(signature.Svix, 0, vectorSecret)
	if err != nil {
		t.Fatal(err)
	}
	if id, _, err := v.Verify(h, body); err != nil || id != "msg_svix1" {
		t.Fatalf("Verify = %q, %v", id, err)
	}
}

// FuzzParseProfile: whatever ParseProfile accepts is valid, its String
// reads back to the same profile, and a signer of it signs what its
// verifier verifies under its names.
func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{"", "standard", "x-signature", "svix", "standard;prefix=acme", "x-signature;prefix=X-Acme",
		"standard;id=X-Acme-Id,timestamp=X-Acme-Ts,signature=X-Acme-Sig", "standard;id=a,timestamp=b,signature=c",
		"standard;prefix=webhook", "svix;", "standard;id=a,,", "x-signature;prefix=a.b~c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p, err := signature.ParseProfile(spec)
		if err != nil {
			if !errors.Is(err, signature.ErrInvalidProfile) && !errors.Is(err, signature.ErrUnknownScheme) {
				t.Fatalf("ParseProfile(%q): %v matches no sentinel", spec, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("ParseProfile(%q) = %+v, which Validate refuses: %v", spec, p, err)
		}
		again, err := signature.ParseProfile(p.String())
		if err != nil || again != p {
			t.Fatalf("ParseProfile(%q) = %+v; its String %q reads back as %+v, %v", spec, p, p.String(), again, err)
		}
		secret := vectorSecret
		if p.Scheme == signature.XSignature {
			secret = xSecret
		}
		s, err := signature.NewProfileSigner(p, secret)
		if err != nil {
			t.Fatal(err)
		}
		v, err := signature.NewProfileVerifier(p, 0, secret)
		if err != nil {
			t.Fatal(err)
		}
		v.Now = func() time.Time { return vectorTime }
		h := http.Header{}
		if err := s.Sign(h, vectorID, vectorTime, []byte(vectorBody)); err != nil {
			t.Fatal(err)
		}
		if len(h) != 4 || h.Get(p.HeaderNames().Signature) == "" {
			t.Fatalf("Sign set %v, want the profile's three headers and the metadata signature", h)
		}
		if _, _, err := v.Verify(h, []byte(vectorBody)); err != nil {
			t.Fatalf("Verify: %v", err)
		}
	})
}
