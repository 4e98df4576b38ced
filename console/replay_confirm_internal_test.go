package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/store/sqlite"
)

// A count that its time bound stopped before it found an event is no
// "nothing to replay": the confirmation says "more than 0 events" and
// offers the replay, which sends every one.
func TestReplayConfirmCountCutShortAtZero(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "console.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c, err := New(Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		more          bool
		want, wantNot string
	}{
		{true, `id="confirm-button"`, `id="confirm-none"`},
		{false, `id="confirm-none"`, `id="confirm-button"`},
	} {
		w := httptest.NewRecorder()
		c.render(w, httptest.NewRequest(http.MethodPost, "/replay", nil), http.StatusOK, "replay_confirm",
			replayConfirmPage{Describe: "every delivered event", More: tc.more, Back: "/replay"})
		body := w.Body.String()
		if !strings.Contains(body, tc.want) || strings.Contains(body, tc.wantNot) {
			t.Errorf("count 0, more %v: the confirmation lacks %s or shows %s:\n%s", tc.more, tc.want, tc.wantNot, body)
		}
		if tc.more && !strings.Contains(body, "more than 0 events") {
			t.Errorf("count 0 cut short: the title does not say more than 0 events:\n%s", body)
		}
	}
}
