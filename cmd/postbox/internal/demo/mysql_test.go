package demo_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/cmd/postbox/internal/demo"
	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/store/mysql"
)

// newMySQLDatabase is the URL of a database the test server does not have
// yet, dropped when t ends if it exists then.
func newMySQLDatabase(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(mysqltest.URL())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	u.Path = "/pbtest_demo_" + hex.EncodeToString(b)
	dsn := u.String()
	t.Cleanup(func() { _ = mysql.DropDatabase(context.Background(), dsn) })
	return dsn
}

// The demo on MariaDB/MySQL creates the database the URL names, applies
// every order exactly once through the faults, and drops the database at
// the end of a successful run.
func TestDemoOnMySQL(t *testing.T) {
	dsn := newMySQLDatabase(t)
	var out bytes.Buffer
	rep, err := demo.Run(context.Background(), demo.Config{DB: dsn, Events: 300, FaultRate: 0.2, Rate: 3000, Out: &out})
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	checkReport(t, rep, 300, out.String())
	created, err := mysql.CreateDatabase(context.Background(), dsn)
	if err != nil || !created {
		t.Fatalf("the demo left its database behind (created again: %v, %v)", created, err)
	}
}

// A database that holds tables is refused, and left as it was: the
// reconciliation would count what it holds.
func TestDemoRefusesANonEmptyMySQLDatabase(t *testing.T) {
	dsn := newMySQLDatabase(t)
	var out bytes.Buffer
	if _, err := demo.Run(context.Background(), demo.Config{DB: dsn, Events: 5, Rate: 1000, Keep: true, Out: &out}); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	_, err := demo.Run(context.Background(), demo.Config{DB: dsn, Events: 5, Out: &bytes.Buffer{}})
	if err == nil || !strings.Contains(err.Error(), "new or empty database") {
		t.Fatalf("second run on the kept database: %v, want a refusal", err)
	}
	if created, err := mysql.CreateDatabase(context.Background(), dsn); err != nil || created {
		t.Fatalf("the refused run dropped the database (created again: %v, %v)", created, err)
	}
}
