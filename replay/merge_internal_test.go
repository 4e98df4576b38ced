package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// id is the n-th id of these tests: ids order as their numbers do.
func id(n int) uuid.UUID { return uuid.UUID{14: byte(n >> 8), 15: byte(n)} }

func events(ns ...int) []store.HistoryEvent {
	out := make([]store.HistoryEvent, len(ns))
	for i, n := range ns {
		out[i] = store.HistoryEvent{Event: postbox.Event{ID: id(n), EventType: fmt.Sprint("t", n)}}
	}
	return out
}

// pages is a source that hands out its batches in turn.
type pages struct{ batches [][]store.HistoryEvent }

func (p *pages) next(context.Context) ([]store.HistoryEvent, error) {
	if len(p.batches) == 0 {
		return nil, nil
	}
	b := p.batches[0]
	p.batches = p.batches[1:]
	return b, nil
}

// fakeRead is an archive's Read over batches, handing each through one
// slice it reuses, as a reader decoding into a buffer may; it closes
// returned when it returns.
func fakeRead(batches [][]store.HistoryEvent, returned chan<- error) readFunc {
	return func(ctx context.Context, p archive.ReadParams, fn func([]store.HistoryEvent) error) error {
		var err error
		defer func() { returned <- err }()
		buf := make([]store.HistoryEvent, 0, 8)
		for _, b := range batches {
			buf = append(buf[:0], b...)
			if err = fn(buf); err != nil {
				return err
			}
		}
		return nil
	}
}

func drain(t *testing.T, m *merge, n int) (ids []int, archived, both int) {
	t.Helper()
	for {
		b, err := m.next(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(b.events) == 0 {
			return ids, archived, both
		}
		if len(b.events) > n {
			t.Fatalf("batch of %d, want at most %d", len(b.events), n)
		}
		for _, e := range b.events {
			ids = append(ids, int(e.ID[14])<<8|int(e.ID[15]))
		}
		archived += b.archived
		both += b.both
	}
}

// The merge of the table's pages and the archive's batches (read in a
// goroutine, its slice reused) hands out every id once, in order, in
// batches of at most n: an id in both once, counted in both; ids at or
// before After are dropped.
func TestMergeByID(t *testing.T) {
	for _, tc := range []struct {
		after    int
		want     string
		archived int
		both     int
		batch    int
	}{
		{after: 0, want: "[1 2 3 5 6 7 8 9 10]", archived: 4, both: 1, batch: 2},
		{after: 0, want: "[1 2 3 5 6 7 8 9 10]", archived: 4, both: 1, batch: 1000},
		{after: 3, want: "[5 6 7 8 9 10]", archived: 3, batch: 4},
	} {
		returned := make(chan error, 1)
		src := startArchive(context.Background(), fakeRead([][]store.HistoryEvent{events(2, 3), {}, events(6, 8, 9)}, returned), archive.ReadParams{})
		m := &merge{after: id(tc.after),
			table:   &stream{what: "table", src: &pages{batches: [][]store.HistoryEvent{events(1, 3, 5), events(7, 10)}}},
			archive: &stream{what: "archive", src: src}}
		got, archived, both := drain(t, m, tc.batch)
		src.stop()
		if fmt.Sprint(got) != tc.want || archived != tc.archived || both != tc.both {
			t.Fatalf("after %d: ids %v, archived %d, both %d; want %s, %d, %d", tc.after, got, archived, both, tc.want, tc.archived, tc.both)
		}
		if err := <-returned; err != nil {
			t.Fatalf("archive read: %v", err)
		}
	}
}

// Stopping the merge before the archive's end ends its Read (its fn
// returns the cancellation) and its goroutine.
func TestArchiveSourceStops(t *testing.T) {
	returned := make(chan error, 1)
	src := startArchive(context.Background(), fakeRead([][]store.HistoryEvent{events(1), events(2), events(3), events(4)}, returned), archive.ReadParams{})
	if b, err := src.next(context.Background()); err != nil || len(b) != 1 || b[0].ID != id(1) {
		t.Fatalf("first batch %v, %v", b, err)
	}
	src.stop()
	if err := <-returned; !errors.Is(err, context.Canceled) {
		t.Fatalf("archive read after stop returned %v, want context.Canceled", err)
	}
}

// A stream out of id order, or an archive's error, stops the merge with an
// error that says which reader.
func TestMergeRefusesDisorderAndReportsErrors(t *testing.T) {
	m := &merge{table: &stream{what: "table", src: &pages{batches: [][]store.HistoryEvent{events(1, 4), events(3)}}}}
	_, err := m.next(context.Background(), 10)
	if err == nil || !strings.Contains(err.Error(), "table") || !strings.Contains(err.Error(), "not in id order") {
		t.Fatalf("disordered table: %v", err)
	}
	boom := errors.New("object events/x corrupt")
	read := func(ctx context.Context, p archive.ReadParams, fn func([]store.HistoryEvent) error) error {
		if err := fn(events(1)); err != nil {
			return err
		}
		return boom
	}
	src := startArchive(context.Background(), read, archive.ReadParams{})
	defer src.stop()
	m = &merge{archive: &stream{what: "archive", src: src}}
	if _, err := m.next(context.Background(), 10); !errors.Is(err, boom) || !strings.Contains(err.Error(), "archive") {
		t.Fatalf("archive error: %v", err)
	}
}
