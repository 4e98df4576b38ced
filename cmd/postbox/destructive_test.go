package main_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/sqlite"
)

// A destructive command refuses a filter given empty (an unset shell
// variable: --group "$G"), on the command line or in its environment
// variable, instead of reading it as no filter; failed retry refuses it
// too, even beside --all. Nothing is deleted nor retried.
func TestDestructiveCommandsRefuseEmptyFilters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ids := failEvents(t, s.Driver(), "order.paid", 3, func(i int) string { return "permanent: status 410" })

	for _, args := range [][]string{
		{"failed", "purge", "--older-than", "0s", "--group", ""},
		{"failed", "purge", "--older-than", "0s", "--type", ""},
		{"failed", "purge", "--older-than", "0s", "--type="},
		{"failed", "purge", "--older-than", "", "--type", "order.paid"},
		{"failed", "retry", "--all", "--group", ""},
		{"failed", "retry", "--all", "--type", ""},
		{"relay", "--wal-drop-slot", "--wal-slot", ""},
	} {
		last := usageError(t, append(args, db...)...)
		if !strings.Contains(last, "empty") && !strings.Contains(last, "--older-than") {
			t.Errorf("postbox %v said %q, want the empty flag named", args, last)
		}
	}
	if last := usageError(t, append([]string{"endpoints", "remove", ""}, db...)...); !strings.Contains(last, "not an endpoint id") {
		t.Errorf("endpoints remove \"\" said %q, want the empty id refused", last)
	}
	for _, env := range []string{"POSTBOX_GROUP=", "POSTBOX_TYPE="} {
		cmd := command(append([]string{"failed", "purge", "--older-than", "0s"}, db...)...)
		cmd.Env = append(cmd.Env, env)
		if last := runFailsWith(t, cmd, 2); !strings.Contains(last, "empty") {
			t.Errorf("purge with $%s said %q, want the empty variable named", env, last)
		}
	}
	for _, id := range ids {
		if r, err := s.Get(context.Background(), mustUUID(t, id)); err != nil || r.Status != store.StatusFailed {
			t.Fatalf("event %s after the refused commands: %+v, %v", id, r, err)
		}
	}
}

// failed purge --dry-run says how many failed events it would delete and
// which (at most 20 listed), and deletes none.
func TestFailedPurgeDryRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "outbox.db")
	db := []string{"--db", "sqlite:" + path}
	runOK(t, append([]string{"migrate"}, db...)...)
	s, err := sqlite.Open(context.Background(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	paid := failEvents(t, s.Driver(), "order.paid", 25, func(i int) string { return fmt.Sprintf("permanent: status 410: order %d", i) })
	failEvents(t, s.Driver(), "order.created", 2, func(int) string { return "timeout" })

	out := runOK(t, append([]string{"failed", "purge", "--older-than", "0s", "--type", "order.paid", "--dry-run"}, db...)...)
	if !strings.Contains(out, "would purge 25 failed events") || !strings.Contains(out, "and 5 more") {
		t.Fatalf("purge --dry-run printed:\n%s", out)
	}
	listed := 0
	for _, id := range paid {
		if strings.Contains(out, id) {
			listed++
		}
	}
	if listed != 20 {
		t.Fatalf("purge --dry-run listed %d of the events, want 20:\n%s", listed, out)
	}
	var groups groupsJSON
	jsonOut(t, &groups, append([]string{"failed", "list", "--group-by", "error", "--json"}, db...)...)
	timeouts := ""
	for _, g := range groups.Groups {
		if g.Fingerprint == "timeout" {
			timeouts = g.ID
		}
	}
	out = runOK(t, append([]string{"failed", "purge", "--older-than", "0s", "--group", timeouts, "--dry-run"}, db...)...)
	if !strings.Contains(out, "would purge 2 failed events") || strings.Contains(out, paid[0]) {
		t.Fatalf("purge --group --dry-run printed:\n%s", out)
	}
	if st := status(t, db); st["failed"] != 27 {
		t.Fatalf("after the dry runs: %v, want 27 failed events still there", st)
	}
}

// endpoints remove --dry-run names the endpoint and what would go with it,
// and removes nothing.
func TestEndpointsRemoveDryRun(t *testing.T) {
	_, db := schemaStore(t)
	id := addEndpointCmd(t, db, "--url", "https://user:hunter2@partner.example/hooks", "--name", "partner")
	out := runOK(t, append([]string{"endpoints", "remove", "--dry-run", id.String()}, db...)...)
	if !strings.Contains(out, "would remove endpoint "+id.String()) || !strings.Contains(out, "0 deliveries") || strings.Contains(out, "hunter2") {
		t.Fatalf("remove --dry-run printed:\n%s", out)
	}
	if out := runOK(t, append([]string{"endpoints", "show", id.String()}, db...)...); !strings.Contains(out, "partner") {
		t.Fatalf("the endpoint is gone after a dry run:\n%s", out)
	}
}

// runFailsWith runs cmd, which must exit with code, and returns the last
// line of its stderr.
func runFailsWith(t *testing.T, cmd *exec.Cmd, code int) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != code {
		t.Fatalf("postbox %v: %v, want exit status %d\n%s", cmd.Args[1:], err, code, out)
	}
	last := strings.TrimSpace(string(out))
	if i := strings.LastIndex(last, "\n"); i >= 0 {
		last = last[i+1:]
	}
	return last
}
