package signature_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/signature"
)

// FuzzVerify feeds arbitrary headers and bodies to both schemes' verifiers
// (the Standard one holds an HMAC secret and an ed25519 public key).
// Properties: Verify never panics; a verified request really carries an entry
// equal to the HMAC computed here with crypto/hmac, or a v1a entry that
// crypto/ed25519 verifies, its timestamp within tolerance; and what a Signer
// signs always verifies when the id is valid.
func FuzzVerify(f *testing.F) {
	ts := strconv.Itoa(vectorTimestamp)
	f.Add(false, vectorID, ts, vectorSignature, []byte(vectorBody))
	f.Add(false, vectorID, ts, "v1a,abc "+vectorSignature, []byte(vectorBody))
	f.Add(false, vectorID, ts, svixSignature, []byte(vectorBody))
	f.Add(false, vectorID, ts, "v1a,"+strings.Repeat("A", 86)+"== "+svixSignature, []byte(vectorBody))
	f.Add(false, vectorID, ts, "v1,", []byte(vectorBody))
	f.Add(false, vectorID, ts, "v1,!!!!", []byte{})
	f.Add(false, "msg.1", ts, vectorSignature, []byte(vectorBody))
	f.Add(false, vectorID, "-1", vectorSignature, []byte(vectorBody))
	f.Add(false, vectorID, "99999999999999999999", vectorSignature, []byte(vectorBody))
	f.Add(false, "", "", "", []byte(nil))
	f.Add(true, "evt-1", ts, xEntry(xSecret, ts, vectorBody), []byte(vectorBody))
	f.Add(true, "evt-1", ts, "sha256=zz,,  ,sha256=", []byte(vectorBody))
	f.Add(true, "evt-1", ts+"0", strings.ToUpper(xEntry(xSecret, ts, vectorBody)), []byte("\x00\xff"))

	fixed := func() time.Time { return vectorTime }
	f.Fuzz(func(t *testing.T, xsig bool, id, timestamp, sig string, body []byte) {
		scheme, secrets, key := signature.Standard, []string{vectorSecret, svixPublicKey}, vectorKey(t)
		idName, tsName, sigName := "Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"
		if xsig {
			scheme, secrets, key = signature.XSignature, []string{xSecret}, []byte(xSecret)
			idName, tsName, sigName = "X-Event-Id", "X-Timestamp", "X-Signature"
		}
		v, err := signature.NewVerifier(scheme, 0, secrets...)
		if err != nil {
			t.Fatal(err)
		}
		v.Now = fixed

		h := http.Header{idName: {id}, tsName: {timestamp}, sigName: {sig}}
		gotID, gotTS, err := v.Verify(h, body)
		if err == nil {
			if gotID != id {
				t.Fatalf("verified id %q, header %q", gotID, id)
			}
			if d := gotTS.Sub(vectorTime).Abs(); d > signature.ToleranceDefault || strconv.FormatInt(gotTS.Unix(), 10) != strings.TrimLeft(timestamp, "0") {
				t.Fatalf("verified timestamp %v from header %q", gotTS, timestamp)
			}
			want := standardEntry(key, id, timestamp, string(body))
			sep := func(r rune) bool { return r == ' ' }
			if xsig {
				want = xEntry(xSecret, timestamp, string(body))
				sep = func(r rune) bool { return r == ' ' || r == ',' }
			}
			if entries := strings.FieldsFunc(sig, sep); !containsFold(entries, want) && !(!xsig && hasV1a(t, entries, id+"."+timestamp+"."+string(body))) {
				t.Fatalf("verified %q although no entry is %q", sig, want)
			}
		}

		if id == "" || strings.Contains(id, ".") {
			return
		}
		s, err := signature.NewSigner(scheme, secrets[0])
		if err != nil {
			t.Fatal(err)
		}
		signed := http.Header{}
		if err := s.Sign(signed, id, vectorTime, body); err != nil {
			t.Fatalf("Sign(%q): %v", id, err)
		}
		if gotID, _, err := v.Verify(signed, body); err != nil || gotID != id {
			t.Fatalf("signed %q, verified %q: %v", id, gotID, err)
		}
	})
}

// containsFold reports whether entries hold want. XSignature entries compare
// ignoring case, as Verify accepts upper-case hex; Standard entries compare
// exactly.
func containsFold(entries []string, want string) bool {
	for _, e := range entries {
		if e == want || (strings.HasPrefix(want, "sha256=") && strings.HasPrefix(e, "sha256=") && strings.EqualFold(e, want)) {
			return true
		}
	}
	return false
}

// hasV1a reports whether one of entries is a v1a signature of content that
// crypto/ed25519 verifies with Svix's public key.
func hasV1a(t *testing.T, entries []string, content string) bool {
	public := ed25519.PublicKey(mustDecode(t, svixPublicKey))
	for _, e := range entries {
		encoded, ok := strings.CutPrefix(e, "v1a,")
		sig, err := base64.StdEncoding.DecodeString(encoded)
		if ok && err == nil && len(sig) == ed25519.SignatureSize && ed25519.Verify(public, []byte(content), sig) {
			return true
		}
	}
	return false
}
