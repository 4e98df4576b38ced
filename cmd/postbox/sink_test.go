package main_test

import (
	"bytes"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// --sink with a webhook URL is the same as --webhook-url.
func TestShippedRelaySinkFlagTakesAWebhookURL(t *testing.T) {
	s, db := schemaStore(t)
	rcv := receiver.New(t, secret, nil)
	events := enqueueN(t, s, 5)
	logs, _ := startRelayLogged(t, append(db, "--sink", rcv.URL, "--webhook-secret", secret)...)
	rcv.WaitAccepted(t, len(events), 20*time.Second)
	if log := logs.String(); !strings.Contains(log, `sink="webhook http://127.0.0.1`) {
		t.Errorf("relay log does not name the webhook sink:\n%s", log)
	}
}

// A wrong --sink stops the relay at once with one clear line and the usage
// exit code, and never prints the password it was given.
func TestShippedRelayRefusesBadSinks(t *testing.T) {
	_, db := schemaStore(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown scheme", []string{"--sink", "ftp://user:hunter2secret@host/x"}, `unknown scheme "ftp"`},
		{"not a URL", []string{"--sink", "127.0.0.1:4222"}, "is not a URL"},
		{"both flags", []string{"--sink", "https://example.com/hook", "--webhook-url", "https://example.com/hook", "--webhook-secret", secret}, "not both"},
		{"no sink", nil, "--sink is required"},
		{"webhook without a secret", []string{"--sink", "https://example.com/hook"}, "--webhook-secret is required"},
		{"unknown signature", []string{"--sink", "https://example.com/hook", "--webhook-secret", secret, "--signature", "bogus"}, `--signature: signature: unknown scheme "bogus"`},
		{"misspelt broker parameter", []string{"--sink", "nats://user:hunter2secret@127.0.0.1:4222?subjet=x"}, `--sink: nats: unknown URL parameter "subjet"`},
		{"one event at a time", []string{"--sink", "https://example.com/hook", "--webhook-secret", secret, "--publish-batch", "5"}, "this sink publishes one event at a time (only nats and kafka publish batches)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := command(append(append([]string{"relay"}, db...), c.args...)...)
			cmd.Stderr = &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("exit %v, want the usage code 2; stderr:\n%s", err, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.want) {
				t.Errorf("stderr does not say %q:\n%s", c.want, stderr.String())
			}
			if strings.Contains(stderr.String(), "hunter2secret") {
				t.Errorf("stderr shows the password:\n%s", stderr.String())
			}
		})
	}
}
