package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// CreateDatabase creates the database dsn names (as Open reads dsn) unless
// the server has it, and reports whether it did: in MySQL a database is
// what a schema is in PostgreSQL, where the store's Migrate creates its
// schema. The user needs the CREATE privilege on it.
func CreateDatabase(ctx context.Context, dsn string) (created bool, err error) {
	conf, db, err := serverOf(dsn)
	if err != nil {
		return false, err
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "select count(*) from information_schema.schemata where schema_name = ?", conf.DBName).Scan(&n); err != nil {
		return false, fmt.Errorf("mysql: %s: %w", redact(conf), scrub(err, conf))
	}
	if n > 0 {
		return false, nil
	}
	if _, err := db.ExecContext(ctx, "create database if not exists "+quoteName(conf.DBName)+" character set utf8mb4 collate utf8mb4_bin"); err != nil {
		return false, fmt.Errorf("mysql: create database %s: %w", redact(conf), scrub(err, conf))
	}
	return true, nil
}

// DropDatabase drops the database dsn names, if the server has it, with
// every table in it.
func DropDatabase(ctx context.Context, dsn string) error {
	conf, db, err := serverOf(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "drop database if exists "+quoteName(conf.DBName)); err != nil {
		return fmt.Errorf("mysql: drop database %s: %w", redact(conf), scrub(err, conf))
	}
	return nil
}

// serverOf is dsn read as Open reads it, with a connection pool to its
// server that names no database; dsn must name one.
func serverOf(dsn string) (*mysql.Config, *sql.DB, error) {
	conf, err := parseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	if conf.DBName == "" {
		return nil, nil, fmt.Errorf("mysql: %s names no database: add it to the URL (mysql://host:3306/name)", redact(conf))
	}
	db, err := openServer(conf)
	return conf, db, err
}

// OpenServer returns a connection pool to the server of dsn (read as Open
// reads it) that names no database, whether dsn names one or not: for
// tools that create or list databases. Its errors hold no password; close
// the pool when done.
func OpenServer(dsn string) (*sql.DB, error) {
	conf, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	return openServer(conf)
}

// openServer is OpenServer for a parsed dsn.
func openServer(conf *mysql.Config) (*sql.DB, error) {
	server := conf.Clone()
	server.DBName = ""
	if server.Timeout == 0 {
		server.Timeout = DialTimeoutDefault
	}
	connector, err := mysql.NewConnector(server)
	if err != nil {
		return nil, fmt.Errorf("mysql: %s: %w", redact(conf), err)
	}
	return sql.OpenDB(connector), nil
}

// quoteName quotes a database name for a statement.
func quoteName(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
