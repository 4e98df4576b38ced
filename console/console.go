// Package console is postbox's web console: an http.Handler that shows the
// outbox and the inbox and redrives failed events, for an operator with a
// browser and no psql.
//
// Pages: the overview (counts by status and by event type, the age of the
// oldest pending event, deliveries and failures per minute over the last
// hour, the running relays from their presence rows with the leases they
// hold, and whether they find the sink down; in endpoints mode, the
// webhook endpoints' deliveries too, summed and per endpoint; it
// refreshes itself), the failed events (the outbox's, one endpoint's or
// every endpoint's dead letters; filters, keyset pages, retry or purge of
// some or all of them after a confirmation), one event, the inbox's recent
// and failed rows, a search by event id or dedup key, and the webhook
// endpoints: their list (state, pending deliveries, failing since, the
// breaker, the success rate of the last hour), one endpoint (its settings,
// its attempts log, its dead letters), and, through Config.Endpoints, the
// forms that add one (its generated signing secret shown once), edit,
// disable, enable, remove it, rotate its secret and send it a test event.
//
// The console serves everything it needs from the binary (templates,
// one stylesheet, one script): it works offline. Security: with a Token,
// every request must carry it (Authorization: Bearer, or the cookie of a
// session the login form starts, which expires and ends at logout); wrong
// tokens make their client back off (429, Retry-After); without a Token,
// the console answers only requests addressed to a loopback host
// (CheckAddr refuses to listen elsewhere). X-Forwarded-For and
// X-Forwarded-Proto are believed from TrustedProxies only.
// Every action is a POST with a CSRF token; ReadOnly hides and refuses
// them all. Pages are rendered with html/template, so payloads and error
// texts are text, never markup; the Content-Security-Policy allows no
// inline script, and no page may be framed.
//
// The chart comes from the console's own sampling of the store (Run), not
// from Prometheus.
package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/replay"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Store is what the console reads and changes: a store's Inspector, its
// dead-letter operations (the outbox's and the webhook endpoints'), its
// inbox reader, the relays' presence table and the endpoints' counts.
// *postgres.Store and *sqlite.Store are Stores.
type Store interface {
	// String names the store without credentials, for the page header.
	String() string
	store.Inspector
	store.DeadLetters
	store.InboxReader
	store.PresenceReader
	EndpointReader
}

// EndpointReader is what the console reads of the webhook endpoints
// (endpoints mode): the part of store.Endpoints it calls. The endpoint
// pages change endpoints through Config.Endpoints, never through it.
type EndpointReader interface {
	// EndpointList returns every endpoint, oldest first.
	EndpointList(ctx context.Context) ([]store.Endpoint, error)
	// EndpointGet returns one endpoint, or store.ErrEndpointNotFound.
	EndpointGet(ctx context.Context, id uuid.UUID) (store.Endpoint, error)
	// DeliveryCounts counts one endpoint's deliveries by status.
	DeliveryCounts(ctx context.Context, endpointID uuid.UUID) (store.DeliveryCounts, error)
	// DeliveryCountsAll counts every endpoint's deliveries by status, in
	// one query.
	DeliveryCountsAll(ctx context.Context) (map[uuid.UUID]store.DeliveryCounts, error)
	// AttemptList returns up to limit attempts of one endpoint, the most
	// recent first.
	AttemptList(ctx context.Context, endpointID uuid.UUID, limit int) ([]store.Attempt, error)
	// AttemptSummary sums each endpoint's attempts made since since: how
	// many, how many delivered (the endpoints' success rates).
	AttemptSummary(ctx context.Context, since time.Time) ([]store.AttemptSummary, error)
}

// Defaults of Config.
const (
	// SampleEveryDefault is Config.SampleEvery when zero.
	SampleEveryDefault = 10 * time.Second
	// PageSizeDefault is Config.PageSize when zero.
	PageSizeDefault = 50
	// TokenMinLength is the shortest Config.Token accepted.
	TokenMinLength = 16
)

// Config configures a Console.
type Config struct {
	// Store is the outbox and inbox shown. Required.
	Store Store
	// Token, when not empty, is required of every request: as
	// "Authorization: Bearer <token>", or through the login form, which
	// sets an HttpOnly, SameSite=Strict session cookie. At least
	// TokenMinLength bytes.
	Token string
	// ReadOnly hides every action (retry, purge) and refuses their POSTs.
	ReadOnly bool
	// SampleEvery is how often Run samples the store: the overview shows
	// the latest sample's counts, and charts the samples of the last hour
	// (SampleEveryDefault when zero). However many browsers show the
	// overview, the store is read once per interval.
	SampleEvery time.Duration
	// PageSize is the number of rows of a page of failed events or inbox
	// rows (PageSizeDefault when zero, at most store.FailedListLimitMax).
	PageSize int
	// Logger receives the actions taken and the errors met (slog's
	// default logger when nil).
	Logger *slog.Logger
	// SessionIdle ends a login session after this long without a request
	// (SessionIdleDefault when zero); the overview's own refreshes do not
	// count.
	SessionIdle time.Duration
	// SessionMax ends a login session this long after the login, however
	// it is used (SessionMaxDefault when zero).
	SessionMax time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For (the
	// client's address, for the login limiter and the log) and
	// X-Forwarded-Proto (https: the session cookie is Secure) are
	// believed, when a request comes from one of them. None by default:
	// those headers are then ignored.
	TrustedProxies []netip.Prefix
	// Now is the console's clock for sessions and login back-offs
	// (time.Now when nil).
	Now func() time.Time
	// Endpoints manages the webhook endpoints from the endpoint pages and
	// the JSON API (add, edit, rotate, enable, disable, remove, test).
	// Nil: the endpoints are shown, and every action on them is refused.
	Endpoints *admin.Admin
	// Kinds are the sinks other than webhooks an endpoint's URL may name
	// (admin.Config.Kinds's list): the pages describe a URL by its kind,
	// scheme and host (endpoint.DescribeURL), never its path or query,
	// where a chat service keeps its token. A URL of a kind not listed
	// shows as its scheme and host.
	Kinds []sink.URLKind
	// Replay, when its Outbox is set, offers the replay action (the
	// replay page and /api/replays): delivered events chosen by time
	// window, type, aggregate and source (the outbox's table, its archive)
	// sent again, to the outbox's queue or to one endpoint (Endpoints
	// needed), by replay.Run in the background of the console's process,
	// one replay at a time; Run's end stops the one running. Its Logger
	// is the console's when nil. Without an Outbox the replay page says
	// it is off and the API refuses it.
	Replay replay.Config
}

// Console is the console's http.Handler. Run samples the store for the
// overview; without it the overview reads the counts at each request and
// its chart stays empty.
type Console struct {
	cfg      Config
	mux      *http.ServeMux
	pages    pages
	secret   []byte // signs the CSRF tokens
	samples  *samples
	sessions *sessions
	limiter  *loginLimiter
	replays  *replays
	log      *slog.Logger
	// multi is the Multi this console is a source of (nil for a console
	// of its own), and source that source's name: the Multi checks the
	// host, the token and the session, and every page shows its source
	// switcher.
	multi  *Multi
	source string
}

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: Store is nil")
	}
	cfg, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return newConsole(cfg, pages), nil
}

// checkConfig checks cfg's settings but its Store, and sets their
// defaults.
func checkConfig(cfg Config) (Config, error) {
	if cfg.Token != "" && len(cfg.Token) < TokenMinLength {
		return cfg, fmt.Errorf("console: Token is %d bytes: want at least %d", len(cfg.Token), TokenMinLength)
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = SampleEveryDefault
	}
	if cfg.SampleEvery < 0 {
		return cfg, fmt.Errorf("console: SampleEvery %v is negative", cfg.SampleEvery)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = PageSizeDefault
	}
	if cfg.PageSize < 0 || cfg.PageSize > store.FailedListLimitMax {
		return cfg, fmt.Errorf("console: PageSize %d: want 1 to %d", cfg.PageSize, store.FailedListLimitMax)
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = SessionIdleDefault
	}
	if cfg.SessionMax == 0 {
		cfg.SessionMax = SessionMaxDefault
	}
	if cfg.SessionIdle < 0 || cfg.SessionMax < 0 {
		return cfg, fmt.Errorf("console: session lifetimes %v (idle) and %v (max): want positive durations", cfg.SessionIdle, cfg.SessionMax)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Replay.Logger == nil {
		cfg.Replay.Logger = cfg.Logger
	}
	return cfg, nil
}

// newConsole builds the console of a checked cfg with a Store, its
// routes included.
func newConsole(cfg Config, pages pages) *Console {
	c := &Console{
		cfg: cfg, pages: pages, secret: make([]byte, 32), log: cfg.Logger,
		samples:  newSamples(cfg.SampleEvery),
		sessions: newSessions(cfg.SessionIdle, cfg.SessionMax),
		limiter:  newLoginLimiter(LoginClientsMax),
		replays:  newReplays(),
	}
	rand.Read(c.secret) // never fails (crypto/rand)
	c.routes()
	return c
}

// ServeHTTP serves the console, behind its security headers and checks.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if !c.hostAllowed(r) {
		http.Error(w, "console: this console answers requests to a loopback address only (start it with --token to serve others)", http.StatusForbidden)
		return
	}
	c.mux.ServeHTTP(w, r)
}

// Run samples the store every Config.SampleEvery until ctx is done, for
// the overview's chart of the last hour. It returns nil when ctx is done,
// once the replay running, if one, has stopped (after its batch in
// flight; its end is logged with where to resume), or replayCancelWait
// later (logged); a failed sample is logged and skipped.
func (c *Console) Run(ctx context.Context) error {
	defer func() {
		if !c.replays.stop(replayCancelWait) {
			c.log.Warn("console: stopped while a replay was still finishing its batch in flight; what it sent stays sent, its end is not logged", "waited", replayCancelWait)
		}
	}()
	tick := time.NewTicker(c.cfg.SampleEvery)
	defer tick.Stop()
	for {
		c.sample(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// sample reads the counts, the counts by type and the sequence once, into
// the samples.
func (c *Console) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, max(c.cfg.SampleEvery, readTimeout))
	defer cancel()
	x, err := c.readSample(ctx)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("console: sampling the outbox", "error", err)
		}
		return
	}
	c.samples.add(x)
}

// readSample reads what a sample holds.
func (c *Console) readSample(ctx context.Context) (sample, error) {
	seq, err := c.cfg.Store.LastSeq(ctx) // before the counts: a delivery in between is not counted twice
	if err != nil {
		return sample{}, err
	}
	st, err := c.cfg.Store.Stats(ctx)
	if err != nil {
		return sample{}, err
	}
	types, err := c.cfg.Store.StatsByType(ctx)
	if err != nil {
		return sample{}, err
	}
	x := sample{
		at: time.Now(), seq: seq, unfinished: st.Pending + st.Processing + st.Failed, failed: st.Failed,
		stats: st, types: types,
	}
	// The endpoints' counts are a part of their own: when they cannot be
	// read, the outbox's still show.
	if x.endpoints, err = c.readEndpoints(ctx); err != nil {
		c.log.Error("console: reading the endpoints' counts", "error", err)
		x.endpointsError = true
	}
	return x, nil
}

// readEndpoints reads every webhook endpoint and its deliveries' counts;
// none when the store has no endpoint (the single-URL relay's deployment).
func (c *Console) readEndpoints(ctx context.Context) ([]endpointRow, error) {
	eps, err := c.cfg.Store.EndpointList(ctx)
	if err != nil {
		return nil, err
	}
	if len(eps) == 0 {
		return nil, nil
	}
	counts, err := c.cfg.Store.DeliveryCountsAll(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]endpointRow, 0, len(eps))
	for _, e := range eps {
		rows = append(rows, endpointRow{ID: e.ID, Name: e.Name, State: e.State, Shadow: e.Shadow, Counts: counts[e.ID]})
	}
	return rows, nil
}

// securityHeaders are on every answer: no inline script, no framing, no
// sniffing, no referrer to other sites, no caching of pages that show events.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// mac is the HMAC-SHA256 of parts under the console's secret.
func (c *Console) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, c.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}
