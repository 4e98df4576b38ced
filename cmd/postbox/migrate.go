package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
)

func setupMigrate(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	ordered := fs.Bool("ordered", false, "also build the index that ordered relays (relay --ordered) need, without blocking writes; needed once, PostgreSQL only")
	wal := fs.Bool("wal", false, "WAL mode (relay --wal): producers' commits skip the notify trigger, which only relays waiting for notifications need; PostgreSQL only")
	noWAL := fs.Bool("no-wal", false, "leave WAL mode: producers' commits notify waiting relays again (the default)")
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
		if err := setProducerNotify(ctx, s, *wal, *noWAL); err != nil {
			return err
		}
		if !*ordered {
			return nil
		}
		pg, ok := s.Postgres()
		if !ok {
			fmt.Println("ordered relays: nothing more to do on SQLite (its migrations keep the index they need)")
			return nil
		}
		if err := pg.MigrateOrdered(ctx); err != nil {
			return err
		}
		fmt.Println("ordered relays: index outbox_events_aggregate_open_idx is ready")
		return nil
	}
}

// setProducerNotify is migrate's --wal and --no-wal.
func setProducerNotify(ctx context.Context, s *dburl.DB, wal, noWAL bool) error {
	switch {
	case wal && noWAL:
		return fmt.Errorf("%w: give --wal or --no-wal, not both", errUsage)
	case !wal && !noWAL:
		return nil
	}
	pg, ok := s.Postgres()
	if !ok {
		return fmt.Errorf("%w: --wal and --no-wal are for PostgreSQL", errUsage)
	}
	if err := pg.SetProducerNotify(ctx, noWAL); err != nil {
		return err
	}
	if wal {
		fmt.Println("WAL mode: producers' commits skip the notify trigger (relays run with --wal)")
	} else {
		fmt.Println("producers' commits notify waiting relays again")
	}
	return nil
}
