package replay

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/store"
)

// pages hands out its pages one by one, then none.
type pages [][]store.HistoryEvent

func (p *pages) next(context.Context) ([]store.HistoryEvent, error) {
	if len(*p) == 0 {
		return nil, nil
	}
	b := (*p)[0]
	*p = (*p)[1:]
	return b, nil
}

func ev(id uuid.UUID) store.HistoryEvent { return store.HistoryEvent{Event: postbox.Event{ID: id}} }

// The all-zero id is an event's id too (a plain-SQL producer may write
// it): a replay from the first hands it out, once, whichever stream holds
// it; a replay resumed after it does not.
func TestMergeHandsOutTheZeroID(t *testing.T) {
	one := uuid.MustParse("019ce000-0000-7000-8000-000000000001")
	for name, resume := range map[string]bool{"from the first": false, "resumed after it": true} {
		t.Run(name, func(t *testing.T) {
			table := &pages{{ev(uuid.Nil), ev(one)}}
			archive := &pages{{ev(uuid.Nil)}}
			m := &merge{table: &stream{what: "table", src: table}, archive: &stream{what: "archive", src: archive}, from: !resume}
			b, err := m.next(context.Background(), 10)
			if err != nil {
				t.Fatal(err)
			}
			var got []uuid.UUID
			for _, e := range b.events {
				got = append(got, e.ID)
			}
			want := []uuid.UUID{uuid.Nil, one}
			if resume {
				want = want[1:]
			}
			if len(got) != len(want) || got[0] != want[0] {
				t.Fatalf("merge handed out %v, want %v", got, want)
			}
		})
	}
}
