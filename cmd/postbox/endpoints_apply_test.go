package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// applyDatabases runs test on a PostgreSQL schema and a SQLite file, each
// migrated by the command.
func applyDatabases(t *testing.T, test func(t *testing.T, db []string)) {
	t.Run("postgres", func(t *testing.T) {
		_, db := schemaStore(t)
		test(t, db)
	})
	t.Run("sqlite", func(t *testing.T) {
		db := []string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "postbox.db")}
		runOK(t, append([]string{"migrate"}, db...)...)
		test(t, db)
	})
}

// runApply runs postbox endpoints apply with args and the environment
// variables env (NAME=value), and returns its stdout, stderr and exit
// code.
func runApply(t *testing.T, db, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := command(append(append([]string{"endpoints", "apply"}, args...), db...)...)
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// applyOKCmd runs apply, which must exit 0, and returns its stdout.
func applyOKCmd(t *testing.T, db, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := runApply(t, db, env, args...)
	if code != 0 {
		t.Fatalf("postbox endpoints apply %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// endpointNames are the names of the stored endpoints, with their states,
// as endpoints list --json prints them.
func endpointNames(t *testing.T, db []string) []string {
	t.Helper()
	var list []struct{ Name, State string }
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "list", "--json"}, db...)...)), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Name+"="+e.State)
	}
	slices.Sort(names)
	return names
}

// applyFile is two webhooks and a NATS endpoint, secrets from the
// environment and a file beside it.
const applyFile = `version: 1
endpoints:
  - name: warehouse
    url: https://93.184.215.14/warehouse
    types: [order.*]
    filter: 'payload.total > 100'
    secret: env:WH_SECRET
    headers: {X-Api-Key: file:wh-key}
  - name: audit
    url: https://93.184.215.14/audit
    envelope: cloudevents
    state: disabled
  - name: stream
    url: nats://127.0.0.1:4222?subject=shop.{event_type}
`

// writeApplyFile writes text as endpoints.yaml, and the file wh-key its
// header names, in a folder of the test's own; it returns the file's path
// and the header's value.
func writeApplyFile(t *testing.T, text string) (path, key string) {
	t.Helper()
	dir := t.TempDir()
	key = uniqueSecret("hdr")
	if err := os.WriteFile(filepath.Join(dir, "wh-key"), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "endpoints.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// apply --yes creates what the file says and prints the generated secret
// once; run again, it prints "no changes". Without --yes, and with
// --dry-run, it prints the plan and applies nothing.
func TestEndpointsApplyCommand(t *testing.T) {
	applyDatabases(t, func(t *testing.T, db []string) {
		path, key := writeApplyFile(t, applyFile)
		whsec := newWhsec()
		env := []string{"WH_SECRET=" + whsec}

		out := applyOKCmd(t, db, env, "-f", path)
		for _, want := range []string{"+ create warehouse\n", "    secret: env:WH_SECRET\n", "    headers: X-Api-Key (file:wh-key)\n",
			"+ create audit\n", "+ create stream\n", "\n3 to create, 0 to update, 0 to remove, 0 unchanged\nnothing applied: give --yes to apply\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("plan without --yes lacks %q:\n%s", want, out)
			}
		}
		if names := endpointNames(t, db); len(names) != 0 {
			t.Fatalf("without --yes the store has %v", names)
		}
		out = applyOKCmd(t, db, env, "-f", path, "--dry-run")
		if !strings.HasSuffix(out, "3 to create, 0 to update, 0 to remove, 0 unchanged\n--dry-run: nothing applied\n") {
			t.Errorf("--dry-run printed:\n%s", out)
		}
		if names := endpointNames(t, db); len(names) != 0 {
			t.Fatalf("--dry-run left %v", names)
		}

		out = applyOKCmd(t, db, env, "-f", path, "--yes")
		for _, want := range []string{"+ create warehouse\n", "\ncreated warehouse (", "\ncreated audit (", "\ncreated stream (", "\nsecret of audit: whsec_"} {
			if !strings.Contains(out, want) {
				t.Errorf("apply --yes lacks %q:\n%s", want, out)
			}
		}
		if strings.Contains(out, whsec) || strings.Contains(out, key) || strings.Contains(out, "secret of warehouse") {
			t.Errorf("apply --yes printed a secret of the file's references:\n%s", out)
		}
		if names := endpointNames(t, db); !slices.Equal(names, []string{"audit=disabled", "stream=enabled", "warehouse=enabled"}) {
			t.Errorf("stored after --yes: %v", names)
		}
		if out := applyOKCmd(t, db, env, "-f", path, "--yes"); out != "no changes: 3 endpoints match the file\n" {
			t.Errorf("the second apply printed:\n%s", out)
		}
		// The file on stdin: its file: references are read from the
		// working directory.
		cmd := command(append([]string{"endpoints", "apply", "-f", "-"}, db...)...)
		cmd.Env, cmd.Dir = append(cmd.Env, env...), filepath.Dir(path)
		cmd.Stdin = strings.NewReader(applyFile)
		if out, err := cmd.Output(); err != nil || string(out) != "no changes: 3 endpoints match the file\n" {
			t.Errorf("apply -f - : %v\n%s", err, out)
		}
	})
}

// An endpoint dropped from the file is kept (and listed) without --prune,
// removed with --prune --yes; a changed filter is one update.
func TestEndpointsApplyPrune(t *testing.T) {
	applyDatabases(t, func(t *testing.T, db []string) {
		path, _ := writeApplyFile(t, applyFile)
		env := []string{"WH_SECRET=" + newWhsec()}
		applyOKCmd(t, db, env, "-f", path, "--yes")
		changed := strings.Replace(applyFile[:strings.Index(applyFile, "  - name: stream")], "'payload.total > 100'", "'payload.total > 5'", 1)
		if err := os.WriteFile(path, []byte(changed), 0o600); err != nil {
			t.Fatal(err)
		}
		out := applyOKCmd(t, db, env, "-f", path, "--yes")
		for _, want := range []string{"~ update warehouse (", `    filter: "payload.total > 100" -> "payload.total > 5"`, "  kept stream (",
			"0 to create, 1 to update, 0 to remove, 1 unchanged\n", "\nupdated warehouse ("} {
			if !strings.Contains(out, want) {
				t.Errorf("apply without --prune lacks %q:\n%s", want, out)
			}
		}
		if names := endpointNames(t, db); len(names) != 3 {
			t.Fatalf("without --prune: %v", names)
		}
		out = applyOKCmd(t, db, env, "-f", path, "--prune", "--dry-run")
		if !strings.Contains(out, "- remove stream (") || !strings.HasSuffix(out, "0 to create, 0 to update, 1 to remove, 2 unchanged\n--dry-run: nothing applied\n") {
			t.Errorf("--prune --dry-run:\n%s", out)
		}
		out = applyOKCmd(t, db, env, "-f", path, "--prune", "--yes")
		if !strings.Contains(out, "\nremoved stream (") {
			t.Errorf("--prune --yes:\n%s", out)
		}
		if names := endpointNames(t, db); !slices.Equal(names, []string{"audit=disabled", "warehouse=enabled"}) {
			t.Errorf("after --prune: %v", names)
		}
		if out := applyOKCmd(t, db, env, "-f", path, "--prune"); out != "no changes: 2 endpoints match the file\n" {
			t.Errorf("after --prune, apply printed:\n%s", out)
		}
	})
}

// The refusals: one line on stderr, the file's name, line and column (or
// the plan's refusals on stdout: the endpoint, its line, the setting),
// exit 2, no secret; nothing applied, not even the good endpoints of a
// file with a bad one.
func TestEndpointsApplyRefusals(t *testing.T) {
	_, db := schemaStore(t)
	literal := newWhsec()
	bad, _ := writeApplyFile(t, "version: 1\nendpoints:\n  - name: a\n    url: https://93.184.215.14/a\n    secret: "+literal+"\n")
	unknown, _ := writeApplyFile(t, "version: 1\nendpoints:\n  - name: a\n    urll: https://93.184.215.14/a\n")
	badFilter, _ := writeApplyFile(t, "version: 1\nendpoints:\n  - name: good\n    url: https://93.184.215.14/good\n"+
		"  - name: a\n    url: https://93.184.215.14/a\n    filter: 'payload.total >'\n")
	good, _ := writeApplyFile(t, applyFile)
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
		out  string // in stdout
	}{
		{"literal secret", nil, []string{"-f", bad}, 2, bad + ":5:13: endpoints[0].secret: a secret is given as a reference, env:NAME or file:PATH", ""},
		{"unknown key", nil, []string{"-f", unknown}, 2, unknown + `:4:5: endpoints[0]: unknown key "urll"`, ""},
		{"unset variable", nil, []string{"-f", good}, 2, good + ":7:13: endpoints[0].secret: env:WH_SECRET: the environment variable is not set", ""},
		{"no file", nil, nil, 2, "-f FILE is required", ""},
		{"missing file", nil, []string{"-f", good + ".missing"}, 2, "no such file", ""},
		{"dry-run and yes", nil, []string{"-f", good, "--dry-run", "--yes"}, 2, "give --dry-run or --yes, not both", ""},
		{"negative grace", nil, []string{"-f", good, "--grace", "-1s"}, 2, "--grace", ""},
		{"bad filter", nil, []string{"-f", badFilter, "--yes"}, 2, "the file has endpoints that postbox refuses (! refused above): nothing applied",
			"! refused a (line 5) [filter]: filter: 1:16: "},
		{"bad filter, dry run", nil, []string{"-f", badFilter, "--dry-run"}, 2, "nothing applied; mend the file", "! refused a (line 5) [filter]: filter: 1:16: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runApply(t, db, c.env, c.args...)
			if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || !strings.Contains(out, c.out) {
				t.Errorf("exit %d, stderr %q: want exit %d and one line with %q, %q in stdout\n%s", code, errOut, c.code, c.want, c.out, out)
			}
			if strings.Contains(errOut+out, literal) {
				t.Errorf("the output quotes the secret written in the file")
			}
		})
	}
	if names := endpointNames(t, db); len(names) != 0 {
		t.Errorf("refused runs stored %v", names)
	}
	// The flags that apply are never read from the environment.
	_, _, envCode := runApply(t, db, []string{"WH_SECRET=" + newWhsec(), "POSTBOX_YES=true", "POSTBOX_PRUNE=true"}, "-f", good)
	if names := endpointNames(t, db); envCode != 0 || len(names) != 0 {
		t.Errorf("POSTBOX_YES applied the plan: exit %d, %v", envCode, names)
	}
	// Two stored endpoints of one name the file gives: a conflict, exit 1.
	for range 2 {
		runOK(t, append([]string{"endpoints", "add", "--name", "audit", "--url", "https://93.184.215.14/audit"}, db...)...)
	}
	out, errOut, code := runApply(t, db, []string{"WH_SECRET=" + newWhsec()}, "-f", good, "--yes")
	if code != 1 || !strings.Contains(out, "! conflict audit (") || !strings.Contains(errOut, "the plan has conflicts (! above), which apply does not guess: nothing applied") {
		t.Errorf("conflict: exit %d\n%s%s", code, out, errOut)
	}
	if names := endpointNames(t, db); !slices.Equal(names, []string{"audit=enabled", "audit=enabled"}) {
		t.Errorf("a plan with a conflict applied something: %v", names)
	}
}

// apply --secrets-out writes the generated secrets to a new file, mode
// 0600, NAME SECRET a line, and prints none; a file in the way refuses
// the apply before anything is applied.
func TestEndpointsApplySecretsOut(t *testing.T) {
	applyDatabases(t, func(t *testing.T, db []string) {
		path, _ := writeApplyFile(t, applyFile)
		env := []string{"WH_SECRET=" + newWhsec()}
		secrets := filepath.Join(t.TempDir(), "secrets")
		out := applyOKCmd(t, db, env, "-f", path, "--yes", "--secrets-out", secrets)
		info, err := os.Stat(secrets)
		if err != nil {
			t.Fatal(err)
		}
		if info.Mode().Perm() != 0o600 {
			t.Errorf("--secrets-out file mode %v, want 0600", info.Mode().Perm())
		}
		data, err := os.ReadFile(secrets)
		if err != nil {
			t.Fatal(err)
		}
		name, secret, _ := strings.Cut(strings.TrimSuffix(string(data), "\n"), " ")
		if name != "audit" || !strings.HasPrefix(secret, "whsec_") || strings.Count(string(data), "\n") != 1 {
			t.Fatalf("--secrets-out file holds %d lines, want \"audit whsec_...\"", strings.Count(string(data), "\n"))
		}
		if strings.Contains(out, secret) || !strings.Contains(out, "1 generated secrets written to "+secrets) {
			t.Errorf("apply --secrets-out printed the secret, or not where it went:\n%s", out)
		}
		changed := strings.Replace(applyFile, "name: audit", "name: audit2", 1)
		path2, _ := writeApplyFile(t, changed)
		out, errOut, code := runApply(t, db, env, "-f", path2, "--yes", "--secrets-out", secrets)
		if code != 2 || !strings.Contains(errOut, "--secrets-out") {
			t.Errorf("--secrets-out to a file that exists: exit %d\n%s%s", code, out, errOut)
		}
		if names := endpointNames(t, db); slices.Contains(names, "audit2=enabled") {
			t.Errorf("applied despite the refused --secrets-out: %v", names)
		}
	})
}
