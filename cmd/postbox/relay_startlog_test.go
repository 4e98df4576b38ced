package main_test

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/natstest"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// At start, postbox relay logs what it will do, in every mode: how it finds
// new events (listening, or polling and why), which sink, which store and
// schema; and the URLs in those lines are redacted: neither the database's
// password, nor a broker's, nor a webhook URL's credentials or path.
func TestRelayLogsWhatItWillDo(t *testing.T) {
	const dbPassword, sinkPassword, pathToken = "db-Pw-4k9q", "sink-Pw-8z2m", "tok3n-in-path"
	_, db := schemaStore(t)
	schema := db[3]
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), dbPassword) // the test server trusts: the password is not checked
	pgDB := []string{"--db", u.String(), "--schema", schema}
	sqliteDB := []string{"--db", "sqlite:" + filepath.Join(t.TempDir(), "outbox.db")}
	runOK(t, append([]string{"migrate"}, sqliteDB...)...)

	rcv := receiver.New(t, secret, nil)
	hook := strings.Replace(rcv.URL, "http://", "http://hookuser:"+sinkPassword+"@", 1) + "/" + pathToken
	nats := natstest.StartServer(t, "--user", "relay", "--pass", sinkPassword)
	natsAuth := strings.Replace(nats.URL, "nats://", "nats://relay:"+sinkPassword+"@", 1)
	_, _, natsSink := natsStream(t, natsAuth)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"webhook, listening", append([]string{"--sink", hook, "--webhook-secret", secret}, pgDB...),
			[]string{"relay started", "schema " + schema, "webhook", "listening for new events"}},
		{"webhook, polling", append([]string{"--sink", hook, "--webhook-secret", secret, "--no-listen"}, pgDB...),
			[]string{"relay started", "schema " + schema, "webhook", "polling every"}},
		{"SQLite, polling", append([]string{"--sink", hook, "--webhook-secret", secret}, sqliteDB...),
			[]string{"relay started", "sqlite", "webhook", "polling every"}},
		{"endpoints", append([]string{"--endpoints"}, pgDB...),
			[]string{"relay started", "schema " + schema, "endpoints", "listening for new events"}},
		{"nats", append([]string{"--sink", natsSink}, pgDB...),
			[]string{"relay started", "schema " + schema, "nats", "listening for new events"}},
	} {
		logs := &logbuf.Buffer{}
		cmd := command(append([]string{"relay"}, c.args...)...)
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, c.name+": the start lines", 20*time.Second, func() bool {
			for _, w := range c.want {
				if !strings.Contains(logs.String(), w) {
					return false
				}
			}
			return true
		})
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		for _, secretText := range []string{dbPassword, sinkPassword, pathToken} {
			if strings.Contains(logs.String(), secretText) {
				t.Errorf("%s: the relay's log holds %q:\n%s", c.name, secretText, logs)
			}
		}
	}
}
