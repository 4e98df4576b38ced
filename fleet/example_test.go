package fleet_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/postbox-go/postbox/fleet"
)

// A sources file, completed with the command's defaults.
func ExampleParse() {
	list, err := fleet.Parse([]byte(`
sources:
  - db: postgres://relay@db1:5432/shop
  - name: payments
    db: postgres://relay@db1:5432/shop
    schema: payments
    weight: 2
    endpoints: true
`), fleet.Defaults{Schema: "public", Sink: "https://partner.example/hooks"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range list {
		fmt.Printf("%s: schema %s, weight %d, sink %q, endpoints %v\n", s.Name, s.Schema, s.Weight, s.Sink, s.Endpoints)
	}
	// Output:
	// shop/public: schema public, weight 1, sink "https://partner.example/hooks", endpoints false
	// payments: schema payments, weight 2, sink "", endpoints true
}

// A fleet over a file re-read every 10 s: Open builds each source's relay
// (postbox relay --sources builds a service.Relay on a pool per database).
func ExampleFleet() {
	fl, err := fleet.New(fleet.Config{
		List: func(context.Context) ([]fleet.Source, error) {
			return fleet.ReadFile("sources.yaml", fleet.Defaults{Schema: "public", Sink: "https://partner.example/hooks"})
		},
		Every: 10 * time.Second,
		Open: func(ctx context.Context, src fleet.Source, log *slog.Logger) (fleet.Relay, error) {
			return nil, fmt.Errorf("build the relay of %s here", src.Name)
		},
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	fmt.Println(fl.Run(ctx) != nil) // no sources.yaml here: the first listing fails
	// Output: true
}
