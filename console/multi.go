package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/redact"
	"github.com/postbox-go/postbox/replay"
)

// A Multi is one console over many sources (postbox console --sources):
// each source is a store with a console of its own, opened on the first
// request that shows it and closed once idle, and every page carries a
// switcher of the source shown. The source chosen is kept in a cookie
// (POST /sources/select), or named by a request's X-Postbox-Source
// header (programs of the JSON API); without either, the first source of
// the list is shown. GET /api/sources lists them.
//
// The token, the login sessions and their back-offs are the Multi's: one
// login serves every source. The CSRF token of a source's forms and of
// its API session is the source's own: a form rendered for one source is
// refused by every other. A source that cannot be opened (unreachable,
// not migrated) shows an error page of its own; the others are not
// affected.
type Multi struct {
	cfg      MultiConfig
	front    *Console     // the Multi's own pages: login, errors, switching
	frontMux http.Handler // its routes
	frontAPI http.Handler // GET /api/sources, behind the API's checks

	mu      sync.Mutex
	list    []MultiSource
	entries map[string]*sourceEntry // by name: the sources listed
	stopped bool
	closing sync.WaitGroup // the closes under way
}

// MultiSource is one source of a Multi.
type MultiSource struct {
	// Name names the source in the switcher, its cookie and the API.
	Name string
	// DB is the source's database URL, with its password: Open connects
	// with it; pages and answers show it redacted only.
	DB string
	// Schema is the source's schema (PostgreSQL).
	Schema string
}

// SourceConsole is what MultiConfig.Open opens for a source.
type SourceConsole struct {
	// Store is the source's store. Required.
	Store Store
	// Endpoints and Replay are Config's, for this source.
	Endpoints *admin.Admin
	Replay    replay.Config
	// Close releases the store; it is called once the source's console
	// has stopped. Nil: nothing to release.
	Close func()
}

// Defaults of MultiConfig.
const (
	// MultiEveryDefault is MultiConfig.Every when zero.
	MultiEveryDefault = 10 * time.Second
	// SourceIdleDefault is MultiConfig.Idle when zero.
	SourceIdleDefault = 10 * time.Minute
	// sourceOpenTimeout bounds the opening of a source.
	sourceOpenTimeout = 10 * time.Second
	// sourceRetry is how long a source that could not be opened is not
	// tried again: its requests meanwhile show the error.
	sourceRetry = 5 * time.Second
	// sourceCookie keeps the source chosen (its name, base64url).
	sourceCookie = "postbox_console_source"
	// sourceHeader names the source of a request of the JSON API.
	sourceHeader = "X-Postbox-Source"
)

// MultiConfig configures a Multi.
type MultiConfig struct {
	// Console is the settings of every source's console: its Store,
	// Endpoints and Replay are unused (Open gives each source's); its
	// Token, sessions and proxies are the Multi's.
	Console Config
	// List returns the sources, in the switcher's order; it is called by
	// NewMulti, and by Run every Every.
	List func(ctx context.Context) ([]MultiSource, error)
	// Every is how often Run reads the list again (MultiEveryDefault when
	// zero): a source removed, or whose database or schema changed, is
	// closed once its requests in flight end.
	Every time.Duration
	// Idle closes a source's console (its sampling, its store) after this
	// long without a request (SourceIdleDefault when zero); one that runs
	// a replay is kept.
	Idle time.Duration
	// Open opens a source's store for its console. Its error is shown on
	// the source's page, its passwords masked.
	Open func(ctx context.Context, src MultiSource) (SourceConsole, error)
}

// sourceEntry is one source listed, and its console when open.
type sourceEntry struct {
	src     MultiSource
	opening sync.Mutex // held while the source opens

	// Under Multi.mu.
	c        *Console
	stop     func() // stops c's Run, then closes its store
	err      error  // why the last open failed
	failedAt time.Time
	used     time.Time
	inflight int  // requests being served
	removed  bool // no longer listed (or changed)
}

// NewMulti checks cfg, reads the list once (its error is NewMulti's),
// and returns the Multi. Run keeps the list and closes idle sources.
func NewMulti(ctx context.Context, cfg MultiConfig) (*Multi, error) {
	if cfg.List == nil || cfg.Open == nil {
		return nil, errors.New("console: MultiConfig needs List and Open")
	}
	if cfg.Every == 0 {
		cfg.Every = MultiEveryDefault
	}
	if cfg.Idle == 0 {
		cfg.Idle = SourceIdleDefault
	}
	if cfg.Every < 0 || cfg.Idle < 0 {
		return nil, fmt.Errorf("console: Every %v and Idle %v: want positive durations", cfg.Every, cfg.Idle)
	}
	base, err := checkConfig(cfg.Console)
	if err != nil {
		return nil, err
	}
	base.Store, base.Endpoints, base.Replay = nil, nil, replay.Config{}
	cfg.Console = base
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	// The front has no Store and no routes of its own: the Multi serves
	// with it what is no source's.
	front := &Console{
		cfg: base, pages: pages, secret: make([]byte, 32), log: base.Logger,
		samples:  newSamples(base.SampleEvery),
		sessions: newSessions(base.SessionIdle, base.SessionMax),
		limiter:  newLoginLimiter(LoginClientsMax),
		replays:  newReplays(),
	}
	rand.Read(front.secret) // never fails (crypto/rand)
	m := &Multi{cfg: cfg, front: front, entries: map[string]*sourceEntry{}}
	front.multi = m
	list, err := cfg.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("console: the list of sources: %w", err)
	}
	if err := m.setList(list); err != nil {
		return nil, err
	}
	m.routes()
	return m, nil
}

// routes builds the front's routes, and its API handler of GET
// /api/sources.
func (m *Multi) routes() {
	c := m.front
	mux := http.NewServeMux()
	c.routeSession(mux)
	mux.HandleFunc("POST /sources/select", c.form(m.selectSource))
	mux.HandleFunc("/", m.dispatch)
	m.frontMux = mux
	api := http.NewServeMux()
	c.apiRoutes(api)
	m.frontAPI = api
}

// ServeHTTP serves the Multi: its own routes, and the others with the
// console of the source chosen.
func (m *Multi) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if !m.front.hostAllowed(r) {
		http.Error(w, "console: this console answers requests to a loopback address only (start it with --token to serve others)", http.StatusForbidden)
		return
	}
	if r.URL.Path == apiSourcesPath {
		m.frontAPI.ServeHTTP(w, r) // whatever the state of the source chosen
		return
	}
	m.frontMux.ServeHTTP(w, r)
}

// apiSourcesPath is GET /api/sources's path.
const apiSourcesPath = "/api/sources"

// dispatch serves a request of a source's console: authenticated first
// (the Multi's sessions), then by the console of the source chosen,
// opened if it is not; a source that cannot be opened answers 503.
func (m *Multi) dispatch(w http.ResponseWriter, r *http.Request) {
	api := strings.HasPrefix(r.URL.Path, "/api/")
	if api {
		if _, ok := m.front.apiAuth(w, r); !ok {
			return
		}
		m.serveSource(w, r, true)
		return
	}
	m.front.requireAuth(func(w http.ResponseWriter, r *http.Request) { m.serveSource(w, r, false) })(w, r)
}

// serveSource serves an authenticated request with its source's console.
func (m *Multi) serveSource(w http.ResponseWriter, r *http.Request, api bool) {
	name, err := m.chosen(r)
	if err != nil {
		// The header's value is not repeated: it is the client's.
		if api {
			m.front.apiProblem(w, http.StatusBadRequest, problemSourceUnknown, "X-Postbox-Source names no source of the list (GET /api/sources)")
		} else {
			http.Error(w, "console: X-Postbox-Source names no source of the list", http.StatusBadRequest)
		}
		return
	}
	if name == "" {
		m.unavailable(w, r, api, "", errors.New("the list of sources is empty"), 0)
		return
	}
	e, c, err := m.acquire(r.Context(), name)
	if err != nil {
		m.unavailable(w, r, api, name, err, m.retryIn(e))
		return
	}
	defer m.release(e)
	c.mux.ServeHTTP(w, r)
}

// unavailable answers 503: the source name cannot be shown, for err.
func (m *Multi) unavailable(w http.ResponseWriter, r *http.Request, api bool, name string, err error, retry time.Duration) {
	if api {
		detail := "no source is listed"
		if name != "" {
			detail = "source " + name + " cannot be shown: " + err.Error()
		}
		m.front.apiProblem(w, http.StatusServiceUnavailable, problemSourceDown, detail)
		return
	}
	m.front.render(w, r, http.StatusServiceUnavailable, "source_error", sourceErrorPage{Source: name, Error: err.Error(), RetryIn: retry})
}

// sourceErrorPage is the page of a source that cannot be shown (Source
// empty: no source is listed).
type sourceErrorPage struct {
	Source, Error string
	RetryIn       time.Duration
}

// chosen is the source r shows: its X-Postbox-Source header's (an error
// when the list has no such source), its cookie's when listed, or the
// list's first; "" when the list is empty.
func (m *Multi) chosen(r *http.Request) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if names := r.Header.Values(sourceHeader); len(names) > 0 {
		if len(names) == 1 && m.entries[names[0]] != nil {
			return names[0], nil
		}
		return "", errors.New("no such source")
	}
	if ck, err := r.Cookie(sourceCookie); err == nil {
		if b, err := base64.RawURLEncoding.DecodeString(ck.Value); err == nil && m.entries[string(b)] != nil {
			return string(b), nil
		}
	}
	if len(m.list) == 0 {
		return "", nil
	}
	return m.list[0].Name, nil
}

// selectSource is POST /sources/select: the form's source, if listed,
// becomes the cookie's, and the browser goes to the form's next page.
func (m *Multi) selectSource(w http.ResponseWriter, r *http.Request) {
	name := r.PostFormValue("source")
	m.mu.Lock()
	listed := m.entries[name] != nil
	m.mu.Unlock()
	if !listed {
		// The value is not repeated: it is the client's.
		http.Error(w, "console: no such source: choose one of the list", http.StatusBadRequest)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sourceCookie, Value: base64.RawURLEncoding.EncodeToString([]byte(name)), Path: "/",
		MaxAge:   int(m.cfg.Console.SessionMax / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: m.front.overTLS(r),
	})
	next := r.PostFormValue("next")
	if !slices.Contains(switchTargets, next) {
		next = "/"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// switchTargets are the pages a switch may lead to: each part's first
// page (an event, an endpoint, are one source's).
var switchTargets = []string{"/", "/failed", "/endpoints", "/replay", "/inbox"}

// switcher is the layout's source switcher.
type switcher struct {
	Current string
	Options []switchOption
	// Next is the page the switch leads to: this part's first.
	Next string
}

type switchOption struct {
	Name    string
	Current bool
}

// switcher is the switcher of a page of r, of the part nav.
func (m *Multi) switcher(r *http.Request, nav string) *switcher {
	current, _ := m.chosen(r)
	s := &switcher{Current: current, Next: "/"}
	switch nav {
	case "failed", "confirm":
		s.Next = "/failed"
	case "endpoints", "replay", "inbox":
		s.Next = "/" + nav
	case "inbox_event":
		s.Next = "/inbox"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s.Options = make([]switchOption, len(m.list))
	for i, src := range m.list {
		s.Options[i] = switchOption{Name: src.Name, Current: src.Name == current}
	}
	return s
}

// setList makes list the sources: a source no longer listed, or whose
// database or schema changed, is closed once its requests end.
func (m *Multi) setList(list []MultiSource) error {
	seen := make(map[string]bool, len(list))
	for i, src := range list {
		if src.Name == "" {
			return fmt.Errorf("console: source %d has no name", i+1)
		}
		if seen[src.Name] {
			return fmt.Errorf("console: source %d: the name %s is also another's", i+1, show(src.Name, 64))
		}
		seen[src.Name] = true
	}
	list = slices.Clone(list)
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := make(map[string]*sourceEntry, len(list))
	for _, src := range list {
		if e := m.entries[src.Name]; e != nil && e.src == src {
			entries[src.Name] = e
			continue
		}
		entries[src.Name] = &sourceEntry{src: src}
	}
	for name, e := range m.entries {
		if entries[name] != e {
			e.removed = true
			m.closeLocked(e, "removed from the list, or changed")
		}
	}
	m.list, m.entries = list, entries
	return nil
}

// acquire returns the console of the source name, opening it if it is
// not; release(e) ends the request's use of it.
func (m *Multi) acquire(ctx context.Context, name string) (*sourceEntry, *Console, error) {
	m.mu.Lock()
	e := m.entries[name]
	if e == nil {
		m.mu.Unlock()
		return nil, nil, errors.New("no longer listed")
	}
	e.inflight++
	e.used = m.front.now()
	m.mu.Unlock()
	c, err := m.open(ctx, e)
	if err != nil {
		m.release(e)
		return e, nil, err
	}
	return e, c, nil
}

// release ends a request's use of e; a source removed meanwhile closes
// with its last request.
func (m *Multi) release(e *sourceEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e.inflight--
	e.used = m.front.now()
	if e.removed {
		m.closeLocked(e, "removed from the list, or changed")
	}
}

// open returns e's console, opening it when it is not, unless its last
// open failed less than sourceRetry ago.
func (m *Multi) open(ctx context.Context, e *sourceEntry) (*Console, error) {
	e.opening.Lock()
	defer e.opening.Unlock()
	m.mu.Lock()
	switch {
	case e.c != nil:
		c := e.c
		m.mu.Unlock()
		return c, nil
	case e.removed || m.stopped:
		m.mu.Unlock()
		return nil, errors.New("no longer listed")
	case e.err != nil && m.front.now().Sub(e.failedAt) < sourceRetry:
		err := e.err
		m.mu.Unlock()
		return nil, err
	}
	m.mu.Unlock()
	// A request that goes away does not fail the open the next one
	// would wait for.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sourceOpenTimeout)
	defer cancel()
	log := m.cfg.Console.Logger.With("source", e.src.Name)
	c, stop, err := m.start(ctx, e.src)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		err = redact.Scrub(err, e.src.DB)
		e.err, e.failedAt = err, m.front.now()
		log.Warn("console: the source cannot be shown", "error", err)
		return nil, err
	}
	if e.removed || m.stopped {
		go stop()
		return nil, errors.New("no longer listed")
	}
	e.c, e.stop, e.err = c, stop, nil
	log.Info("console: source opened", "store", c.cfg.Store.String())
	return c, nil
}

// start opens src's store and starts its console (its sampling); stop
// ends them.
func (m *Multi) start(ctx context.Context, src MultiSource) (*Console, func(), error) {
	sc, err := m.cfg.Open(ctx, src)
	if err != nil {
		return nil, nil, err
	}
	if sc.Store == nil {
		if sc.Close != nil {
			sc.Close()
		}
		return nil, nil, errors.New("console: Open returned no Store")
	}
	cfg := m.cfg.Console
	cfg.Store, cfg.Endpoints, cfg.Replay = sc.Store, sc.Endpoints, sc.Replay
	cfg.Logger = cfg.Logger.With("source", src.Name)
	if cfg.Replay.Logger == nil {
		cfg.Replay.Logger = cfg.Logger
	}
	c := newConsole(cfg, m.front.pages)
	// One login for every source; a CSRF token of this source's own.
	c.sessions, c.limiter = m.front.sessions, m.front.limiter
	c.secret = m.front.mac("source", src.Name, src.DB, src.Schema) // a definition changed under its name: new tokens
	c.multi, c.source = m, src.Name
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	stop := func() {
		cancel()
		<-done
		if sc.Close != nil {
			sc.Close()
		}
	}
	return c, stop, nil
}

// closeLocked closes e's console, if open and no request uses it (under
// m.mu); the close runs in the background.
func (m *Multi) closeLocked(e *sourceEntry, why string) {
	if e.stop == nil || e.inflight > 0 {
		return
	}
	stop := e.stop
	e.c, e.stop = nil, nil
	m.cfg.Console.Logger.Info("console: source closed", "source", e.src.Name, "why", why)
	m.closing.Go(stop)
}

// closeIdle closes the sources unused for Idle that run no replay.
func (m *Multi) closeIdle() {
	now := m.front.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		if e.c != nil && now.Sub(e.used) >= m.cfg.Idle && !e.c.replays.busy() {
			m.closeLocked(e, "idle")
		}
	}
}

// Run reads the list again every Every and closes the idle sources until
// ctx is done; then it closes every source (their replays stop after
// their batch in flight) and returns nil. A list that cannot be read is
// logged, and the last one kept.
func (m *Multi) Run(ctx context.Context) error {
	defer m.closeAll()
	reread := time.NewTicker(m.cfg.Every)
	defer reread.Stop()
	idle := time.NewTicker(min(max(m.cfg.Idle/4, 10*time.Millisecond), time.Minute))
	defer idle.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-reread.C:
			list, err := m.cfg.List(ctx)
			if err == nil {
				err = m.setList(list)
			}
			if err != nil && ctx.Err() == nil {
				m.cfg.Console.Logger.Warn("console: reading the list of sources again: the last one is kept", "error", err)
			}
		case <-idle.C:
			m.closeIdle()
		}
	}
}

// closeAll closes every source, and waits for them.
func (m *Multi) closeAll() {
	m.mu.Lock()
	m.stopped = true
	for _, e := range m.entries {
		e.inflight = 0 // the server has stopped
		m.closeLocked(e, "stopping")
	}
	m.mu.Unlock()
	m.closing.Wait()
}

// retryIn is how long e's failed open is not tried again.
func (m *Multi) retryIn(e *sourceEntry) time.Duration {
	if e == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e.err == nil {
		return 0
	}
	return max(0, sourceRetry-m.front.now().Sub(e.failedAt)).Round(time.Second)
}

// apiSourceRow is one source of GET /api/sources.
type apiSourceRow struct {
	Name   string `json:"name"`
	Schema string `json:"schema"`
	// Database is the source's database, its password masked.
	Database string `json:"database"`
	// State: open (its console is open), closed (opened at its next
	// request), failed (its last open failed: Error says why).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// apiSourceList is the answer of GET /api/sources.
type apiSourceList struct {
	// Current is the source this request's cookie (or header) chooses.
	Current string         `json:"current"`
	Sources []apiSourceRow `json:"sources"`
}

// sourceRows lists the sources for GET /api/sources.
func (m *Multi) sourceRows(r *http.Request) apiSourceList {
	current, _ := m.chosen(r)
	m.mu.Lock()
	defer m.mu.Unlock()
	out := apiSourceList{Current: current, Sources: make([]apiSourceRow, len(m.list))}
	for i, src := range m.list {
		row := apiSourceRow{Name: src.Name, Schema: src.Schema, Database: shownDB(src.DB), State: "closed"}
		switch e := m.entries[src.Name]; {
		case e.c != nil:
			row.State = "open"
		case e.err != nil:
			row.State, row.Error = "failed", e.err.Error()
		}
		out.Sources[i] = row
	}
	return out
}

// shownDB is a database URL fit to show: its passwords masked.
func shownDB(db string) string {
	if strings.HasPrefix(db, "sqlite:") {
		return db
	}
	return redact.DSN(db)
}

// apiSources is GET /api/sources: the sources of a console over many;
// a console of one store has none (404).
func (c *Console) apiSources(w http.ResponseWriter, r *http.Request) {
	if c.multi == nil {
		c.apiProblem(w, http.StatusNotFound, problemNotFound, "this console shows one store: it was started without --sources")
		return
	}
	c.apiJSON(w, http.StatusOK, c.multi.sourceRows(r))
}
