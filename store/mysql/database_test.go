package mysql_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/postbox-go/postbox/postboxtest/mysqltest"
	"github.com/postbox-go/postbox/store/mysql"
)

// CreateDatabase creates a database the server does not have, once, and
// Open then opens it; DropDatabase drops it, and Open refuses it again.
func TestCreateAndDropDatabase(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(mysqltest.URL())
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	u.Path = "/pbtest_created_" + hex.EncodeToString(b)
	dsn := u.String()
	t.Cleanup(func() { _ = mysql.DropDatabase(context.Background(), dsn) })
	if _, err := mysql.Open(ctx, dsn, mysql.Config{}); err == nil {
		t.Fatal("Open of a database the server does not have succeeded")
	}
	for i, want := range []bool{true, false} {
		created, err := mysql.CreateDatabase(ctx, dsn)
		if err != nil || created != want {
			t.Fatalf("CreateDatabase, call %d: created %v, %v; want %v", i+1, created, err, want)
		}
	}
	s, err := mysql.Open(ctx, dsn, mysql.Config{})
	if err != nil {
		t.Fatalf("Open of the created database: %v", err)
	}
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	s.Close()
	if err := mysql.DropDatabase(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	if _, err := mysql.Open(ctx, dsn, mysql.Config{}); err == nil {
		t.Fatal("Open of a dropped database succeeded")
	}
	u.Path = "/"
	if _, err := mysql.CreateDatabase(ctx, u.String()); err == nil {
		t.Fatal("CreateDatabase of a URL with no database succeeded")
	}
}
