package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/postbox-go/postbox/archive"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/fleet"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/store"
)

// consoleShutdownTimeout bounds the console's shutdown on SIGINT/SIGTERM.
const consoleShutdownTimeout = 5 * time.Second

func setupConsole(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var (
		addr       = fs.String("addr", "127.0.0.1:8080", "HOST:PORT the console listens on; an address other than loopback needs a token")
		token      = fs.String("token", "", fmt.Sprintf("token the console asks for (a login form, or Authorization: Bearer), at least %d bytes; prefer --token-file or the environment variable, which ps does not show", console.TokenMinLength))
		tokenFile  = fs.String("token-file", "", "file holding the token (surrounding white space is ignored)")
		readOnly   = fs.Bool("read-only", false, "show no action: no retry, no purge, no change to an endpoint, no replay (pages and JSON API alike; --archive is not opened)")
		sample     = fs.Duration("sample", console.SampleEveryDefault, "how often the overview reads the outbox's counts, for its numbers and its chart (three queries each time, and two more for the webhook endpoints and their deliveries, whatever the number of endpoints and viewers)")
		idle       = fs.Duration("session-idle", console.SessionIdleDefault, "a login session ends after this long without a request (the overview's own refreshes do not count)")
		lifetime   = fs.Duration("session-max", console.SessionMaxDefault, "a login session ends this long after the login, however it is used")
		proxies    = fs.String("trusted-proxy", "", "CIDR[,CIDR]: reverse proxies whose X-Forwarded-For (the client, for the login back-off) and X-Forwarded-Proto (https: a Secure cookie) are believed; none by default")
		logLevel   = fs.String("log-level", "info", "debug, info, warn or error")
		logFormat  = fs.String("log-format", "text", "text or json")
		archiveURL = fs.String("archive", "", "the archive the replay action reads too, as postbox relay --archive writes it: file:///DIR, s3://BUCKET?region=R[&endpoint=URL][&prefix=P]; without it, replays read the delivered events the outbox keeps")
	)
	// Many sources: the list (--sources, --sources-query), how often it
	// is read again, each database's pool, how long an unused source's
	// store stays open.
	var src sourcesFlags
	src.registerList(fs, "one console over many outboxes", ", re-read every --sources-every; every page switches between them (see docs/scaling.md)")
	fs.DurationVar(&src.every, "sources-every", fleet.EveryDefault, "with --sources or --sources-query: how often the list is read again")
	fs.IntVar(&src.conns, "source-conns", consoleSourceConnsDefault, "with --sources or --sources-query: the most connections of each database's pool, shared by its sources (schemas)")
	sourceIdle := fs.Duration("source-idle", console.SourceIdleDefault, "with --sources or --sources-query: a source's store is closed after this long without a request, and opened again at the next")
	var key secretsKeyFlag
	key.register(fs, "optional: without it the endpoints are shown, and adding them, rotating their secrets, testing them and changing their credentials are refused")
	var g guardFlags
	g.register(fs)
	return func(ctx context.Context) error {
		if *token != "" && *tokenFile != "" {
			return fmt.Errorf("%w: give --token or --token-file, not both", errUsage)
		}
		secret := *token
		if *tokenFile != "" {
			b, err := os.ReadFile(*tokenFile)
			if err != nil {
				return fmt.Errorf("--token-file: %w", err)
			}
			if secret = strings.TrimSpace(string(b)); secret == "" {
				return fmt.Errorf("--token-file %s is empty", *tokenFile)
			}
		}
		if secret != "" && len(secret) < console.TokenMinLength {
			return fmt.Errorf("%w: the token is %d bytes: want at least %d", errUsage, len(secret), console.TokenMinLength)
		}
		if err := console.CheckAddr(*addr, secret); err != nil {
			return fmt.Errorf("%w: --addr: %v", errUsage, err)
		}
		if err := positive(fs, "sample", "session-idle", "session-max"); err != nil {
			return err
		}
		trusted, err := console.ParseTrustedProxies(*proxies)
		if err != nil {
			return fmt.Errorf("%w: --trusted-proxy: %v", errUsage, err)
		}
		logger, err := newLogger(*logLevel, *logFormat)
		if err != nil {
			return err
		}
		if src.on() {
			if err := src.checkList(&db); err != nil {
				return err
			}
			switch {
			case *archiveURL != "":
				return fmt.Errorf("%w: --archive does not apply with --sources or --sources-query: an archive per source is not built yet", errUsage)
			case src.every <= 0 || *sourceIdle <= 0:
				return fmt.Errorf("%w: --sources-every and --source-idle must be positive", errUsage)
			case src.conns < 1:
				return fmt.Errorf("%w: --source-conns must be at least 1", errUsage)
			}
			cfg := console.Config{
				Token: secret, ReadOnly: *readOnly, SampleEvery: *sample, Logger: logger,
				SessionIdle: *idle, SessionMax: *lifetime, TrustedProxies: trusted, Kinds: endpointKinds,
			}
			return runConsoleSources(ctx, consoleSourcesRun{
				src: &src, db: &db, key: &key, guard: &g, cfg: cfg, idle: *sourceIdle, addr: *addr, proxies: *proxies,
			})
		}
		if err := src.checkNotSources(fs, []string{"source-idle"}); err != nil {
			return err
		}
		s, err := db.open(ctx, "console", true)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		engine, endpoints, err := consoleEndpoints(s.Endpoints, &key, &g, *readOnly)
		if err != nil {
			return err
		}
		replays := replay.Config{Outbox: s.Outbox, Endpoints: s.Endpoints, Logger: logger}
		replaying := "from the outbox's table"
		// A read-only console replays nothing: its --archive (a
		// variable left set, say) is not opened, and a bad one stops
		// nothing.
		if *archiveURL != "" && !*readOnly {
			a, err := archive.Open(ctx, *archiveURL)
			if err != nil {
				return fmt.Errorf("--archive: %w", err)
			}
			defer closeArchive(a, logger) // after Run: the replay running has stopped
			replays.Archive = a
			replaying = "from the outbox's table and the archive " + a.String()
		}
		if *readOnly {
			replaying = "off (read-only)"
		}
		c, err := console.New(console.Config{
			Store: s.Console, Token: secret, ReadOnly: *readOnly, SampleEvery: *sample, Logger: logger,
			SessionIdle: *idle, SessionMax: *lifetime, TrustedProxies: trusted, Endpoints: engine, Kinds: endpointKinds,
			Replay: replays,
		})
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		auth := "token"
		if secret == "" {
			auth = "none (loopback only)"
		}
		return serveConsole(ctx, *addr, c, c.Run, false, logger, func(addr string) {
			logger.Info("console on http://"+addr+"/", "store", s.Console.String(), "read_only", *readOnly, "auth", auth,
				"endpoints", endpoints, "replay", replaying, "session_idle", *idle, "session_max", *lifetime, "trusted_proxies", *proxies)
		})
	}
}

// serveConsole serves h on addr, with run (its sampling) beside, until
// ctx is done; started logs the start line with the address listened on.
// run's context ends with ctx, or with runAfterShutdown once the server
// has shut down (a Multi closes its sources' stores when its Run ends:
// not under the requests still served).
func serveConsole(ctx context.Context, addr string, h http.Handler, run func(context.Context) error, runAfterShutdown bool, logger *slog.Logger, started func(addr string)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A retry or purge of every failed event may take minutes
		// (the console bounds it at 10).
		WriteTimeout:   11 * time.Minute,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
	started(ln.Addr().String())
	parent := ctx
	if runAfterShutdown {
		parent = context.WithoutCancel(ctx)
	}
	runCtx, stopRun := context.WithCancel(parent)
	defer stopRun()
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		run(runCtx)
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		stopRun()
		<-sampled
		return fmt.Errorf("console: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), consoleShutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	stopRun()
	<-sampled
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("console: %w", err)
	}
	logger.Info("console stopped")
	return err
}

// consoleEndpoints builds the engine of the console's endpoint pages and
// JSON API, and says what it will do, for the start line: "read-only",
// "manage (key k-...)", or without a secrets key, what it refuses. The
// key is optional: a console without one still shows the endpoints,
// enables, disables and removes them, and changes their settings that
// are not secret.
func consoleEndpoints(s store.Endpoints, key *secretsKeyFlag, g *guardFlags, readOnly bool) (*admin.Admin, string, error) {
	k, err := consoleKey(key)
	if err != nil {
		return nil, "", err
	}
	return consoleAdmin(s, k, g, readOnly)
}

// consoleKey loads the secrets key when one is given (nil otherwise).
func consoleKey(key *secretsKeyFlag) (*keyring.Keyring, error) {
	if key.file != "" || os.Getenv(keyring.EnvVar) != "" {
		return key.load("console")
	}
	return nil, nil
}

// consoleAdmin is consoleEndpoints with the key k (nil: none).
func consoleAdmin(s store.Endpoints, k *keyring.Keyring, g *guardFlags, readOnly bool) (*admin.Admin, string, error) {
	// Registration checks as the relay's guard and the test client do:
	// allow_private only where the operator lets every endpoint have it
	// (--allow-private-endpoints), a broker's hosts too, and the
	// --allow-cidr ranges allowed.
	a, err := admin.New(admin.Config{Store: s, Keyring: k, Kinds: endpointKinds, Client: g.endpointClient,
		PrivateEndpoints: g.allowPrivate, CheckBrokerHosts: true, AllowCIDRs: g.allow})
	if err != nil {
		return nil, "", err
	}
	return a, consoleEndpointsMode(k, readOnly), nil
}

// consoleEndpointsMode says what the console does with the endpoints,
// for its start line.
func consoleEndpointsMode(k *keyring.Keyring, readOnly bool) string {
	switch {
	case readOnly:
		return "read-only"
	case k == nil:
		return "no secrets key: adding, rotating and testing endpoints refused"
	}
	return "manage (key " + strings.Join(k.IDs(), ", ") + ")"
}
