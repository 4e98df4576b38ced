package main_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// shownEndpoint is what endpoints show --json prints of the fields add
// and update set.
type shownEndpoint struct {
	Name          string   `json:"name"`
	URL           string   `json:"url"`
	Types         []string `json:"types"`
	RatePerSecond float64  `json:"rate_per_second"`
	Concurrency   int      `json:"concurrency"`
	Shadow        bool     `json:"shadow"`
	AllowPrivate  bool     `json:"allow_private"`
}

func showEndpoint(t *testing.T, db []string, idOrName string) shownEndpoint {
	t.Helper()
	var e shownEndpoint
	if err := json.Unmarshal([]byte(runOK(t, append([]string{"endpoints", "show", "--json", idOrName}, db...)...)), &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// endpoints add refuses a URL whose host is, or resolves to, an address
// the relay's SSRF guard refuses, with one line that says why and names
// --allow-private; with --allow-private it adds the endpoint, allowed. An
// address no endpoint can have stays refused; a host that does not
// resolve is added with a warning.
func TestEndpointsAddRefusesPrivateAddresses(t *testing.T) {
	_, db := schemaStore(t)
	for url, why := range map[string]string{
		"http://127.0.0.1:9/hook":            "127.0.0.1 is loopback",
		"http://localhost:9/hook?token=x":    "host localhost resolves to",
		"http://[::1]:9/hook":                "::1 is loopback",
		"http://169.254.169.254/latest/":     "169.254.169.254 is link-local (cloud metadata)",
		"https://10.1.2.3/hook":              "10.1.2.3 is private (RFC 1918)",
		"http://[::ffff:192.168.1.1]:80/abc": "private (RFC 1918)",
	} {
		last := usageError(t, append([]string{"endpoints", "add", "--url", url}, db...)...)
		if !strings.Contains(last, why) || !strings.Contains(last, "--allow-private") || strings.Contains(last, "token=x") {
			t.Errorf("endpoints add --url %s said %q, want %q and the flag --allow-private named, and not the URL's query", url, last, why)
		}
	}
	if list := runOK(t, append([]string{"endpoints", "list", "--json"}, db...)...); strings.TrimSpace(list) != "[]" {
		t.Fatalf("refused adds added endpoints: %s", list)
	}
	for _, url := range []string{"http://0.0.0.0:9/", "http://224.0.0.1/"} {
		last := usageError(t, append([]string{"endpoints", "add", "--allow-private", "--url", url}, db...)...)
		if !strings.Contains(last, "no endpoint can be reached there") {
			t.Errorf("endpoints add --allow-private --url %s said %q, want it refused all the same", url, last)
		}
	}

	id := addEndpointCmd(t, db, "--url", "http://localhost:9/hook", "--allow-private", "--name", "internal")
	if e := showEndpoint(t, db, id.String()); !e.AllowPrivate {
		t.Errorf("an endpoint added with --allow-private shows %+v, want allow_private", e)
	}
	if show := runOK(t, append([]string{"endpoints", "show", "internal"}, db...)...); !strings.Contains(show, "allowed (--allow-private)") {
		t.Errorf("endpoints show by name does not say the endpoint may reach private addresses:\n%s", show)
	}

	cmd := command(append([]string{"endpoints", "add", "--url", "https://hooks.nowhere.invalid/x"}, db...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if out, err := cmd.Output(); err != nil || !endpointIDLine.Match(out) {
		t.Fatalf("endpoints add of a host that does not resolve: %v, %q, %s; want it added", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "warning: --url: host hooks.nowhere.invalid does not resolve") {
		t.Errorf("endpoints add of a host that does not resolve warned %q", stderr.String())
	}
}

// endpoints update changes only the fields given, finds the endpoint by
// id or name, and checks a new URL, or a withdrawn allowance, as add does.
func TestEndpointsUpdate(t *testing.T) {
	_, db := schemaStore(t)
	id := addEndpointCmd(t, db, "--url", "https://partner.invalid/hooks", "--name", "partner", "--types", "order.*",
		"--rate", "20/s", "--concurrency", "3")
	out := runOK(t, append([]string{"endpoints", "update", "partner", "--rate", "5/s", "--shadow"}, db...)...)
	if !strings.Contains(out, "endpoint "+id.String()+" updated: ") {
		t.Errorf("update printed %q", out)
	}
	want := shownEndpoint{Name: "partner", URL: "https://partner.invalid/hooks", Types: []string{"order.*"}, RatePerSecond: 5, Concurrency: 3, Shadow: true}
	if e := showEndpoint(t, db, id.String()); !sameEndpoint(e, want) {
		t.Errorf("after update --rate 5/s --shadow: %+v, want %+v", e, want)
	}

	last := usageError(t, append([]string{"endpoints", "update", id.String(), "--url", "http://127.0.0.1:9/"}, db...)...)
	if !strings.Contains(last, "127.0.0.1 is loopback") || !strings.Contains(last, "--allow-private") {
		t.Errorf("update to a loopback URL said %q", last)
	}
	if e := showEndpoint(t, db, id.String()); e.URL != want.URL {
		t.Errorf("a refused update changed the URL to %s", e.URL)
	}
	runOK(t, append([]string{"endpoints", "update", id.String(), "--url", "http://127.0.0.1:9/", "--allow-private",
		"--name", "internal", "--types", "", "--concurrency", "7", "--shadow=false"}, db...)...)
	want = shownEndpoint{Name: "internal", URL: "http://127.0.0.1:9/", Types: []string{}, RatePerSecond: 5, Concurrency: 7, AllowPrivate: true}
	if e := showEndpoint(t, db, "internal"); !sameEndpoint(e, want) {
		t.Errorf("after the second update: %+v, want %+v", e, want)
	}
	last = usageError(t, append([]string{"endpoints", "update", "internal", "--allow-private=false"}, db...)...)
	if !strings.Contains(last, "--allow-private") {
		t.Errorf("withdrawing the allowance of a loopback endpoint said %q, want it refused", last)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{id.String()}, "nothing to change"},
		{[]string{id.String(), "--concurrency", "0"}, "--concurrency"},
		{[]string{id.String(), "--url", "ftp://x"}, "--url"},
		{[]string{id.String(), "--types", "[a"}, "--types"},
	} {
		if last := usageError(t, append(append([]string{"endpoints", "update"}, c.args...), db...)...); !strings.Contains(last, c.want) {
			t.Errorf("endpoints update %q said %q, want %q", c.args, last, c.want)
		}
	}
	addEndpointCmd(t, db, "--url", "https://other.invalid/", "--name", "internal")
	if errText := runFails(t, command(append([]string{"endpoints", "update", "internal", "--rate", "1/s"}, db...)...)); !strings.Contains(errText, "2 endpoints are named") {
		t.Errorf("update of an ambiguous name said %q", errText)
	}
	if errText := runFails(t, command(append([]string{"endpoints", "update", uuid.NewString(), "--rate", "1/s"}, db...)...)); !strings.Contains(errText, "no endpoint") {
		t.Errorf("update of an unknown id said %q", errText)
	}
}

func sameEndpoint(a, b shownEndpoint) bool {
	return a.Name == b.Name && a.URL == b.URL && strings.Join(a.Types, ",") == strings.Join(b.Types, ",") &&
		a.RatePerSecond == b.RatePerSecond && a.Concurrency == b.Concurrency && a.Shadow == b.Shadow && a.AllowPrivate == b.AllowPrivate
}
