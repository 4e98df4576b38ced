package main_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// The shipped console over a sources file: one login (the bearer token)
// for every source; each source's events under the same routes, chosen by
// X-Postbox-Source; a source not migrated and one whose database refuses
// connections answer 503 alone; a source removed from the file leaves
// the list without a restart; no page, answer or log line holds a
// database's password.
func TestConsoleOverSources(t *testing.T) {
	const password = "s3cret-source-password"
	dbURL := strings.Replace(pgtest.Database(t), "postgres@", "postgres:"+password+"@", 1)
	if !strings.Contains(dbURL, password) {
		t.Fatalf("cannot add a password to %s", dbURL)
	}
	a, b := newSource(t, "a", dbURL), newSource(t, "b", dbURL)
	for _, s := range []source{a, b} {
		if err := s.store.Driver().Enqueue(context.Background(), postbox.Event{ID: postbox.NewID(), AggregateType: "order", AggregateID: "1",
			EventType: "only." + s.name, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	unmigrated := "  - name: unmigrated\n    db: " + dbURL + "\n    schema: never_migrated\n"
	refused := "  - name: refused\n    db: postgres://postgres:" + password + "@127.0.0.1:1/x\n    schema: postbox\n"
	file := filepath.Join(t.TempDir(), "sources.yaml")
	writeSources(t, file, unmigrated+refused, a, b)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(consoleToken), 0o600); err != nil {
		t.Fatal(err)
	}
	logs, addr := startConsole(t, "--sources", file, "--token-file", tokenFile, "--addr", "127.0.0.1:0", "--sources-every", "100ms")
	base := "http://" + addr
	var answers strings.Builder
	get := func(path, source string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+consoleToken)
		if source != "" {
			req.Header.Set("X-Postbox-Source", source)
		}
		res, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		answers.WriteString(string(body))
		return res.StatusCode, string(body)
	}
	type list struct {
		Current string `json:"current"`
		Sources []struct {
			Name, Database, State string
		} `json:"sources"`
	}
	sources := func() list {
		t.Helper()
		code, body := get("/api/sources", "")
		var l list
		if err := json.Unmarshal([]byte(body), &l); code != http.StatusOK || err != nil {
			t.Fatalf("GET /api/sources: %d %s", code, body)
		}
		return l
	}
	if l := sources(); l.Current != "a" || len(l.Sources) != 4 {
		t.Fatalf("the sources: %+v", l)
	}
	for _, name := range []string{"a", "b"} {
		code, body := get("/api/stats", name)
		if code != http.StatusOK || !strings.Contains(body, "only."+name) {
			t.Fatalf("%s's stats: %d %s", name, code, body)
		}
		if code, body = get("/", name); code != http.StatusOK || !strings.Contains(body, `id="current-source">`+name+`<`) {
			t.Fatalf("%s's overview: %d\n%s", name, code, body)
		}
	}
	for _, name := range []string{"unmigrated", "refused"} {
		if code, body := get("/api/stats", name); code != http.StatusServiceUnavailable || !strings.Contains(body, "source-unavailable") {
			t.Fatalf("%s's stats: %d %s", name, code, body)
		}
	}
	if code, body := get("/api/stats", "a"); code != http.StatusOK {
		t.Fatalf("a after the broken ones: %d %s", code, body)
	}
	writeSources(t, file, refused, a)
	waitFor(t, "b and unmigrated leave the list", 10*time.Second, func() bool { return len(sources().Sources) == 2 })
	if code, _ := get("/api/stats", "b"); code != http.StatusBadRequest {
		t.Fatalf("b removed: %d, want 400", code)
	}
	log := logs.String()
	for _, want := range []string{"console on http://", "--sources " + file, "console: source opened"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, password) || strings.Contains(answers.String(), password) || strings.Contains(log, consoleToken) {
		t.Fatalf("a secret shows:\nlog:\n%s\nanswers:\n%s", log, answers.String())
	}
}

// The flags of many sources are refused where they do not apply.
func TestConsoleSourcesFlagRefusals(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sources.yaml")
	db := "sqlite:" + filepath.Join(t.TempDir(), "console.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--sources", file, "--db", pgtest.URL()}, "--db is only the registry of --sources-query"},
		{[]string{"--sources", file, "--sources-query", "select 1"}, "give --sources or --sources-query, not both"},
		{[]string{"--sources-query", "select db from t"}, "give --db"},
		{[]string{"--sources", file, "--archive", "file:///tmp/x"}, "--archive does not apply"},
		{[]string{"--sources", file, "--source-idle", "0s"}, "must be positive"},
		{[]string{"--db", db, "--source-idle", "1m"}, "--source-idle applies only with --sources"},
		{[]string{"--db", db, "--sources-every", "1m"}, "--sources-every applies only with --sources"},
	} {
		if line := usageError(t, append([]string{"console"}, c.args...)...); !strings.Contains(line, c.want) {
			t.Errorf("postbox console %s: %q, want %q", strings.Join(c.args, " "), line, c.want)
		}
	}
}
