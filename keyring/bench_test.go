package keyring_test

import (
	"bytes"
	"testing"
)

// A 256-byte plaintext: a webhook secret or a set of auth headers.
var benchPlaintext = bytes.Repeat([]byte("s"), 256)

func BenchmarkSeal(b *testing.B) {
	text, _ := newKey(b)
	r := mustParse(b, text)
	aad := []byte("01J8Z3Q4X6ENDPOINTID0000000")
	b.SetBytes(int64(len(benchPlaintext)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Seal(benchPlaintext, aad); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	text, _ := newKey(b)
	previous, _ := newKey(b)
	r := mustParse(b, text+","+previous)
	aad := []byte("01J8Z3Q4X6ENDPOINTID0000000")
	sealed, err := r.Seal(benchPlaintext, aad)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(benchPlaintext)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Open(sealed, aad); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewrap(b *testing.B) {
	oldKey, _ := newKey(b)
	newer, _ := newKey(b)
	old, rotating := mustParse(b, oldKey), mustParse(b, newer+","+oldKey)
	aad := []byte("01J8Z3Q4X6ENDPOINTID0000000")
	sealed, err := old.Seal(benchPlaintext, aad)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, changed, err := rotating.Rewrap(sealed, aad); err != nil || !changed {
			b.Fatal(changed, err)
		}
	}
}
