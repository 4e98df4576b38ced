package manifest_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/endpoint/manifest"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/store/sqlite"
)

// A file of one endpoint, planned and applied to a SQLite store; the
// second plan finds nothing to do.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "manifest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := sqlite.Open(ctx, filepath.Join(dir, "postbox.db"), sqlite.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	k, err := keyring.Parse(keyring.GenerateKey()) // the operator's secrets key
	if err != nil {
		log.Fatal(err)
	}
	a, err := admin.New(admin.Config{Store: s.Driver(), Keyring: k})
	if err != nil {
		log.Fatal(err)
	}

	const file = `version: 1
endpoints:
  - name: warehouse
    url: https://93.184.215.14/hooks
    types: [order.*]
    filter: 'payload.total > 100'
    headers: {X-Api-Key: env:WAREHOUSE_KEY}
`
	m, err := manifest.Load(strings.NewReader(file))
	if err != nil {
		log.Fatal(err)
	}
	// The environment of the example: os.LookupEnv in a program.
	lookup := func(name string) (string, bool) { return "key-of-" + name, true }
	if err := m.Resolve(lookup); err != nil {
		log.Fatal(err)
	}
	plan, err := m.Plan(ctx, a, manifest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(plan)
	r, err := manifest.Apply(ctx, a, plan)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("created %d, %d secret to hand to the receiver once\n", len(r.Done), len(r.Secrets))

	plan, err = m.Plan(ctx, a, manifest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(plan)
	// Output:
	// + create warehouse
	//     url: webhook https://93.184.215.14/…
	//     types: ["order.*"]
	//     filter: "payload.total > 100"
	//     concurrency: 8
	//     secret: generated, printed once
	//     headers: X-Api-Key (env:WAREHOUSE_KEY)
	//
	// 1 to create, 0 to update, 0 to remove, 0 unchanged
	// created 1, 1 secret to hand to the receiver once
	// no changes: 1 endpoint matches the file
}
