package sink_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/sink"
)

// Describe adds to a kind's secrets the URL's password and the options':
// a kind without Describe of its own is its name, scheme and host, every
// query value a secret; texts under 4 bytes are no secret.
func TestDescribeAddsThePasswordAndTheOptionsSecrets(t *testing.T) {
	desc, secrets := sink.Describe(testKinds, "nats://relay:url-pw-1@h:4222/x?subject=orders.new&token=tok-123&n=ab",
		sink.URLOptions{Password: "env-pw-2", Secrets: []string{"whsec_key", "ab"}})
	if desc != "nats nats://h:4222" {
		t.Errorf("desc %q, want the kind's name, scheme and host", desc)
	}
	for _, want := range []string{"url-pw-1", "env-pw-2", "whsec_key", "orders.new", "tok-123", "subject=orders.new&token=tok-123&n=ab"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("secrets %q lack %q", secrets, want)
		}
	}
	if slices.Contains(secrets, "ab") || slices.Contains(secrets, "") {
		t.Errorf("secrets %q hold a text too short to hide", secrets)
	}
}

// A text no kind takes is described as such, and the options' secrets are
// still returned.
func TestDescribeOfWhatNoKindTakes(t *testing.T) {
	for _, raw := range []string{"127.0.0.1:4222", "ftp://u:pw-hunter2@h/x"} {
		desc, secrets := sink.Describe(testKinds, raw, sink.URLOptions{Password: "env-pw-2"})
		if desc != "a sink URL that does not parse" || strings.Contains(desc, "hunter2") || !slices.Contains(secrets, "env-pw-2") {
			t.Errorf("Describe(%q) = %q, %q", raw, desc, secrets)
		}
	}
}

// DescribeQuery shows the public parameters, in the order of their names,
// and returns the others' values and the whole query as secrets.
func TestDescribeQuery(t *testing.T) {
	u, err := url.Parse("amqp://h/?routing_key=r.k&password=pw-9&exchange=ex&empty=")
	if err != nil {
		t.Fatal(err)
	}
	desc, secrets := sink.DescribeQuery(u, "amqp amqp://h", "exchange", "routing_key")
	if desc != "amqp amqp://h exchange=ex routing_key=r.k" {
		t.Errorf("desc %q", desc)
	}
	if !slices.Equal(secrets, []string{"pw-9", u.RawQuery}) {
		t.Errorf("secrets %q, want the password's value and the query", secrets)
	}
}
