package main

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// readHeaders, over any --header text: an error never holds the value
// (the secret) given after the colon, and what it accepts is a set of
// canonical HTTP header names, each once, with the values given (admin
// checks the values: endpoint/admin's FuzzCreateHeaders).
func FuzzReadHeaders(f *testing.F) {
	for _, seed := range [][2]string{
		{"X-Api-Key", " abc"}, {"x-api-key", "abc\r\nInjected: 1"}, {"Bad Name", "v"}, {"X-A", ""}, {"", "v"},
		{"X-A=b", "v"}, {"X-Ä", "v"}, {"X-A", "\x00"}, {"X-A", "\tv\t"}, {"Authorization", "Bearer x"},
	} {
		f.Add(seed[0], seed[1], false)
		f.Add(seed[0], seed[1], true)
	}
	f.Fuzz(func(t *testing.T, name, value string, twice bool) {
		if strings.Contains(name, "S3cr") || strings.Contains(name, ":") { // a name ends at the first colon
			t.Skip()
		}
		secret := "S3cr" + value + "X9q"
		raw := []string{name + ":" + secret}
		if twice {
			raw = append(raw, strings.ToLower(name)+": "+secret)
		}
		var r secretReader
		headers, err := readHeaders(raw, &r)
		if err != nil {
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "S3cr") {
				t.Fatalf("readHeaders(%q): the error shows the value: %v", raw, err)
			}
			return
		}
		if twice && len(headers) != 1 {
			t.Fatalf("readHeaders(%q) accepted a name twice: %d headers", raw, len(headers))
		}
		for n, v := range headers {
			if n != http.CanonicalHeaderKey(n) || !httpguts.ValidHeaderFieldName(n) {
				t.Fatalf("readHeaders(%q) accepted the name %q", raw, n)
			}
			if v != secret {
				t.Fatalf("readHeaders(%q) changed the value to %q", raw, v)
			}
		}
	})
}

// readSecret reads @FILE and env:NAME, and takes anything else as the
// secret itself; its errors name the file or the variable, never a
// secret.
func TestReadSecretForms(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/s"
	for _, c := range []struct {
		content, want string
	}{{"tok\n", "tok"}, {"tok\r\n", "tok"}, {"tok", "tok"}, {"tok\n\n", "tok\n"}, {"", ""}} {
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		got, literal, err := readSecret("@" + path)
		if err != nil || literal || got != c.want {
			t.Errorf("@FILE holding %q: %q, literal %v, %v; want %q", c.content, got, literal, err, c.want)
		}
	}
	t.Setenv("PBTEST_SECRET_FORM", "from-env")
	if got, literal, err := readSecret("env:PBTEST_SECRET_FORM"); err != nil || literal || got != "from-env" {
		t.Errorf("env:NAME: %q, literal %v, %v", got, literal, err)
	}
	if _, _, err := readSecret("env:PBTEST_SECRET_FORM_UNSET"); err == nil || !strings.Contains(err.Error(), "PBTEST_SECRET_FORM_UNSET") {
		t.Errorf("env:NAME of an unset variable: %v", err)
	}
	if _, _, err := readSecret("@" + dir + "/missing"); err == nil || !strings.Contains(err.Error(), dir+"/missing") {
		t.Errorf("@FILE of a missing file: %v", err)
	}
	if got, literal, err := readSecret("whsec_abc"); err != nil || !literal || got != "whsec_abc" {
		t.Errorf("a literal: %q, literal %v, %v", got, literal, err)
	}
	big := strings.Repeat("x", maxSecretFileSize+1)
	if err := os.WriteFile(path, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := readSecret("@" + path); err == nil || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("@FILE over the limit: %v", err)
	}
}
