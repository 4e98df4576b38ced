package main_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/store"
)

// postbox console --archive: the replay action reads the archive a relay
// wrote ($POSTBOX_ARCHIVE works too), and the start line says so. Events
// only the archive holds (their rows gone) are written again by a replay
// started through the JSON API, pending, marked with the replay's name.
func TestConsoleReplaysFromTheArchive(t *testing.T) {
	s, db := schemaStore(t)
	url := "file://" + t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a, err := archive.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	gone := postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "7", EventType: "order.created", Payload: []byte(`{"n":7}`)}
	if err := a.Keep(ctx, []store.HistoryEvent{{Event: gone, CreatedAt: time.Now().Add(-time.Minute), ProcessedAt: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	a.Close()

	logs, addr := startConsole(t, append(db, "--addr", "127.0.0.1:0", "--token", consoleToken, "--archive", url)...)
	if !strings.Contains(logs.String(), `replay="from the outbox's table and the archive`) {
		t.Fatalf("the start line does not say the console replays from the archive:\n%s", logs)
	}
	call := func(method, path, body string) map[string]any {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+consoleToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode >= 300 {
			t.Fatalf("%s %s: %d, %v %v", method, path, res.StatusCode, out, err)
		}
		return out
	}
	if got := call(http.MethodPost, "/api/replays", `{"from": "archive", "dry_run": true}`); got["matched"] != 1.0 {
		t.Fatalf("dry run from the archive: %v, want 1", got)
	}
	started := call(http.MethodPost, "/api/replays", `{"from": "archive", "name": "from-the-archive"}`)
	var r map[string]any
	waitFor(t, "the replay's end", 20*time.Second, func() bool {
		r = call(http.MethodGet, "/api/replays/"+started["id"].(string), "")
		return r["state"] != "running"
	})
	if r["state"] != "done" || r["inserted"] != 1.0 {
		t.Fatalf("the replay from the archive: %v, want done, 1 written again", r)
	}
	rec, err := s.Get(ctx, gone.ID)
	if err != nil || rec.Status != store.StatusPending || rec.Headers[postbox.HeaderReplay] != "from-the-archive" {
		t.Fatalf("the archived event after the replay: %+v, %v", rec, err)
	}
}
