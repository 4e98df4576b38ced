package redact_test

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/internal/redact"
)

func TestDSNHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app:s3cr@t@db:5432/x":                                          "postgres://app:xxxxx@db:5432/x",
		"postgres://app@db/x?password=hunter2&sslmode=no":                          "postgres://app@db/x?password=xxxxx&sslmode=no",
		"postgres://app@db/x?sslpassword=hunter2":                                  "postgres://app@db/x?sslpassword=xxxxx",
		"postgres://app:hunter2@db/x?sslmode=verify-full&sslrootcert=/missing.pem": "postgres://app:xxxxx@db/x?sslmode=verify-full&sslrootcert=/missing.pem",
		"postgres://db/x": "postgres://db/x",
		// A short password masks the password, not its letters elsewhere.
		"http://u:p@h.example:8080/x":                          "http://u:xxxxx@h.example:8080/x",
		"https://hooks.example/a-path?password=a&k=a":          "https://hooks.example/a-path?k=a&password=xxxxx",
		"postgres://app:12/s3cr@db/x":                          "postgres://app:xxxxx@db/x",
		"postgres://app:12?s3cr@db/x":                          "postgres://app:xxxxx@db/x",
		"postgres://app:hun%zzter2@db/x":                       "postgres:(unparsable URL)",
		"host=db user=app password=hunter2 dbname=x":           "host=db user=app password=xxxxx dbname=x",
		"host=db password='hunter2 s3cr' dbname=x":             "host=db password=xxxxx dbname=x",
		"host=db password = 'it\\'s s3cr' sslpassword=hunter2": "host=db password = xxxxx sslpassword=xxxxx",
	} {
		got := redact.DSN(in)
		if strings.Contains(got, "s3cr") || strings.Contains(got, "hunter2") || got != want {
			t.Errorf("DSN(%q) = %q, want %q", in, got, want)
		}
	}
}

// Scrub takes every form of the URL's passwords out of an error's text
// and keeps the error's chain.
func TestScrubHidesPasswordsInErrors(t *testing.T) {
	for dsn, pw := range map[string]string{
		"postgres://app:p%40ss@db/x":                "p@ss",
		"postgres://app:p%40ss@db/x?password=other": "other",
		"postgres://app:broken%zz@db/x":             "broken%zz",
		"host=db password='a b'":                    "a b",
	} {
		err := redact.Scrub(fmt.Errorf("connect %s: %w", pw, os.ErrNotExist), dsn)
		if strings.Contains(err.Error(), pw) || !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Scrub(%q): %v (is ErrNotExist: %v)", dsn, err, errors.Is(err, os.ErrNotExist))
		}
	}
	if redact.Scrub(nil, "postgres://a:b@c/d") != nil {
		t.Error("Scrub(nil) is not nil")
	}
}

// URLAllowing shows only the parameters it is told hold no secret, and
// no user information; ScrubURLAllowing masks in an error what it hides,
// whole words only, keeping the error's chain.
func TestURLAllowing(t *testing.T) {
	u, err := url.Parse("s3://KEYID:s3cr@bucket?region=eu&token=tok3n&profile=s3#frag")
	if err != nil {
		t.Fatal(err)
	}
	plain := func(k string) bool { return k == "region" }
	if got, want := redact.URLAllowing(u, plain), "s3://bucket?profile=xxxxx&region=eu&token=xxxxx"; got != want {
		t.Errorf("URLAllowing = %s, want %s", got, want)
	}
	cause := errors.New("s3blob: KEYID denied (token tok3n, profile s3, region eu)")
	err = redact.ScrubURLAllowing(fmt.Errorf("open: %w", cause), u, plain)
	if got, want := err.Error(), "open: s3blob: xxxxx denied (token xxxxx, profile xxxxx, region eu)"; got != want {
		t.Errorf("ScrubURLAllowing = %s, want %s", got, want)
	}
	if !errors.Is(err, cause) {
		t.Error("ScrubURLAllowing broke the chain")
	}
	if redact.ScrubURLAllowing(nil, u, plain) != nil {
		t.Error("ScrubURLAllowing(nil) is not nil")
	}
}
