package fleet_test

import (
	"context"
	"strings"
	"testing"

	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/postboxtest/pgtest"
)

var defaults = fleet.Defaults{Schema: "public", Sink: "https://example.com/hook",
	Getenv: func(k string) string {
		if k == "TENANT_URL" {
			return "postgres://relay:pw@db2:5432/tenant"
		}
		return ""
	}}

func TestParseFillsDefaults(t *testing.T) {
	list, err := fleet.Parse([]byte(`
sources:
  - db: postgres://relay@db1:5432/orders
  - name: payments
    db: postgres://relay@db1:5432/orders
    schema: payments
    weight: 3
    endpoints: true
  - db: env:TENANT_URL
    schema: t1
    sink: nats://127.0.0.1:4222?subject=x
    wal: true
  - db: sqlite:/var/lib/postbox/shop.db
`), defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.Source{
		{Name: "orders/public", DB: "postgres://relay@db1:5432/orders", Schema: "public", Weight: 1, Sink: defaults.Sink},
		{Name: "payments", DB: "postgres://relay@db1:5432/orders", Schema: "payments", Weight: 3, Endpoints: true},
		{Name: "tenant/t1", DB: "postgres://relay:pw@db2:5432/tenant", Schema: "t1", Weight: 1, Sink: "nats://127.0.0.1:4222?subject=x", WAL: true},
		{Name: "shop", DB: "sqlite:/var/lib/postbox/shop.db", Schema: "public", Weight: 1, Sink: defaults.Sink},
	}
	if len(list) != len(want) {
		t.Fatalf("got %d sources, want %d: %+v", len(list), len(want), list)
	}
	for i := range want {
		if list[i] != want[i] {
			t.Errorf("source %d:\n got %+v\nwant %+v", i+1, list[i], want[i])
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"empty", ``, "empty"},
		{"unknown key", "sources:\n  - db: postgres://a/b\n    wieght: 2\n", "wieght"},
		{"no db", "sources:\n  - name: a\n", "db is required"},
		{"empty env", "sources:\n  - db: env:NOPE\n", "NOPE is empty"},
		{"weight", "sources:\n  - db: postgres://a/b\n    weight: 1001\n", "weight 1001"},
		{"negative weight", "sources:\n  - db: postgres://a/b\n    weight: -1\n", "weight -1"},
		{"schema", "sources:\n  - db: postgres://a/b\n    schema: \"x;drop\"\n", "schema `x;drop`"},
		{"sink and endpoints", "sources:\n  - db: postgres://a/b\n    sink: https://x\n    endpoints: true\n", "not both"},
		{"duplicate name", "sources:\n  - db: postgres://a/b\n  - db: postgres://c/b\n", "also source 1's"},
		{"name", "sources:\n  - db: postgres://a/b\n    name: \"a b\"\n", "name `a b`"},
		{"two documents", "sources: []\n---\nsources: []\n", "second YAML document"},
		{"not a list", "sources: 3\n", "cannot unmarshal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := fleet.Parse([]byte(c.file), defaults)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}

// Without a default sink, a source that names none is refused; a password
// read from the environment never appears in an error.
func TestParseNeedsASinkAndHidesURLs(t *testing.T) {
	_, err := fleet.Parse([]byte("sources:\n  - db: env:TENANT_URL\n    name: \"bad name\"\n"), fleet.Defaults{Getenv: defaults.Getenv})
	if err == nil || !strings.Contains(err.Error(), "no sink") {
		t.Fatalf("err = %v, want no sink", err)
	}
	_, err = fleet.Parse([]byte("sources:\n  - db: env:TENANT_URL\n    name: \"bad name\"\n"), defaults)
	if err == nil || strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "db2") {
		t.Fatalf("err = %v: want a refusal that does not quote the URL", err)
	}
}

// Whatever the file, Parse returns an error or a list whose every source
// is complete and named once.
func FuzzParse(f *testing.F) {
	f.Add([]byte("sources:\n  - db: postgres://a/b\n    weight: 2\n"))
	f.Add([]byte("sources:\n  - db: sqlite:x.db\n    name: a\n  - db: sqlite:y.db\n"))
	f.Add([]byte("sources: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, err := fleet.Parse(data, defaults)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, s := range list {
			if s.DB == "" || s.Name == "" || s.Weight < 1 || s.Weight > fleet.MaxWeight || seen[s.Name] ||
				(s.Sink == "") == !s.Endpoints {
				t.Fatalf("incomplete or repeated source %+v in %q", s, data)
			}
			seen[s.Name] = true
		}
	})
}

func TestQueryReadsColumnsByName(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `create schema `+schema+`; create table `+schema+`.tenants (id int, url text, sch text, w int, ep bool, active bool);
		insert into `+schema+`.tenants values
			(1, 'postgres://r@h/one', 'a', 2, false, true),
			(2, 'postgres://r@h/two', null, null, true, true),
			(3, 'postgres://r@h/three', 'c', 1, false, false)`); err != nil {
		t.Fatal(err)
	}
	list, err := fleet.Query(ctx, pool, `select 't'||id as name, url as db, sch as schema, w as weight, ep as endpoints
		from `+schema+`.tenants where active order by id`, defaults)
	if err != nil {
		t.Fatal(err)
	}
	want := []fleet.Source{
		{Name: "t1", DB: "postgres://r@h/one", Schema: "a", Weight: 2, Sink: defaults.Sink},
		{Name: "t2", DB: "postgres://r@h/two", Schema: "public", Weight: 1, Endpoints: true},
	}
	if len(list) != 2 || list[0] != want[0] || list[1] != want[1] {
		t.Fatalf("got %+v, want %+v", list, want)
	}
	for _, c := range []struct{ query, want string }{
		{`select url as db, id from ` + schema + `.tenants`, `column "id"`},
		{`select url from ` + schema + `.tenants`, `column "url"`},
		{`select 'x' as name from ` + schema + `.tenants`, "no db column"},
		{`select url as db, 'x' as weight from ` + schema + `.tenants`, "weight: want an integer"},
		{`select url as db, 5000 as weight from ` + schema + `.tenants`, "weight 5000"},
		{`select url as db, 'x' as name from ` + schema + `.tenants`, "also source 1's"},
	} {
		if _, err := fleet.Query(ctx, pool, c.query, defaults); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one saying %q", c.query, err, c.want)
		}
	}
}
