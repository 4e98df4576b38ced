package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/cmd/postbox/internal/demo"
)

func setupDemo(fs *flag.FlagSet) func(context.Context) error {
	var (
		db        = fs.String("db", "", "database: empty for a new SQLite file in a temporary folder, sqlite:PATH (a new file), postgres://... (uses the schema "+`"postbox_demo"`+", dropped first, and at the end unless --keep), or mysql://.../DB (a new or empty database, created, and dropped at the end unless --keep)")
		events    = fs.Int("events", demo.EventsDefault, "orders to create")
		faultRate = fs.Float64("fault-rate", demo.FaultRateDefault, "probability of each injected fault (0 turns them off)")
		rate      = fs.Int("rate", demo.RateDefault, "orders created per second")
		timeout   = fs.Duration("timeout", demo.TimeoutDefault, "give up after this long")
		keep      = fs.Bool("keep", false, "keep the PostgreSQL schema postbox_demo after the run (dropped at the end of a run that reconciles)")
	)
	return func(ctx context.Context) error {
		if err := positive(fs, "events", "rate", "timeout"); err != nil {
			return err
		}
		if *faultRate < 0 || *faultRate >= 1 {
			return fmt.Errorf("%w: --fault-rate %g: want 0 (no faults) up to less than 1", errUsage, *faultRate)
		}
		if *faultRate == 0 {
			*faultRate = -1 // "no faults", as opposed to the default
		}
		fmt.Printf("postbox demo: %d orders at %d/s, fault rate %g, on %s\n", *events, *rate, max(*faultRate, 0), describeDB(*db))
		rep, err := demo.Run(ctx, demo.Config{
			DB: *db, Events: *events, FaultRate: *faultRate, Rate: *rate, Timeout: *timeout, Keep: *keep,
			Out: os.Stdout, Live: isTerminal(os.Stdout),
		})
		if err != nil {
			return err
		}
		rep.Print(os.Stdout)
		if !rep.OK() {
			return errors.New("demo: reconciliation failed")
		}
		return nil
	}
}

func describeDB(url string) string {
	if url == "" {
		return "SQLite (a temporary file)"
	}
	return dburl.Redact(url)
}

// isTerminal reports whether f is a terminal (a character device).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
