package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/fleet/share"
)

// shareFlags are the flags that share the sources among relay processes.
type shareFlags struct {
	db       string
	name     string
	replicas int
}

func (s *shareFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.db, "fleet-db", "", "with --sources or --sources-query: share the sources among the relay processes running with the same --fleet-db and --fleet, each holding an advisory lock on this database (a PostgreSQL URL, reached directly or through a pooler in session mode); with --sources-query the registry (--db) by default; without one, every process drains every source")
	fs.StringVar(&s.name, "fleet", share.FleetDefault, "with --fleet-db or --sources-query: the name of the processes that share the sources (two fleets on one database do not mix)")
	fs.IntVar(&s.replicas, "source-replicas", 1, "with --fleet-db or --sources-query: how many of the processes sharing the sources drain each one")
}

// shareOnlyFlags are the relay's flags that mean something only when the
// sources are shared.
var shareOnlyFlags = []string{"fleet-db", "fleet", "source-replicas"}

// shareWatchEvery is how often a process sharing the sources looks for
// processes that joined or left (one read of pg_locks).
const shareWatchEvery = time.Second

// fleetURL is the database the sources are shared on: --fleet-db, or the
// registry of --sources-query; "" when they are not shared.
func (f *relayFlags) fleetURL() string {
	if f.share.db != "" {
		return f.share.db
	}
	if f.sources.query != "" {
		return f.db.url
	}
	return ""
}

// checkShare refuses the sharing flags that cannot work.
func (f *relayFlags) checkShare(fs *flag.FlagSet) error {
	if f.share.replicas < 1 {
		return fmt.Errorf("%w: --source-replicas must be at least 1", errUsage)
	}
	if f.share.db != "" && !dburl.IsPostgres(f.share.db) {
		return fmt.Errorf("%w: --fleet-db needs a PostgreSQL URL (its advisory locks share the sources)", errUsage)
	}
	if f.fleetURL() == "" {
		var err error
		fs.Visit(func(fl *flag.Flag) {
			if err == nil && (fl.Name == "fleet" || fl.Name == "source-replicas") {
				err = fmt.Errorf("%w: --%s applies only when the sources are shared: with --fleet-db or --sources-query", errUsage, fl.Name)
			}
		})
		return err
	}
	return nil
}

// sharing is this process's membership of the fleet that shares the
// sources, kept while the relay runs: Mine is the fleet's Config.Mine.
type sharing struct {
	url      string
	opt      share.Options
	replicas int
	log      *slog.Logger

	mu     sync.Mutex
	member *share.Member
	live   []int // nil while not a member
}

// joinFleet joins the fleet at url, before the sources are first listed.
func joinFleet(ctx context.Context, url, name string, replicas int, log *slog.Logger) (*sharing, error) {
	s := &sharing{url: url, opt: share.Options{Fleet: name}, replicas: replicas, log: log}
	if err := s.join(ctx); err != nil {
		return nil, fmt.Errorf("--fleet-db: %w", err)
	}
	return s, nil
}

// join takes a slot and reads the live ones.
func (s *sharing) join(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(s.url)
	if err != nil {
		return dburl.Scrub(err, s.url)
	}
	m, err := share.Join(ctx, cfg, s.opt)
	if err != nil {
		return err
	}
	live, err := m.Live(ctx)
	if err != nil {
		m.Close()
		return err
	}
	s.mu.Lock()
	s.member, s.live = m, live
	s.mu.Unlock()
	s.log.Info(fmt.Sprintf("fleet: sharing the sources with the relay processes of fleet %s: this one is slot %d of %d live", s.opt.Fleet, m.Slot(), len(live)),
		"fleet_db", dburl.Redact(s.url), "slot", m.Slot(), "live", live, "replicas", s.replicas)
	return nil
}

// run watches the live slots until ctx ends, refreshing fl when they
// change, and joins again (with a back-off) when the slot is lost; then it
// leaves the fleet.
func (s *sharing) run(ctx context.Context, fl *fleet.Fleet) {
	defer func() {
		s.mu.Lock()
		if s.member != nil {
			s.member.Close()
		}
		s.mu.Unlock()
	}()
	failures := 0
	for ctx.Err() == nil {
		s.mu.Lock()
		m := s.member
		s.mu.Unlock()
		if m == nil {
			if err := s.join(ctx); err != nil {
				failures++
				delay := min(time.Second<<min(failures-1, 5), 30*time.Second)
				if failures == 1 {
					s.log.Error("fleet: cannot join the fleet again; the sources running go on", "error", err, "retry_in", delay)
				}
				sleepCtx(ctx, delay)
				continue
			}
			failures = 0
			fl.Refresh()
			continue
		}
		err := m.Watch(ctx, shareWatchEvery, func(live []int) {
			s.mu.Lock()
			changed := len(live) != len(s.live)
			s.live = live
			s.mu.Unlock()
			if changed {
				s.log.Info(fmt.Sprintf("fleet: %d relay processes share the sources", len(live)), "slot", m.Slot(), "live", live)
			}
			fl.Refresh()
		})
		if err == nil {
			return
		}
		s.log.Error("fleet: this process lost its slot; it keeps its sources and joins again", "error", err)
		m.Close()
		s.mu.Lock()
		s.member, s.live = nil, nil
		s.mu.Unlock()
	}
}

// errNotAMember is Mine's error while the process has lost its slot: the
// fleet keeps the sources it runs.
var errNotAMember = errors.New("this process is not a member of the fleet (joining again)")

// Mine picks this process's share of list.
func (s *sharing) Mine(_ context.Context, list []fleet.Source) ([]fleet.Source, error) {
	s.mu.Lock()
	m, live := s.member, s.live
	s.mu.Unlock()
	if m == nil {
		return nil, errNotAMember
	}
	names := make([]string, len(list))
	byName := make(map[string]fleet.Source, len(list))
	for i, src := range list {
		names[i] = src.Name
		byName[src.Name] = src
	}
	mine := share.Mine(names, live, m.Slot(), s.replicas)
	out := make([]fleet.Source, len(mine))
	for i, n := range mine {
		out[i] = byName[n]
	}
	return out, nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
