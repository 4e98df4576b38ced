package sqlstore

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/postbox-go/postbox/store"
)

func TestErrorText(t *testing.T) {
	if got, want := errorText("bad\x00body \xff end"), store.CleanErrorText("bad\x00body \xff end"); got != want {
		t.Fatalf("errorText %q, want the cleaned text %q", got, want)
	}
	// A 3-byte character straddles the limit: it goes whole.
	long := strings.Repeat("a", lastErrorMax-1) + "€" + "tail"
	got := errorText(long)
	if len(got) != lastErrorMax-1 || !utf8.ValidString(got) {
		t.Fatalf("errorText of %d bytes: %d bytes, valid %v; want %d valid bytes", len(long), len(got), utf8.ValidString(got), lastErrorMax-1)
	}
	if short := "status 500"; errorText(short) != short {
		t.Fatalf("errorText changed a short clean text: %q", errorText(short))
	}
}

func TestSequenceStatus(t *testing.T) {
	for _, c := range []struct {
		seq, last int64
		want      store.InboxStatus
	}{
		{1, 0, store.InboxTaken},
		{5, 4, store.InboxTaken},
		{4, 4, store.InboxSeqApplied},
		{2, 4, store.InboxSeqApplied},
		{6, 4, store.InboxOutOfOrder},
	} {
		if got := sequenceStatus(c.seq, c.last); got != c.want {
			t.Errorf("sequenceStatus(%d, %d) = %v, want %v", c.seq, c.last, got, c.want)
		}
	}
}
