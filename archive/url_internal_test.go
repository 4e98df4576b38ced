package archive

import (
	"net/url"
	"strings"
	"testing"
)

// String names a bucket without its secrets: user information, secret
// parameters, user information in an endpoint; where it is stays.
func TestDescribeURLHidesSecrets(t *testing.T) {
	for raw, want := range map[string]string{
		"s3://AKIAEXAMPLE:hunter2@bucket?region=eu-west-1&prefix=outbox/":                                                     "archive s3://bucket?prefix=outbox%2F&region=eu-west-1",
		"s3://bucket?region=us-east-1&endpoint=http://minio:hunter2@minio:9000&use_path_style=true&secret_access_key=hunter2": "archive s3://bucket?endpoint=http%3A%2F%2Fminio%3A9000&region=us-east-1&secret_access_key=REDACTED&use_path_style=true",
		"file:///var/lib/postbox/archive?create_dir=true#hunter2":                                                             "archive file:///var/lib/postbox/archive?create_dir=true",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := describeURL(u)
		if got != want {
			t.Errorf("describeURL(%s) = %s, want %s", raw, got, want)
		}
		if strings.Contains(got, "hunter2") || strings.Contains(got, "AKIA") {
			t.Errorf("describeURL(%s) = %s: a secret shows", raw, got)
		}
	}
}

// A driver's error quoting the URL's secrets loses them.
func TestScrubRemovesSecrets(t *testing.T) {
	u, _ := url.Parse("s3://AKIAEXAMPLE:hunter%2F2@bucket?region=eu-west-1&token=s%3Dcret")
	got := scrub(`open "s3://AKIAEXAMPLE:hunter/2@bucket": token s=cret, s%3Dcret, hunter%2F2 in eu-west-1`, u)
	for _, secret := range []string{"AKIA", "hunter", "cret"} {
		if strings.Contains(got, secret) {
			t.Errorf("scrub left %q in %s", secret, got)
		}
	}
	if !strings.Contains(got, "eu-west-1") {
		t.Errorf("scrub removed the region: %s", got)
	}
}
