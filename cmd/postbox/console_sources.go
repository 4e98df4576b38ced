package main

import (
	"context"
	"time"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
)

// consoleSourceConnsDefault is console --source-conns: a console reads
// little, and most of its sources sit idle.
const consoleSourceConnsDefault = 4

// consoleSourcesRun is what postbox console --sources runs with.
type consoleSourcesRun struct {
	src     *sourcesFlags
	db      *dbFlags // the registry of --sources-query
	key     *secretsKeyFlag
	guard   *guardFlags
	cfg     console.Config // every source's settings
	idle    time.Duration
	addr    string
	proxies string
}

// runConsoleSources is postbox console --sources or --sources-query: one
// console over many sources (console.Multi), each source's store opened
// at its first request on the pool of its database, and closed after
// --source-idle without one.
func runConsoleSources(ctx context.Context, run consoleSourcesRun) error {
	logger := run.cfg.Logger
	// The console reads the outboxes: a source's sink does not matter,
	// and one that names none is not refused.
	list, closeList, err := run.src.lister(ctx, run.db, fleet.Defaults{Schema: run.db.schema, Sink: "none"})
	if err != nil {
		return err
	}
	defer closeList()
	k, err := consoleKey(run.key)
	if err != nil {
		return err
	}
	pools := dburl.NewPools(dburl.Options{ApplicationName: "postbox console", MustExist: true}, int32(run.src.conns))
	m, err := console.NewMulti(ctx, console.MultiConfig{
		Console: run.cfg,
		Every:   run.src.every,
		Idle:    run.idle,
		List: func(ctx context.Context) ([]console.MultiSource, error) {
			srcs, err := list(ctx)
			if err != nil {
				return nil, err
			}
			out := make([]console.MultiSource, len(srcs))
			for i, s := range srcs {
				out[i] = console.MultiSource{Name: s.Name, DB: s.DB, Schema: s.Schema}
			}
			return out, nil
		},
		Open: func(ctx context.Context, src console.MultiSource) (console.SourceConsole, error) {
			db, err := pools.Open(ctx, src.DB, src.Schema)
			if err != nil {
				return console.SourceConsole{}, err
			}
			if err := db.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
				db.Close()
				return console.SourceConsole{}, err
			}
			engine, _, err := consoleAdmin(db.Endpoints, k, run.guard, run.cfg.ReadOnly)
			if err != nil {
				db.Close()
				return console.SourceConsole{}, err
			}
			return console.SourceConsole{
				Store: db.Console, Endpoints: engine, Close: db.Close,
				Replay: replay.Config{Outbox: db.Outbox, Endpoints: db.Endpoints, Logger: logger.With("source", src.Name)},
			}, nil
		},
	})
	if err != nil {
		return err
	}
	endpoints := consoleEndpointsMode(k, run.cfg.ReadOnly)
	what := "--sources " + run.src.file
	if run.src.query != "" {
		what = "--sources-query on " + dburl.Redact(run.db.url)
	}
	auth := "token"
	if run.cfg.Token == "" {
		auth = "none (loopback only)"
	}
	replaying := "from each outbox's table"
	if run.cfg.ReadOnly {
		replaying = "off (read-only)"
	}
	return serveConsole(ctx, run.addr, m, m.Run, true, logger, func(addr string) {
		logger.Info("console on http://"+addr+"/", "sources", what, "every", run.src.every, "source_idle", run.idle,
			"pool_max_conns", run.src.conns, "read_only", run.cfg.ReadOnly, "auth", auth, "endpoints", endpoints, "replay", replaying,
			"session_idle", run.cfg.SessionIdle, "session_max", run.cfg.SessionMax, "trusted_proxies", run.proxies)
	})
}
