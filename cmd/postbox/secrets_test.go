package main_test

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

// secretRole is a role with a password, made for TestNoCommandPrintsThePassword
// (the test server trusts every connection: the password is never checked,
// but it is in every URL the commands are given).
const (
	secretRole     = "pbcli_secret"
	secretPassword = "pb@Pw9xK2sec"
	// secretMark is the part of the password that must appear nowhere,
	// whether it is printed as written, encoded or decoded.
	secretMark = "Pw9xK2"
)

// passwordRole makes secretRole, dropped when t ends.
func passwordRole(t *testing.T) {
	t.Helper()
	pool := pgtest.Pool(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `do $$ begin
		if not exists (select from pg_roles where rolname = '`+secretRole+`') then
			create role `+secretRole+` login password '`+secretPassword+`';
		end if; end $$`)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "drop role if exists "+secretRole) })
}

// runCaptured runs cmd to its end (killed after a minute) and returns its
// exit error with everything it printed.
func runCaptured(t *testing.T, cmd *exec.Cmd) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	return out.String(), err
}

// Every command that takes --db, given a URL with a password, fails on
// each error path without printing the password: not in stdout, not in
// stderr, not in its logs. The paths: a missing TLS file, an unreachable
// host, a database that does not exist, a role without the privileges
// (migrate, demo, bench, chaos), an unmigrated schema, a bad schema name,
// a password parameter, the keyword/value DSN form, and $DB_DSN.
func TestNoCommandPrintsThePassword(t *testing.T) {
	passwordRole(t)
	host := "127.0.0.1:5432"
	if u, err := url.Parse(pgtest.URL()); err == nil {
		host = u.Host
	}
	hostName, port, _ := strings.Cut(host, ":")
	userinfo := secretRole + ":" + url.QueryEscape(secretPassword)
	unmigrated := "pbcli_unmigrated_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	type dbCase struct {
		name   string
		db     []string
		env    bool // given as $DB_DSN
		noDB   bool // the commands without --schema take the URL alone
		schema bool // the case is its schema: skip the commands without --schema
	}
	cases := []dbCase{
		{name: "missing TLS file", db: []string{"postgres://" + userinfo + "@" + host + "/postgres?sslmode=verify-full&sslrootcert=/missing.pem"}},
		{name: "unreachable host", db: []string{"postgres://" + userinfo + "@127.0.0.1:1/postgres"}},
		{name: "no such database", db: []string{"postgres://" + userinfo + "@" + host + "/pbcli_no_such_db"}},
		{name: "unmigrated schema", db: []string{"postgres://" + userinfo + "@" + host + "/postgres", "--schema", unmigrated}, schema: true},
		{name: "bad schema name", db: []string{"postgres://" + userinfo + "@" + host + "/postgres", "--schema", "bad-name"}, schema: true},
		{name: "password parameter", db: []string{"postgres://" + secretRole + "@" + host + "/postgres?sslmode=verify-full&sslrootcert=/missing.pem&password=" + url.QueryEscape(secretPassword)}},
		{name: "keyword/value DSN", db: []string{"host=" + hostName + " port=" + port + " user=" + secretRole + " password='" + secretPassword + "' dbname=postgres"}},
		{name: "DB_DSN", db: []string{"postgres://" + userinfo + "@" + host + "/postgres?sslmode=verify-full&sslrootcert=/missing.pem"}, env: true},
	}
	id := uuid.NewString()
	commands := [][]string{
		{"migrate"},
		{"relay", "--sink", "http://127.0.0.1:1/hook", "--webhook-secret", secret},
		{"relay", "--endpoints"},
		{"relay", "--wal-drop-slot"},
		{"status"},
		{"failed", "list"},
		{"failed", "list", "--group-by", "error"},
		{"failed", "show", id},
		{"failed", "retry", "--all"},
		{"failed", "purge", "--older-than", "1h"},
		{"endpoints", "add", "--url", "https://example.com/hook"},
		{"endpoints", "list"},
		{"endpoints", "show", id},
		{"endpoints", "enable", id},
		{"endpoints", "disable", id},
		{"endpoints", "remove", id},
		{"endpoints", "retry", id},
		{"endpoints", "rotate-secret", id},
		{"endpoints", "update", id, "--rate", "1/s"},
		{"endpoints", "rekey"},
		{"endpoints", "rekey", "--dry-run"},
		{"endpoints", "test", id},
		{"endpoints", "attempts", id},
		{"console", "--addr", "127.0.0.1:0"},
	}
	// The commands with a --db of their own (no --schema): the URL alone.
	urlOnly := [][]string{
		{"demo", "--events", "10"},
		{"chaos", "--duration", "1s", "--relays", "1"},
		{"bench", "--quick", "--scenarios", "drain-noop"},
	}
	for _, c := range cases {
		for _, args := range append(commands, urlOnly...) {
			isURLOnly := args[0] == "demo" || args[0] == "chaos" || args[0] == "bench"
			if isURLOnly && (c.schema || c.env) {
				continue
			}
			cmd := command(append(args, "--db", c.db[0])...)
			if len(c.db) > 1 {
				cmd.Args = append(cmd.Args, c.db[1:]...)
			}
			if c.env {
				cmd = command(args...)
				cmd.Env = append(cmd.Env, "DB_DSN="+c.db[0])
			}
			start := time.Now()
			out, err := runCaptured(t, cmd)
			if d := time.Since(start); d > time.Second {
				t.Logf("SLOW %s %v %v", c.name, args, d)
			}
			// --wal-drop-slot drops what may not exist, and says so.
			if err == nil && args[len(args)-1] != "--wal-drop-slot" {
				t.Errorf("%s: postbox %s succeeded:\n%s", c.name, strings.Join(args, " "), out)
			}
			if strings.Contains(out, secretMark) {
				t.Errorf("%s: postbox %s printed the password:\n%s", c.name, strings.Join(args, " "), out)
			}
			if strings.Contains(out, "creates it") {
				t.Errorf("%s: postbox %s gave the hint for a missing SQLite file:\n%s", c.name, strings.Join(args, " "), out)
			}
		}
	}
}

// A read-only command given a SQLite file that does not exist says that
// migrate creates it (and creates nothing).
func TestReadOnlyCommandOnMissingSQLiteFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	out, err := runCaptured(t, command("status", "--db", "sqlite:"+path))
	if err == nil || !strings.Contains(out, "postbox migrate --db sqlite:"+path+" creates it") {
		t.Fatalf("status on a missing SQLite file: %v\n%s", err, out)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("status created %s: %v", path, err)
	}
}

// A NATS token is the user part of a sink URL without a password: no
// command prints it, from `sink setup` (what it made, or what is missing)
// to the relay's start error for a stream that does not exist.
func TestNoCommandPrintsASinkToken(t *testing.T) {
	_, db := schemaStore(t)
	const token = "T0kenXq7secret"
	subject := strings.ToLower(natstest.Name("token")) + ".{event_type}"
	sinkURL := "nats://" + token + "@" + strings.TrimPrefix(natstest.URL(), "nats://") + "?subject=" + subject
	_, js := natstest.Connect(t, natstest.URL())
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), strings.ToUpper(strings.Split(subject, ".")[0])) })
	for _, args := range [][]string{
		append([]string{"relay", "--sink", sinkURL}, db...),
		{"sink", "setup", "--dry-run", "--sink", sinkURL},
		{"sink", "setup", "--sink", sinkURL},
		{"sink", "setup", "--sink", sinkURL},
	} {
		out, _ := runCaptured(t, command(args...))
		if strings.Contains(out, token) {
			t.Errorf("postbox %s printed the token:\n%s", args[0]+" "+args[1], out)
		}
	}
}
