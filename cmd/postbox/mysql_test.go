package main_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/postboxtest/receiver"
	"github.com/postbox-go/postbox/store/mysql"
)

// The command line on MariaDB/MySQL: postbox migrate creates the database
// and its tables, the article's plain-SQL insert in MySQL syntax is a
// pending event in postbox status, postbox relay says how it wakes up and
// delivers it as a signed webhook, and status shows the outbox empty.
func TestMySQLThroughTheCommandLine(t *testing.T) {
	url := mysqltest.Database(t)
	db := []string{"--db", url}
	if out := runOK(t, append([]string{"migrate"}, db...)...); !strings.Contains(out, "applied migrations") {
		t.Fatalf("migrate said %q", out)
	}
	s, err := mysql.Open(context.Background(), url, mysql.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var id string
	err = withTx(s.DB(), func(tx *sql.Tx) error {
		if _, err := tx.Exec(`insert into outbox_events(aggregate_type, aggregate_id, event_type, payload, dedup_key)
			values ('order', '42', 'order.created', '{"order_id": 42}', 'order.created:42')`); err != nil {
			return err
		}
		return tx.QueryRow(`select id from outbox_events where dedup_key = 'order.created:42'`).Scan(&id)
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := status(t, db); st["pending"] != 1 {
		t.Fatalf("status after the plain-SQL insert: %v, want 1 pending", st)
	}
	rcv := receiver.New(t, secret, nil)
	logs, _ := startRelayLogged(t, append(db, "--webhook-url", rcv.URL, "--webhook-secret", secret)...)
	rcv.WaitAccepted(t, 1, 10*time.Second)
	if got := rcv.Accepted()[0].ID; got != id {
		t.Fatalf("delivered %s, want the inserted event %s", got, id)
	}
	waitFor(t, "the outbox to be empty", 10*time.Second, func() bool {
		st := status(t, db)
		return st["pending"] == 0 && st["processing"] == 0
	})
	if !strings.Contains(logs.String(), "poll of the outbox's newest seq") {
		t.Fatalf("the relay did not say how it wakes up:\n%s", logs.String())
	}
}

func withTx(db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}
