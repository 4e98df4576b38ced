package postgres_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/postbox-go/postbox/store/postgres"
)

// Every placeholder of the SQL files and migrations is filled.
func TestExpandFillsEveryPlaceholder(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://nobody@127.0.0.1:1/none") // never connects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s, err := postgres.New(pool, postgres.Config{Schema: "app"})
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, name := range []string{"queries.sql", "inbox.sql"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts[name] = string(b)
	}
	migrations, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		texts[m.Name] = m.SQL
	}
	// {history_read} in requeue_kept is no placeholder of Expand's: the
	// store puts history_read's statement there, checked whole here.
	texts["queries.sql"] = strings.Replace(texts["queries.sql"], "{history_read}", "", 1)
	texts["requeue_kept as the store runs it"] = s.RequeueKeptSQL()
	placeholder := regexp.MustCompile(`\{[a-z_]+\}`)
	for name, text := range texts {
		if left := placeholder.FindAllString(s.Expand(text), -1); len(left) > 0 {
			t.Errorf("%s: placeholders left unfilled: %v", name, left)
		}
	}
}
