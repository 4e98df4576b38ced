package sqlstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/store"
)

// fakeDB is a database of one migrations table whose transactions apply
// on commit; it is its own Transactor and MigrationDialect.
type fakeDB struct {
	recorded []int
	ran      []string
	failOn   string
	log      []string
}

type fakeTx struct {
	recorded []int
	ran      []string
}

func (db *fakeDB) Begin(context.Context) (*fakeTx, error) {
	db.log = append(db.log, "begin")
	return &fakeTx{recorded: append([]int(nil), db.recorded...)}, nil
}

func (db *fakeDB) Commit(_ context.Context, tx *fakeTx) error {
	db.log = append(db.log, "commit")
	db.recorded, db.ran = tx.recorded, append(db.ran, tx.ran...)
	return nil
}

func (db *fakeDB) Rollback(context.Context, *fakeTx) error {
	db.log = append(db.log, "rollback")
	return nil
}

func (db *fakeDB) Lock(context.Context, *fakeTx) error {
	db.log = append(db.log, "lock")
	return nil
}

func (db *fakeDB) CreateTable(context.Context, *fakeTx) error { return nil }

func (db *fakeDB) Applied(_ context.Context, tx *fakeTx) ([]int, error) { return tx.recorded, nil }

func (db *fakeDB) Exec(_ context.Context, tx *fakeTx, sql string) error {
	if sql == db.failOn {
		return errors.New("syntax error")
	}
	tx.ran = append(tx.ran, sql)
	return nil
}

func (db *fakeDB) Record(_ context.Context, tx *fakeTx, m store.Migration) error {
	tx.recorded = append(tx.recorded, m.Version)
	return nil
}

var migrations = []store.Migration{{Version: 1, Name: "one", SQL: "a"}, {Version: 2, Name: "two", SQL: "b"}, {Version: 3, Name: "three", SQL: "c"}}

func TestMigrate(t *testing.T) {
	ctx := context.Background()
	db := &fakeDB{recorded: []int{1}}
	applied, err := Migrate(ctx, "fake", db, db, fixed)
	if err != nil || !reflect.DeepEqual(applied, []int{2, 3}) || !reflect.DeepEqual(db.ran, []string{"b", "c"}) {
		t.Fatalf("applied %v, ran %v, %v; want 2 and 3", applied, db.ran, err)
	}
	if want := []string{"begin", "lock", "commit"}; !reflect.DeepEqual(db.log, want) {
		t.Fatalf("transaction %v, want %v", db.log, want)
	}
	if applied, err := Migrate(ctx, "fake", db, db, fixed); err != nil || len(applied) != 0 {
		t.Fatalf("second run applied %v, %v; want nothing", applied, err)
	}
}

func TestMigrateFailureRollsBack(t *testing.T) {
	db := &fakeDB{failOn: "c"}
	_, err := Migrate(context.Background(), "fake", db, db, fixed)
	if err == nil || !strings.Contains(err.Error(), "fake: migration 0003_three: syntax error") {
		t.Fatalf("error %v, want it to name the migration", err)
	}
	if len(db.recorded) != 0 || db.log[len(db.log)-1] != "rollback" {
		t.Fatalf("recorded %v, log %v: want nothing kept, a rollback", db.recorded, db.log)
	}
}

func fixed() ([]store.Migration, error) { return migrations, nil }
