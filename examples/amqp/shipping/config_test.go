package main

import (
	"io"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{"DB_DSN": "postgres://db", "AMQP_URL": "amqp://u:p@mq/"}
	cfg, err := parseConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DB != "postgres://db" || cfg.AMQP != "amqp://u:p@mq/" || cfg.Exchange != "orders" || cfg.Queue != "shipping" {
		t.Errorf("from the environment: %+v", cfg)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--db"},
		{[]string{"--db", "x", "--fail-rate", "2"}, "--fail-rate"},
		{[]string{"--db", "x", "--queue", ""}, "--queue"},
		{[]string{"--db", "x", "--redelivery-min", "0s"}, "--redelivery-min"},
		{[]string{"--db", "x", "extra"}, "unexpected"},
	} {
		_, err := parseConfig(c.args, func(string) string { return "" }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("parseConfig(%q): %v, want an error about %s", c.args, err, c.want)
		}
	}
}
