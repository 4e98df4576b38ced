package sqlite

import (
	"database/sql"
	"testing"

	_ "modernc.org/sqlite"
)

func TestScratch(t *testing.T) {
	db, err := sql.Open("sqlite", t.TempDir()+"/x.db")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`select sqlite_version()`,
		`select printf('%012x', 281474976710655)`,
		`select printf('%x', -1)`,
		`select cast(round((julianday('now') - 2440587.5) * 86400000) as integer)`,
		`select printf('%08x-%04x-%04x-%04x-%012x', cast(round((julianday('now') - 2440587.5) * 86400000) as integer) >> 16, cast(round((julianday('now') - 2440587.5) * 86400000) as integer) & 65535, 28672 | (random() & 4095), 32768 | (random() & 16383), random() & 281474976710655)`,
	} {
		var s string
		if err := db.QueryRow(q).Scan(&s); err != nil {
			t.Fatal(q, err)
		}
		t.Log(s)
	}
	if _, err := db.Exec(`create table t (id text not null default (printf('%08x-%04x-%04x-%04x-%012x', cast(round((julianday('now') - 2440587.5) * 86400000) as integer) >> 16, cast(round((julianday('now') - 2440587.5) * 86400000) as integer) & 65535, 28672 | (random() & 4095), 32768 | (random() & 16383), random() & 281474976710655)), at integer not null default (cast(round((julianday('now') - 2440587.5) * 86400000) as integer) * 1000)) strict`); err != nil {
		t.Fatal(err)
	}
	db.Exec(`insert into t default values`)
	var id string
	var at int64
	db.QueryRow(`select id, at from t`).Scan(&id, &at)
	t.Log(id, at)
}
