package postgres

import (
	"testing"

	"github.com/google/uuid"
)

func TestUUIDArrayIsTheTextFormOfEveryList(t *testing.T) {
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	cases := []struct {
		lists [][]uuid.UUID
		want  string
	}{
		{nil, "{}"},
		{[][]uuid.UUID{nil, {}}, "{}"},
		{[][]uuid.UUID{{a}}, "{" + a.String() + "}"},
		{[][]uuid.UUID{{a, b}, nil, {c}}, "{" + a.String() + "," + b.String() + "," + c.String() + "}"},
	}
	for _, tc := range cases {
		if got := uuidArray(tc.lists...); got != tc.want {
			t.Errorf("uuidArray(%v) = %q, want %q", tc.lists, got, tc.want)
		}
	}
}

func BenchmarkUUIDArray(b *testing.B) {
	ids := make([]uuid.UUID, 1000)
	for i := range ids {
		ids[i] = uuid.New()
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = uuidArray(ids, ids)
	}
}
