package mysqltest_test

import (
	"database/sql"
	"net/url"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/postbox-go/postbox/postboxtest/mysqltest"
)

// A database of its own is made, usable, and named in the URL.
func TestDatabase(t *testing.T) {
	u, err := url.Parse(mysqltest.Database(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", u.Host, u.Path[1:]
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var name string
	if err := db.QueryRow("select database()").Scan(&name); err != nil || name != cfg.DBName {
		t.Fatalf("database() = %q, %v; want %q", name, err, cfg.DBName)
	}
}
