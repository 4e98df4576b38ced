package main

import (
	"context"
	"flag"
	"fmt"
)

func setupMigrate(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	ordered := fs.Bool("ordered", false, "also build the index that ordered relays (relay --ordered) need, without blocking writes; needed once, PostgreSQL only")
	return func(ctx context.Context) error {
		s, err := db.open(ctx, "migrate", false)
		if err != nil {
			return err
		}
		defer s.Close()
		applied, err := s.Migrate(ctx)
		if err != nil {
			return err
		}
		if len(applied) == 0 {
			fmt.Println("schema is up to date")
		} else {
			fmt.Printf("applied migrations %v\n", applied)
		}
		if !*ordered {
			return nil
		}
		if s.Postgres == nil {
			fmt.Println("ordered relays: nothing more to do on SQLite (its migrations keep the index they need)")
			return nil
		}
		if err := s.Postgres.MigrateOrdered(ctx); err != nil {
			return err
		}
		fmt.Println("ordered relays: index outbox_events_aggregate_open_idx is ready")
		return nil
	}
}
