package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/store/postgres"
)

// apiDocSection is the section of docs/endpoints.md whose curl examples
// TestConsoleAPIDocExamples runs.
const apiDocSection = "## Managing endpoints over HTTP (the console's JSON API)"

// apiDocBlocks are the ```sh blocks of the section.
func apiDocBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "endpoints.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(b), "\n"+apiDocSection+"\n")
	if !found {
		t.Fatalf("docs/endpoints.md has no section %q", apiDocSection)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	var blocks []string
	for _, m := range regexp.MustCompile("(?s)\n```sh\n(.*?)\n```\n").FindAllStringSubmatch(section, -1) {
		blocks = append(blocks, m[1])
	}
	if !slices.ContainsFunc(blocks, func(b string) bool { return strings.Contains(b, "curl ") }) {
		t.Fatalf("the section %q has no ```sh block with curl", apiDocSection)
	}
	return blocks
}

// documentedStatus are the statuses a block's comments say its requests
// answer ("# → 201 Created: ..."), in order.
var documentedStatus = regexp.MustCompile(`(?m)^# → (\d{3}) `)

// statusMark is what the curl the blocks run prints after each answer.
const statusMark = "postbox-docs-test-status"

// curlShim is a directory whose curl runs the real one and prints, after
// each answer, statusMark and its status.
func curlShim(t *testing.T) string {
	t.Helper()
	real, err := exec.LookPath("curl")
	if err != nil {
		t.Fatalf("the docs' examples need curl (apt-get install curl): %v", err)
	}
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\nexec %s --write-out '\\n%s %%{http_code}\\n' \"$@\"\n", real, statusMark)
	if err := os.WriteFile(filepath.Join(dir, "curl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The curl examples of docs/endpoints.md's API section, run as written
// (sh, real curl) against `postbox console` (the binary) on PostgreSQL:
// each exits 0 and answers the status its comment documents, and they do
// what they say: the endpoint is added, patched, rotated, tested (the
// receiver gets the test event with its static header), disabled, and
// its dead letters listed and retried. The console's log holds no secret.
func TestConsoleAPIDocExamples(t *testing.T) {
	s, db := schemaStore(t)
	var (
		mu  sync.Mutex
		got []http.Header
	)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	// The examples add an endpoint on 127.0.0.1 with allow_private: the
	// operator lets the console give it.
	logs, addr := startConsole(t, append(db, "--addr", "127.0.0.1:0", "--token", consoleToken, "--allow-private-endpoints")...)
	if !regexp.MustCompile(`endpoints="manage \(key k-[^"]+\)"`).MatchString(logs.String()) {
		t.Fatalf("the start line does not say the console manages endpoints with its key:\n%s", logs)
	}
	shim := curlShim(t)
	env := []string{"PATH=" + shim + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"POSTBOX_CONSOLE=http://" + addr, "POSTBOX_TOKEN=" + consoleToken, "WEBHOOK_URL=" + recv.URL + "/hook"}
	var answers strings.Builder
	seeded := false
	for i, block := range apiDocBlocks(t) {
		want := documentedStatus.FindAllStringSubmatch(block, -1)
		if strings.Count(block, "curl ") != len(want) {
			t.Fatalf("block %d: %d curl commands, %d documented statuses (# → NNN):\n%s", i, strings.Count(block, "curl "), len(want), block)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "sh", "-c", block)
		cmd.Env = env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		cancel()
		answers.WriteString(out.String())
		if err != nil {
			t.Fatalf("block %d exited with %v:\n%s\nstdout:\n%s\nstderr:\n%s", i, err, block, out.String(), errOut.String())
		}
		statuses := regexp.MustCompile(statusMark+` (\d{3})`).FindAllStringSubmatch(out.String(), -1)
		if len(statuses) != len(want) {
			t.Fatalf("block %d: %d answers, want %d:\n%s", i, len(statuses), len(want), out.String())
		}
		for j := range want {
			if statuses[j][1] != want[j][1] {
				t.Fatalf("block %d, request %d: status %s, documented %s:\n%s\nanswer:\n%s", i, j, statuses[j][1], want[j][1], block, out.String())
			}
		}
		// Once the endpoint is there, two of its deliveries fail, for
		// the dead-letter examples.
		if id := warehouseID(t, s); id != uuid.Nil && !seeded {
			seeded = true
			for _, err := range []string{"HTTP 502 from the warehouse", "timeout"} {
				failDelivery(t, s, uuid.New(), id, "order.paid", err)
			}
		}
	}
	id := warehouseID(t, s)
	var state, filter string
	if err := s.Pool().QueryRow(context.Background(), "select state, filter from "+s.Table("endpoints")+" where id = $1", id).Scan(&state, &filter); err != nil {
		t.Fatal(err)
	}
	if state != "disabled" || filter != "payload.total > 100" {
		t.Fatalf("after the examples: state %q, filter %q; want disabled, the filter patched", state, filter)
	}
	var failed, pending int
	if err := s.Pool().QueryRow(context.Background(), "select count(*) filter (where status = 'failed'), count(*) filter (where status = 'pending') from "+
		s.Table("endpoint_deliveries")+" where endpoint_id = $1", id).Scan(&failed, &pending); err != nil {
		t.Fatal(err)
	}
	if failed != 0 || pending != 2 {
		t.Fatalf("after the retry example: %d failed, %d pending deliveries; want 0 and 2", failed, pending)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].Get("X-Api-Key") != "the-receivers-api-key" || got[0].Get("webhook-signature") == "" {
		t.Fatalf("the receiver got %v; want the test event, signed, with the static header", got)
	}
	if n := strings.Count(answers.String(), "whsec_"); n != 2 {
		t.Errorf("the answers hold %d signing secrets, want 2 (the one generated on create, the one generated by the rotation)", n)
	}
	if log := logs.String(); strings.Contains(log, "whsec_") || strings.Contains(log, consoleToken) || strings.Contains(log, "the-receivers-api-key") {
		t.Errorf("the console's log holds a secret:\n%s", log)
	}
}

// warehouseID is the id of the endpoint named warehouse; uuid.Nil before
// there is one.
func warehouseID(t *testing.T, s *postgres.Store) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	err := s.Pool().QueryRow(context.Background(), "select id from "+s.Table("endpoints")+" where name = 'warehouse'").Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The start line says what the console will do with endpoints: manage
// them with its key, refuse what needs one without it, or nothing
// (read-only).
func TestConsoleAPIStartLine(t *testing.T) {
	_, db := schemaStore(t)
	logs, _ := startConsole(t, append(db, "--addr", "127.0.0.1:0", "--read-only")...)
	if !strings.Contains(logs.String(), `endpoints=read-only`) {
		t.Fatalf("read-only console's start line:\n%s", logs)
	}
	noKey := &logbuf.Buffer{}
	cmd := commandWithoutKey(append([]string{"console", "--addr", "127.0.0.1:0"}, db...)...)
	cmd.Stderr = noKey
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	waitFor(t, "the console's start", 15*time.Second, func() bool { return strings.Contains(noKey.String(), "console on http://") })
	if !strings.Contains(noKey.String(), `endpoints="no secrets key: adding, rotating and testing endpoints refused"`) {
		t.Fatalf("the start line without a key:\n%s", noKey)
	}
}

// postEndpoint adds an endpoint through the API of the console at addr,
// and returns the status and the problem's setting ("" for none).
func postEndpoint(t *testing.T, addr, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/api/endpoints", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var problem struct {
		Setting string `json:"setting"`
	}
	_ = json.NewDecoder(res.Body).Decode(&problem)
	return res.StatusCode, problem.Setting
}

// The console registers endpoints as its relay's guard and its test
// client would reach them: allow_private only with
// --allow-private-endpoints, a broker's host checked as a webhook's, the
// --allow-cidr ranges allowed.
func TestConsoleAPIRegistrationGuard(t *testing.T) {
	_, db := schemaStore(t)
	const (
		private = `{"name":"internal","url":"https://93.184.215.14/hook","allow_private":true}`
		broker  = `{"name":"broker","url":"nats://10.0.0.5:4222?subject=orders"}`
	)
	_, addr := startConsole(t, append(db, "--addr", "127.0.0.1:0", "--token", consoleToken)...)
	for body, want := range map[string]string{private: "allow_private", broker: "url"} {
		if status, setting := postEndpoint(t, addr, body); status != http.StatusUnprocessableEntity || setting != want {
			t.Errorf("%s: %d, setting %q; want 422 on %s", body, status, setting, want)
		}
	}
	_, addr = startConsole(t, append(db, "--addr", "127.0.0.1:0", "--token", consoleToken, "--allow-private-endpoints", "--allow-cidr", "10.0.0.0/8")...)
	for _, body := range []string{private, broker} {
		if status, setting := postEndpoint(t, addr, body); status != http.StatusCreated {
			t.Errorf("with --allow-private-endpoints --allow-cidr 10.0.0.0/8: %s: %d (setting %q), want 201", body, status, setting)
		}
	}
}
