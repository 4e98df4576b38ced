package signature_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/postbox-go/postbox/signature"
)

func ExampleSigner_Sign() {
	s, err := signature.NewSigner(signature.Standard, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	if err := s.Sign(h, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)); err != nil {
		panic(err)
	}
	fmt.Println(h.Get("webhook-id"))
	fmt.Println(h.Get("webhook-timestamp"))
	fmt.Println(h.Get("webhook-signature"))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek
	// 1614265330
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
}

func ExampleVerifier_Verify() {
	// During a rotation the receiver accepts the old and the new secret.
	v, err := signature.NewVerifier(signature.Standard, 5*time.Minute,
		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_bmV3LXNlY3JldC1vZi0yNC1ieXRlcyEh")
	if err != nil {
		panic(err)
	}
	v.Now = func() time.Time { return time.Unix(1614265330, 0) } // the request's own time, for the example

	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")

	id, ts, err := v.Verify(h, []byte(`{"test": 2432232314}`))
	fmt.Println(id, ts.UTC(), err)

	_, _, err = v.Verify(h, []byte(`{"test": 1}`))
	fmt.Println(errors.Is(err, signature.ErrNoMatchingSignature))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek 2021-02-25 15:02:10 +0000 UTC <nil>
	// true
}

func ExampleScheme_SignsID() {
	scheme, err := signature.ParseScheme("x-signature")
	if err != nil {
		panic(err)
	}
	if !scheme.SignsID() {
		fmt.Println(scheme, "does not sign the id: check it against the body")
	}
	// Output:
	// x-signature does not sign the id: check it against the body
}

// A sender signs v1a with its whsk_ private key; the receivers verify with
// the whpk_ public key, which need not be kept secret.
func ExampleSigner_Sign_v1a() {
	s, err := signature.NewSigner(signature.Standard,
		"whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==")
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	if err := s.Sign(h, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)); err != nil {
		panic(err)
	}
	fmt.Println(h.Get("webhook-signature"))
	// Output:
	// v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==
}

// The receiver of v1a deliveries holds the public key only. During a move
// from v1 to v1a it holds both the whsec_ and the whpk_.
func ExampleVerifier_Verify_v1a() {
	v, err := signature.NewVerifier(signature.Standard, 5*time.Minute,
		"whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=")
	if err != nil {
		panic(err)
	}
	v.Now = func() time.Time { return time.Unix(1614265330, 0) } // the request's own time, for the example

	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==")

	id, _, err := v.Verify(h, []byte(`{"test": 2432232314}`))
	fmt.Println(id, err)

	_, _, err = v.Verify(h, []byte(`{"test": 1}`))
	fmt.Println(errors.Is(err, signature.ErrNoMatchingSignature))

	// The private key has no place on the receiving side.
	_, err = signature.NewVerifier(signature.Standard, 0,
		"whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==")
	fmt.Println(errors.Is(err, signature.ErrWrongKeyKind))
	// Output:
	// msg_p5jXN8AQM9LWM0D4loKWxJek <nil>
	// true
	// true
}

func ExampleGenerateKeyPair() {
	secretKey, publicKey, err := signature.GenerateKeyPair()
	if err != nil {
		panic(err)
	}
	// The secret key goes to the sender (postbox), the public key to the
	// receivers.
	derived, err := signature.PublicKey(secretKey)
	fmt.Println(secretKey[:5], publicKey[:5], derived == publicKey, err)
	// Output:
	// whsk_ whpk_ true <nil>
}

// A receiver migrating from Svix keeps its svix-* headers: the svix
// profile signs as Standard Webhooks do, under Svix's names.
func ExampleParseProfile() {
	p, err := signature.ParseProfile("svix")
	if err != nil {
		panic(err)
	}
	s, err := signature.NewProfileSigner(p, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	if err := s.Sign(h, "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`)); err != nil {
		panic(err)
	}
	fmt.Println(h.Get("svix-signature"))

	acme, err := signature.ParseProfile("x-signature;prefix=acme")
	fmt.Println(acme.HeaderNames(), acme, err)
	// Output:
	// v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=
	// {Acme-Id Acme-Timestamp Acme-Signature} x-signature;prefix=Acme <nil>
}
