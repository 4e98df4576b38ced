package postgres

import (
	"encoding/hex"
	"strings"

	"github.com/google/uuid"
)

// uuidArray is the text form of a uuid[] value holding the ids of each
// list in turn: "{6f1c...,0b2e...}". The relay settles and releases its
// events by the thousand: sent as text (pgx sends a string argument in text
// format), an array costs one allocation, where pgx's binary encoding of a
// [][16]byte allocates for each element.
func uuidArray(lists ...[]uuid.UUID) string {
	n := 0
	for _, ids := range lists {
		n += len(ids)
	}
	if n == 0 {
		return "{}"
	}
	var b strings.Builder
	b.Grow(2 + n*37)
	b.WriteByte('{')
	var text [36]byte
	first := true
	for _, ids := range lists {
		for _, id := range ids {
			if !first {
				b.WriteByte(',')
			}
			first = false
			encodeUUID(&text, id)
			b.Write(text[:])
		}
	}
	b.WriteByte('}')
	return b.String()
}

// encodeUUID writes id in its canonical text form (8-4-4-4-12 hex digits).
func encodeUUID(dst *[36]byte, id uuid.UUID) {
	hex.Encode(dst[0:8], id[0:4])
	dst[8] = '-'
	hex.Encode(dst[9:13], id[4:6])
	dst[13] = '-'
	hex.Encode(dst[14:18], id[6:8])
	dst[18] = '-'
	hex.Encode(dst[19:23], id[8:10])
	dst[23] = '-'
	hex.Encode(dst[24:], id[10:])
}
