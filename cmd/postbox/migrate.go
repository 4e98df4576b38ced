package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/store/postgres"
)

func setupMigrate(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	ordered := fs.Bool("ordered", false, "also build the index that ordered relays (relay --ordered) need, without blocking writes; needed once, PostgreSQL only")
	wal := fs.Bool("wal", false, "WAL mode (relay --wal): producers' commits skip the notify trigger, which only relays waiting for notifications need; PostgreSQL only")
	noWAL := fs.Bool("no-wal", false, "leave WAL mode: producers' commits notify waiting relays again (the default)")
	partitioned := fs.Bool("partitioned", false, "partition the outbox by event id (UUIDv7: creation time), one partition per --partition-interval, so that retention drops whole partitions; converts an existing outbox online (a lock of at most 2s, then delivered events moved in batches); PostgreSQL only")
	partitionInbox := fs.Bool("partition-inbox", false, "with --partitioned: partition the inbox too (inbox_events, by event id), so that the inbox's retention drops whole partitions; a done row is then kept up to an interval longer than that retention")
	interval := fs.Duration("partition-interval", postgres.PartitionIntervalDefault, "with --partitioned: the time range of each partition (at least 1m), stored in the schema; giving another one later changes it for the partitions created from then on (run again without it, the stored one is kept)")
	return func(ctx context.Context) error {
		intervalGiven := false
		fs.Visit(func(f *flag.Flag) { intervalGiven = intervalGiven || f.Name == "partition-interval" })
		if *interval < partitionIntervalMin {
			return fmt.Errorf("%w: --partition-interval %s: want at least %s", errUsage, *interval, partitionIntervalMin)
		}
		if *partitioned && isSQLite(db.url) {
			return fmt.Errorf("%w: --partitioned is for PostgreSQL", errUsage)
		}
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
		pg, isPG := s.Postgres()
		if *ordered {
			if !isPG {
				fmt.Println("ordered relays: nothing more to do on SQLite (its migrations keep the index they need)")
			} else {
				// Before partitioning: the conversion copies the index to
				// every partition.
				if err := pg.MigrateOrdered(ctx); err != nil {
					return err
				}
				fmt.Println("ordered relays: index outbox_events_aggregate_open_idx is ready")
			}
		}
		if !*partitioned {
			return nil
		}
		// Without --partition-interval, zero: the stored interval is kept
		// (the default, when converting).
		p := postgres.PartitionParams{Inbox: *partitionInbox}
		if intervalGiven {
			p.Interval = *interval
		}
		rep, err := pg.Partition(ctx, p)
		if err != nil {
			return err
		}
		if rep.Converted {
			fmt.Printf("outbox partitioned by id, one partition per %s: %d unfinished events moved in the switch, %d delivered events after it\n", rep.Interval, rep.Moved, rep.MovedDone)
		} else {
			fmt.Printf("outbox already partitioned; interval %s", rep.Interval)
			if rep.MovedDone > 0 {
				fmt.Printf("; %d delivered events moved from the plain table", rep.MovedDone)
			}
			fmt.Println()
		}
		if len(rep.Tables) > 0 {
			fmt.Printf("partitioned by time too: %s (%d rows moved after the switch)\n", strings.Join(rep.Tables, " "), rep.MovedRows)
		}
		if len(rep.Created) > 0 {
			fmt.Printf("partitions created: %s\n", strings.Join(rep.Created, " "))
		}
		return nil
	}
}

// partitionIntervalMin is the shortest --partition-interval: a partition
// per minute already makes 1,440 tables a day. It is longer than
// postgres.PartitionIntervalMin (a second), which only tests use to see
// partitions come and go without waiting.
const partitionIntervalMin = time.Minute

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
