package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/postbox-go/postbox/cmd/postbox/internal/chaos"
	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
)

func setupChaos(fs *flag.FlagSet) func(context.Context) error {
	var (
		db           = fs.String("db", "", "PostgreSQL server, postgres://USER@HOST:PORT/DB: the run makes its own schema there and drops it afterwards (kept when the run fails)")
		duration     = fs.Duration("duration", chaos.DurationDefault, "how long events are produced and faults injected (draining comes after)")
		rate         = fs.Int("events-per-second", chaos.EventsPerSecondDefault, "events produced per second, one per transaction")
		ordered      = fs.Bool("ordered", false, "run the relays with --ordered and check the order of each aggregate's events")
		faults       = fs.String("faults", "all", "fault kinds injected in turn, separated by commas, or all (all but db-restart unless --allow-restart, but partition-drop unless --partitioned, and but source-outage unless --sources; relay-kill is kill): "+strings.Join(chaos.FaultNames(), ", "))
		partitioned  = fs.Bool("partitioned", false, fmt.Sprintf("partition the outbox, as postbox migrate --partitioned does, with partitions of %v created ahead and dropped once past by the run every %v (what a relay's retention does every minute): every fault then strikes a partitioned outbox, and all includes %s; naming %s partitions it", chaos.PartitionInterval, chaos.PartitionInterval/2, chaos.FaultPartitionDrop, chaos.FaultPartitionDrop))
		allowRestart = fs.String("allow-restart", "", "shell command that crashes and restarts the database server, such as 'pg_ctlcluster 15 main restart -m immediate' (enables db-restart)")
		lease        = fs.Duration("lease", chaos.LeaseDefault, "the relays' --lease: short, so that a dead relay's events come back within a fault's slot; give your production lease to see its recovery times")
		relays       = fs.Int("relays", chaos.RelaysDefault, "number of `postbox relay` processes")
		endpoints    = fs.Int("endpoints", 0, fmt.Sprintf("endpoints mode: the relays run `postbox relay --endpoints` and deliver every event to this many webhook endpoints (consumers the run starts and registers with `postbox endpoints add`), %.0f %% of each one's requests failing at random besides the faults; the invariants are checked at each endpoint (0: one --webhook-url)", 100*chaos.RandomFailuresDefault))
		sources      = fs.Int("sources", 0, fmt.Sprintf("many sources: the run creates this many outboxes (schemas, at least 2) in two scratch databases of its own on the server of --db, one of them alone in its database (the victim of %s), runs its relay processes as `postbox relay --sources FILE` over all of them, produces to every source and reconciles each; all includes %s (0: one schema)", chaos.FaultSourceOutage, chaos.FaultSourceOutage))
		keep         = fs.Bool("keep", false, "keep the run's schema and the relays' logs even when it succeeds (they are always kept when it fails)")
		asJSON       = fs.Bool("json", false, "print the report as JSON (progress lines go to stderr)")
	)
	return func(ctx context.Context) error {
		if err := positive(fs, "duration", "events-per-second", "lease", "relays"); err != nil {
			return err
		}
		if err := notNegative(fs, "endpoints"); err != nil {
			return err
		}
		if err := required("db", *db); err != nil {
			return err
		}
		switch {
		case *sources == 1 || *sources < 0:
			return fmt.Errorf("%w: --sources %d: give at least 2 sources (or leave --sources out: one schema)", errUsage, *sources)
		case *sources >= 2 && *endpoints > 0:
			return fmt.Errorf("%w: --sources does not go with --endpoints yet: each source delivers to a consumer of its own", errUsage)
		case *sources >= 2 && *partitioned:
			return fmt.Errorf("%w: --sources does not go with --partitioned yet", errUsage)
		}
		kinds, err := chaos.ParseFaultsWith(*faults, chaos.FaultOptions{AllowRestart: *allowRestart != "", Partitioned: *partitioned, Sources: *sources >= 2})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("chaos: cannot find the postbox executable for the relays: %w", err)
		}
		var progress io.Writer = os.Stdout
		if *asJSON {
			progress = os.Stderr
		}
		mode := ""
		if *endpoints > 0 {
			mode = fmt.Sprintf(" to %d endpoints", *endpoints)
		}
		if *sources >= 2 {
			mode = fmt.Sprintf(" over %d sources (postbox relay --sources)", *sources)
		}
		fmt.Fprintf(progress, "postbox chaos: %d relay processes%s, %d events/s for %v, faults %s, on %s\n",
			*relays, mode, *rate, *duration, strings.Join(kinds, ","), dburl.Redact(*db))
		rep, err := chaos.Run(ctx, chaos.Config{
			DB: *db, Executable: exe, Duration: *duration, EventsPerSecond: *rate, Ordered: *ordered,
			Faults: kinds, Partitioned: *partitioned, AllowRestart: *allowRestart, Relays: *relays, Endpoints: *endpoints, Sources: *sources, Lease: *lease, Keep: *keep, Out: progress,
		})
		if err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(rep); err != nil {
				return err
			}
		} else {
			rep.Print(os.Stdout)
		}
		if !rep.OK {
			return errors.New("chaos: reconciliation failed")
		}
		return nil
	}
}
