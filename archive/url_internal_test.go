package archive

import (
	"errors"
	"io/fs"
	"net/url"
	"strings"
	"testing"

	"gocloud.dev/blob/memblob"

	"github.com/postbox-go/postbox/internal/redact"
)

// String names a bucket without its secrets (user information, secret
// parameters, user information in an endpoint, masked xxxxx as the
// project masks), where it is stays; and without "archive " in front:
// the logs that print it say archive already.
func TestDescribeURLHidesSecrets(t *testing.T) {
	for raw, want := range map[string]string{
		"s3://AKIAEXAMPLE:hunter2@bucket?region=eu-west-1&prefix=outbox/":                                                     "s3://bucket?prefix=outbox%2F&region=eu-west-1",
		"s3://bucket?region=us-east-1&endpoint=http://minio:hunter2@minio:9000&use_path_style=true&secret_access_key=hunter2": "s3://bucket?endpoint=http%3A%2F%2Fminio%3A9000&region=us-east-1&secret_access_key=xxxxx&use_path_style=true",
		"file:///var/lib/postbox/archive?create_dir=true#hunter2":                                                             "file:///var/lib/postbox/archive?create_dir=true",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := redact.URLAllowing(u, isPlainParam)
		if got != want {
			t.Errorf("URLAllowing(%s) = %s, want %s", raw, got, want)
		}
		if strings.Contains(got, "hunter2") || strings.Contains(got, "AKIA") {
			t.Errorf("URLAllowing(%s) = %s: a secret shows", raw, got)
		}
	}
	a := New(memblob.OpenBucket(nil), "outbox/")
	defer a.Close()
	if got := a.String(); got != "a bucket under outbox/" {
		t.Errorf("New(…, outbox/).String() = %q", got)
	}
}

// A driver's error quoting the URL's secrets loses them, keeps its chain,
// and keeps the words that merely contain a short secret.
func TestScrubRemovesSecrets(t *testing.T) {
	u, _ := url.Parse("s3://AKIAEXAMPLE:hunter%2F2@bucket?region=eu-west-1&token=s%3Dcret&profile=s3")
	cause := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	msg := `open "s3://AKIAEXAMPLE:hunter/2@bucket": token s=cret, s%3Dcret, hunter%2F2 in eu-west-1 (s3blob, profile=s3)`
	err := redact.ScrubURLAllowing(&wrapped{msg: msg, err: cause}, u, isPlainParam)
	got := err.Error()
	for _, secret := range []string{"AKIA", "hunter", "cret", "profile=s3"} {
		if strings.Contains(got, secret) {
			t.Errorf("scrub left %q in %s", secret, got)
		}
	}
	for _, plain := range []string{"eu-west-1", "s3blob"} {
		if !strings.Contains(got, plain) {
			t.Errorf("scrub removed %q: %s", plain, got)
		}
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("scrub broke the error chain: %v", err)
	}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
