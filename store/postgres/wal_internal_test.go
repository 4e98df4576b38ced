package postgres

import (
	"context"
	"testing"
)

// An insert whose id the stream cannot read (a null, text that is no
// UUID) is left to the polling claims: the stream goes on, with the other
// events of the transaction.
func TestWALDecodeSkipsAnUnreadableID(t *testing.T) {
	w := &WAL{slot: "test"}
	idColumn := map[uint32]int{1: 0}
	txn := &committed{xid: 7}
	txns := make(chan committed, 1)
	insert := func(col ...byte) []byte { // relation 1, one column
		return append([]byte{'I', 0, 0, 0, 1, 'N', 0, 1}, col...)
	}
	text := func(s string) []byte {
		return append([]byte{'t', 0, 0, 0, byte(len(s))}, s...)
	}
	for _, msg := range [][]byte{
		insert('n'),
		insert(text("not-a-uuid")...),
		insert(text("0190a5c4-1b2c-7d3e-8f40-5a6b7c8d9e0f")...),
	} {
		if err := w.decode(context.Background(), msg, idColumn, &txn, txns); err != nil {
			t.Fatalf("decode %q: %v", msg, err)
		}
	}
	if len(txn.ids) != 1 || txn.ids[0].String() != "0190a5c4-1b2c-7d3e-8f40-5a6b7c8d9e0f" {
		t.Fatalf("ids %v, want the readable one alone", txn.ids)
	}
}
