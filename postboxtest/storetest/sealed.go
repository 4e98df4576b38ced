package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// clearSecret is the clear secret of the tests' unsealed endpoints: no
// error may name it.
const clearSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// sealedEndpoint returns a new endpoint whose secrets are sealed as sealed,
// with the given settings.
func sealedEndpoint(name string, sealed store.SealedSecrets) store.Endpoint {
	return store.Endpoint{
		Name: name, URL: "https://example.com/" + name, Concurrency: 2, Sealed: sealed,
		Filter:    `event.type.startsWith("order.") && payload.total > 100`,
		Envelope:  "cloudevents",
		Signature: "standard;header=X-Signature",
	}
}

// testSealedSettingsRoundTrip: Filter, Envelope, Signature and Sealed are
// written by EndpointCreate (a sealed endpoint with an empty clear
// column), read back by EndpointGet and EndpointList, and EndpointUpdate
// changes the settings (to "" too) but neither the sealed nor the clear
// secrets. An unsealed endpoint reads with no Sealed and its clear secret.
func testSealedSettingsRoundTrip(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	sealed := store.SealedSecrets{Data: []byte{0, 1, 2, 0xfe, 0xff}, Key: "k-2026-01", Fingerprint: "sha256:ab12,sha256:cd34", Auth: "bearer+headers"}
	created, err := s.EndpointCreate(ctx, sealedEndpoint("sealed", sealed))
	if err != nil {
		t.Fatal(err)
	}
	plain := newEndpoint(t, s, "plain")
	want := created
	got, err := s.EndpointGet(ctx, created.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !sameSettings(got, want) || got.Secret != "" || got.PreviousSecret != "" {
		t.Fatalf("get = %s\nwant %s, no clear secret", describe(got), describe(want))
	}
	all, err := s.EndpointList(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("list = %d endpoints, %v; want 2", len(all), err)
	}
	if !sameSettings(all[0], want) {
		t.Errorf("list[0] = %s\nwant %s", describe(all[0]), describe(want))
	}
	if p := all[1]; !sameSettings(p, store.Endpoint{}) || p.Sealed.Data != nil || p.Secret != clearSecret {
		t.Errorf("unsealed endpoint listed as %s, secret %t; want no sealed secrets, no settings, its clear secret",
			describe(p), p.Secret == clearSecret)
	}

	// An update changes the settings, not the secrets, whatever e holds.
	for i, settings := range [][3]string{{"true", "standard", "v1,v1a"}, {"", "", ""}} {
		e := got
		e.Filter, e.Envelope, e.Signature = settings[0], settings[1], settings[2]
		e.Sealed = store.SealedSecrets{Data: []byte("other"), Key: "k-other", Fingerprint: "f", Auth: "basic"}
		e.Secret, e.PreviousSecret = "whsec_from_update", "whsec_prev_from_update"
		updated, err := s.EndpointUpdate(ctx, e)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		got.UpdatedAt = updated.UpdatedAt // the next update's compare-and-swap
		want.Filter, want.Envelope, want.Signature = settings[0], settings[1], settings[2]
		reread, err := s.EndpointGet(ctx, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []store.Endpoint{updated, reread} {
			if !sameSettings(g, want) || g.Secret != "" || g.PreviousSecret != "" {
				t.Errorf("update %d: %s\nwant %s, no clear secret", i, describe(g), describe(want))
			}
		}
	}
	e := plain
	e.Filter, e.Secret = "size(payload) > 0", "whsec_from_update"
	if updated, err := s.EndpointUpdate(ctx, e); err != nil || updated.Secret != clearSecret || updated.Filter != e.Filter || updated.Sealed.Data != nil {
		t.Errorf("update of an unsealed endpoint: filter %q, sealed %d bytes, secret kept %t, %v; want its filter, its clear secret",
			updated.Filter, len(updated.Sealed.Data), updated.Secret == clearSecret, err)
	}
}

// testEndpointSeal: EndpointSeal seals an unsealed endpoint (was nil),
// emptying its clear secrets and setting PreviousSecretUntil; it swaps
// only from the sealed data the caller read: a stale or wrong was is
// ErrEndpointChanged and changes nothing, of a sealed endpoint as of an
// unsealed one; an unknown endpoint is ErrEndpointNotFound; an empty
// sealed data is refused; EndpointRotateSecret leaves a sealed endpoint
// alone (ErrEndpointChanged).
func testEndpointSeal(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	e := newEndpoint(t, s, "legacy")
	grace := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := s.EndpointRotateSecret(ctx, e.ID, "whsec_rotated", grace); err != nil {
		t.Fatal(err)
	}
	before := getEndpoint(t, s, e.ID)
	if before.Secret != "whsec_rotated" || before.PreviousSecret != clearSecret {
		t.Fatalf("rotation left secret %t, previous %t", before.Secret == "whsec_rotated", before.PreviousSecret == clearSecret)
	}

	// A stale was on an unsealed endpoint changes nothing.
	first := store.SealedSecrets{Data: []byte("sealed-1"), Key: "k1", Fingerprint: "fp1", Auth: "basic"}
	if err := s.EndpointSeal(ctx, e.ID, first, grace, "", []byte("never sealed")); !errors.Is(err, store.ErrEndpointChanged) {
		t.Fatalf("seal of an unsealed endpoint from a sealed was: %v, want ErrEndpointChanged", err)
	}
	unchanged(t, s, before)

	time.Sleep(2 * time.Millisecond) // updated_at moves on
	sealGrace := grace.Add(time.Minute)
	if err := s.EndpointSeal(ctx, e.ID, first, sealGrace, "", nil); err != nil {
		t.Fatalf("seal of an unsealed endpoint: %v", err)
	}
	sealed := getEndpoint(t, s, e.ID)
	if sealed.URL != before.URL {
		t.Fatalf("a seal without a URL changed the URL to %q", sealed.URL)
	}
	if !reflect.DeepEqual(sealed.Sealed, first) || sealed.Secret != "" || sealed.PreviousSecret != "" ||
		!sealed.PreviousSecretUntil.Equal(sealGrace) || !sealed.UpdatedAt.After(before.UpdatedAt) {
		t.Fatalf("sealed endpoint = %s, clear secrets %q/%q, previous until %v, updated %v (before %v)\nwant sealed %s, no clear secret, until %v, updated later",
			describe(sealed), sealed.Secret, sealed.PreviousSecret, sealed.PreviousSecretUntil, sealed.UpdatedAt, before.UpdatedAt,
			describeSealed(first), sealGrace)
	}

	// Stale or wrong: nil (it was not sealed), a prefix, a longer value,
	// one byte off. None changes the row.
	second := store.SealedSecrets{Data: []byte("sealed-2"), Key: "k2", Fingerprint: "fp2", Auth: "bearer"}
	for _, was := range [][]byte{nil, {}, []byte("sealed-"), []byte("sealed-1\x00"), []byte("sealed-2"), []byte("Sealed-1")} {
		if err := s.EndpointSeal(ctx, e.ID, second, time.Time{}, "", was); !errors.Is(err, store.ErrEndpointChanged) {
			t.Errorf("seal from was %q: %v, want ErrEndpointChanged", was, err)
		}
	}
	unchanged(t, s, sealed)

	// A sealed endpoint's clear secrets are not rotated.
	if err := s.EndpointRotateSecret(ctx, e.ID, "whsec_clear_again", time.Now().Add(time.Hour)); !errors.Is(err, store.ErrEndpointChanged) {
		t.Errorf("rotate the clear secret of a sealed endpoint: %v, want ErrEndpointChanged", err)
	}
	unchanged(t, s, sealed)

	// Sealing nothing would drop the secrets: refused.
	for _, data := range [][]byte{nil, {}} {
		err := s.EndpointSeal(ctx, e.ID, store.SealedSecrets{Data: data, Key: "k3"}, time.Time{}, "", first.Data)
		if err == nil || errors.Is(err, store.ErrEndpointChanged) || errors.Is(err, store.ErrEndpointNotFound) {
			t.Errorf("seal of %q: %v, want refused", data, err)
		}
	}
	unchanged(t, s, sealed)

	// The next seal, from what was read, with the URL its credentials are
	// for; a zero previousUntil clears the grace.
	const moved = "https://moved.example/hooks"
	if err := s.EndpointSeal(ctx, e.ID, second, time.Time{}, moved, first.Data); err != nil {
		t.Fatalf("seal from the current data: %v", err)
	}
	if got := getEndpoint(t, s, e.ID); !reflect.DeepEqual(got.Sealed, second) || !got.PreviousSecretUntil.IsZero() || got.Secret != "" || got.URL != moved {
		t.Errorf("resealed = %s, previous until %v, URL %q; want %s, none, %s", describe(got), got.PreviousSecretUntil, got.URL, describeSealed(second), moved)
	}

	for _, was := range [][]byte{nil, second.Data} {
		if err := s.EndpointSeal(ctx, uuid.New(), first, time.Time{}, "", was); !errors.Is(err, store.ErrEndpointNotFound) {
			t.Errorf("seal of an unknown endpoint from %q: %v, want ErrEndpointNotFound", was, err)
		}
	}
	if err := s.EndpointRotateSecret(ctx, uuid.New(), "whsec_x", time.Now()); !errors.Is(err, store.ErrEndpointNotFound) {
		t.Errorf("rotate an unknown endpoint: %v, want ErrEndpointNotFound", err)
	}
}

// testEndpointSealRace: seals that all read the same sealed data race;
// exactly one wins, every other one is ErrEndpointChanged, and the row
// holds the winner's secrets.
func testEndpointSealRace(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	e, err := s.EndpointCreate(ctx, sealedEndpoint("raced", store.SealedSecrets{Data: []byte("read by all"), Key: "k0"}))
	if err != nil {
		t.Fatal(err)
	}
	const racers = 8
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sealed := store.SealedSecrets{Data: []byte(fmt.Sprintf("racer %d", i)), Key: fmt.Sprintf("k%d", i+1)}
			errs[i] = s.EndpointSeal(ctx, e.ID, sealed, time.Time{}, "", e.Sealed.Data)
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Errorf("racers %d and %d both sealed from the same data", winner, i)
		case !errors.Is(err, store.ErrEndpointChanged):
			t.Errorf("racer %d: %v, want ErrEndpointChanged", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racer sealed")
	}
	if got := getEndpoint(t, s, e.ID); string(got.Sealed.Data) != fmt.Sprintf("racer %d", winner) || got.Sealed.Key != fmt.Sprintf("k%d", winner+1) {
		t.Errorf("row sealed as %s, want racer %d's", describeSealed(got.Sealed), winner)
	}
}

// testEndpointRefusedTexts: a Filter, Envelope, Signature or sealed text
// that is not valid UTF-8 without NUL, and a sealed endpoint with a clear
// secret, are refused by EndpointCreate, EndpointUpdate and EndpointSeal
// with an error that does not name the secret, and nothing is written.
func testEndpointRefusedTexts(t *testing.T, s store.Endpoints) {
	ctx := ctxFor(t)
	kept := newEndpoint(t, s, "kept")
	sealed := store.SealedSecrets{Data: []byte("sealed"), Key: "k1"}
	if err := s.EndpointSeal(ctx, kept.ID, sealed, time.Time{}, "", nil); err != nil {
		t.Fatal(err)
	}
	kept = getEndpoint(t, s, kept.ID)
	bad := []string{"a\x00b", "\x00", "\xff", "caf\xc3", "ok\xed\xa0\x80"} // NUL, invalid bytes, a cut rune, a surrogate
	set := []func(e *store.Endpoint, v string){
		func(e *store.Endpoint, v string) { e.Filter = v },
		func(e *store.Endpoint, v string) { e.Envelope = v },
		func(e *store.Endpoint, v string) { e.Signature = v },
		func(e *store.Endpoint, v string) { e.Sealed.Key = v },
		func(e *store.Endpoint, v string) { e.Sealed.Fingerprint = v },
		func(e *store.Endpoint, v string) { e.Sealed.Auth = v },
	}
	for i, field := range set {
		for _, v := range bad {
			e := sealedEndpoint("refused", store.SealedSecrets{Data: []byte{1}})
			field(&e, v)
			if _, err := s.EndpointCreate(ctx, e); err == nil {
				t.Errorf("create with field %d = %q: written, want refused", i, v)
			}
			if i < 3 {
				u := kept
				field(&u, v)
				if _, err := s.EndpointUpdate(ctx, u); err == nil {
					t.Errorf("update with field %d = %q: written, want refused", i, v)
				}
			} else if err := s.EndpointSeal(ctx, kept.ID, e.Sealed, time.Time{}, "", kept.Sealed.Data); err == nil {
				t.Errorf("seal with field %d = %q: written, want refused", i, v)
			}
		}
	}
	both := sealedEndpoint("both", store.SealedSecrets{Data: []byte("sealed")})
	both.Secret = clearSecret
	_, err := s.EndpointCreate(ctx, both)
	if err == nil {
		t.Error("create of a sealed endpoint with a clear secret: written, want refused")
	} else if strings.Contains(err.Error(), clearSecret) {
		t.Errorf("the error names the clear secret: %v", err)
	}
	all, err := s.EndpointList(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("list = %d endpoints, %v; want only the first one", len(all), err)
	}
	unchanged(t, s, kept)
}

// The hostile round trip's length: POSTBOX_PROPERTY_ROUNDS rounds
// (default propertyRounds) of sealedRoundEndpoints endpoints each, from
// the seed POSTBOX_PROPERTY_SEED, as the property test of the outbox.
const sealedRoundEndpoints = 12

// testSealedHostileRoundTrip: texts of any valid UTF-8 without NUL (any
// plane, combining marks, quotes, backslashes, SQL and JSON syntax, 1 MB
// long) in Filter, Envelope, Signature and the sealed texts, and sealed
// blobs of 0 to 64 KiB of any bytes (every byte value, runs of 0x00 and
// 0xff, random), round-trip byte for byte through EndpointCreate,
// EndpointGet, EndpointList, EndpointUpdate, and EndpointSeal, whose
// compare-and-swap matches the blob read back byte for byte. An empty blob
// is no sealed secrets (Data nil, the clear secret kept).
func testSealedHostileRoundTrip(t *testing.T, s store.Endpoints) {
	rounds := envInt(t, "POSTBOX_PROPERTY_ROUNDS", propertyRounds)
	seed := int64(envInt(t, "POSTBOX_PROPERTY_SEED", int(time.Now().UnixNano())))
	t.Logf("seed %d (POSTBOX_PROPERTY_SEED), %d rounds (POSTBOX_PROPERTY_ROUNDS)", seed, rounds)
	rng := rand.New(rand.NewSource(seed))
	for round := range rounds {
		ctx := ctxFor(t)
		var written []store.Endpoint
		for i := range sealedRoundEndpoints {
			e := store.Endpoint{
				Name: fmt.Sprintf("hostile-%d-%d", round, i), URL: "https://example.com/h", Concurrency: 1,
				Filter: hostileText(rng), Envelope: hostileText(rng), Signature: hostileText(rng),
				Sealed: store.SealedSecrets{Data: hostileBlob(rng), Key: hostileText(rng), Fingerprint: hostileText(rng), Auth: hostileText(rng)},
			}
			if len(e.Sealed.Data) == 0 {
				e.Secret = clearSecret
			}
			got, err := s.EndpointCreate(ctx, e)
			if err != nil {
				t.Fatalf("round %d, create %s: %v", round, describe(e), err)
			}
			e.ID = got.ID
			written = append(written, e)
		}
		all, err := s.EndpointList(ctx)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[uuid.UUID]store.Endpoint{}
		for _, e := range all {
			listed[e.ID] = e
		}
		for _, e := range written {
			roundTrips(t, "list", listed[e.ID], e)
			roundTrips(t, "get", getEndpoint(t, s, e.ID), e)

			// Update to other hostile settings, then reseal from the
			// blob as read back.
			e.Filter, e.Envelope, e.Signature = hostileText(rng), hostileText(rng), hostileText(rng)
			updated, err := s.EndpointUpdate(ctx, e)
			if err != nil {
				t.Fatalf("update %s: %v", describe(e), err)
			}
			roundTrips(t, "update", updated, e)
			was := getEndpoint(t, s, e.ID).Sealed.Data
			next := store.SealedSecrets{Data: hostileBlob(rng), Key: hostileText(rng), Fingerprint: hostileText(rng), Auth: hostileText(rng)}
			for len(next.Data) == 0 {
				next.Data = hostileBlob(rng)
			}
			if err := s.EndpointSeal(ctx, e.ID, next, time.Time{}, "", was); err != nil {
				t.Fatalf("seal %s from the blob read back (%d bytes): %v", describe(e), len(was), err)
			}
			e.Sealed, e.Secret = next, ""
			roundTrips(t, "seal", getEndpoint(t, s, e.ID), e)
		}
		for _, e := range written {
			if err := s.EndpointDelete(ctx, e.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// roundTrips fails t unless got holds want's settings and secrets byte for
// byte (an empty blob read as nil: not sealed).
func roundTrips(t *testing.T, how string, got, want store.Endpoint) {
	t.Helper()
	if !sameSettings(got, want) || got.Secret != want.Secret || (len(want.Sealed.Data) == 0) != (got.Sealed.Data == nil) {
		t.Errorf("%s: %s\nwant %s", how, describe(got), describe(want))
	}
}

// hostileText is a random valid UTF-8 text without NUL: empty, 1 MB long,
// or of runes from every plane and of the characters SQL and JSON treat
// apart.
func hostileText(rng *rand.Rand) string {
	switch rng.Intn(8) {
	case 0:
		return ""
	case 1:
		return strings.Repeat("é\U0001F600'\"\\", 1<<20/9) // 1 MB and more
	}
	pieces := []string{"'", "''", `"`, `\`, `\\0`, "%", "_", "$1", "?1", "{schema}", "{prefix}", "--", "/*", "*/", ";",
		"\u0301", "\u200d", "\u202e", "\ufeff", "\ufffd", "\U0010ffff", "\U0001F600", "\r\n", "\t", "\x01", "\x7f", "\u0080", "𝄞"}
	var b strings.Builder
	for range rng.Intn(40) {
		if rng.Intn(3) == 0 {
			b.WriteString(pieces[rng.Intn(len(pieces))])
			continue
		}
		r := rune(1 + rng.Intn(0x10ffff))
		if r >= 0xd800 && r <= 0xdfff { // surrogates are not runes of UTF-8
			r = 'x'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// hostileBlob is a random sealed blob of 0 to 64 KiB.
func hostileBlob(rng *rand.Rand) []byte {
	switch rng.Intn(6) {
	case 0:
		return nil
	case 1:
		all := make([]byte, 256*(1+rng.Intn(4))) // every byte value, in order
		for i := range all {
			all[i] = byte(i)
		}
		return all
	case 2:
		return bytes.Repeat([]byte{0}, 1+rng.Intn(64<<10))
	case 3:
		return bytes.Repeat([]byte{0xff}, 64<<10)
	}
	b := make([]byte, rng.Intn(64<<10+1))
	rng.Read(b)
	return b
}

// sameSettings reports whether got holds want's Filter, Envelope,
// Signature and sealed secrets, byte for byte.
func sameSettings(got, want store.Endpoint) bool {
	return got.Filter == want.Filter && got.Envelope == want.Envelope && got.Signature == want.Signature &&
		bytes.Equal(got.Sealed.Data, want.Sealed.Data) && got.Sealed.Key == want.Sealed.Key &&
		got.Sealed.Fingerprint == want.Sealed.Fingerprint && got.Sealed.Auth == want.Sealed.Auth
}

// describe names e's settings and sealed secrets by their lengths and
// starts (never its clear secrets), for failures of texts too long to print.
func describe(e store.Endpoint) string {
	return fmt.Sprintf("{filter %s envelope %s signature %s sealed %s}", short(e.Filter), short(e.Envelope), short(e.Signature), describeSealed(e.Sealed))
}

func describeSealed(s store.SealedSecrets) string {
	return fmt.Sprintf("{data %s key %s fingerprint %s auth %s}", short(string(s.Data)), short(s.Key), short(s.Fingerprint), short(s.Auth))
}

func short(s string) string {
	return fmt.Sprintf("%d bytes %.24q", len(s), s)
}

func getEndpoint(t *testing.T, s store.Endpoints, id uuid.UUID) store.Endpoint {
	t.Helper()
	e, err := s.EndpointGet(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// unchanged fails t unless the endpoint reads as it did (want), every
// field, its UpdatedAt included.
func unchanged(t *testing.T, s store.Endpoints, want store.Endpoint) {
	t.Helper()
	got := getEndpoint(t, s, want.ID)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("endpoint changed: %s (updated %v)\nwant %s (updated %v)", describe(got), got.UpdatedAt, describe(want), want.UpdatedAt)
	}
}
