package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// readTimeout bounds the store reads of one page.
const readTimeout = 30 * time.Second

// actionTimeout bounds a retry or purge; what it did not finish, the same
// action finishes when sent again (they are idempotent).
const actionTimeout = 10 * time.Minute

// pages are the templates, each parsed with the layout.
type pages map[string]*template.Template

var pageNames = []string{"overview", "failed", "confirm", "event", "inbox", "inbox_event", "search", "login",
	"endpoints", "endpoint", "endpoint_new", "endpoint_edit", "endpoint_secret", "endpoint_remove",
	"replay", "replay_confirm", "replay_run", "source_error"}

func parsePages() (pages, error) {
	funcs := template.FuncMap{
		"time": showTime, "ago": ago, "pretty": prettyJSON, "headers": sortedHeaders,
		"cell":    func(s string) string { return show(s, cellMax) },
		"errcell": func(s string) string { return show(s, errorCellMax) },
		"all":     showAll, "plural": plural,
		"state": stateText, "types": typesText, "rate": rateText, "envelope": envelopeText, "millis": millis,
	}
	out := pages{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// routeSession adds to mux what is served without a source: the static
// files, the login and the logout.
func (c *Console) routeSession(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFiles, "static") // a directory of the embedded files
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusOK, "login", loginPage{Next: r.URL.Query().Get("next")})
	})
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.form(c.logout))
}

func (c *Console) routes() {
	mux := http.NewServeMux()
	c.routeSession(mux)
	mux.HandleFunc("GET /{$}", c.requireAuth(c.overview))
	mux.HandleFunc("GET /failed", c.requireAuth(c.failed))
	mux.HandleFunc("POST /failed/action", c.action(c.failedAction))
	mux.HandleFunc("GET /events/{id}", c.requireAuth(showRow(c, "event", "event", c.cfg.Store.Get)))
	mux.HandleFunc("GET /inbox", c.requireAuth(c.inbox))
	mux.HandleFunc("GET /inbox/{id}", c.requireAuth(showRow(c, "inbox_event", "inbox event", c.cfg.Store.InboxGet)))
	mux.HandleFunc("GET /search", c.requireAuth(c.search))
	c.endpointPageRoutes(mux)
	c.replayPageRoutes(mux)
	c.apiRoutes(mux)
	c.mux = mux
}

// view is what every page's layout reads.
type view struct {
	Title    string
	Nav      string
	Store    string
	ReadOnly bool
	Token    bool
	CSRF     string
	// ConsoleCSRF is the CSRF token of the forms that are the whole
	// console's, not its store's (logout, the source switcher): CSRF for
	// a console of its own; with many sources (Multi), CSRF is the
	// source's, refused by the others.
	ConsoleCSRF string
	// Sources is the source switcher of a console over many sources
	// (Multi); nil otherwise.
	Sources *switcher
	Refresh int // seconds; 0: the page does not refresh itself
	Page    any
}

// render writes page name with data, or a 500 when the template fails.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	v := view{Title: name, Nav: name, Token: c.cfg.Token != "", CSRF: c.csrfToken(r), Page: data}
	v.ConsoleCSRF = v.CSRF
	switch {
	case strings.HasPrefix(name, "endpoint"):
		v.Nav = "endpoints"
	case strings.HasPrefix(name, "replay"):
		v.Nav = "replay"
	}
	if name != "login" { // before login, nothing about the deployment
		if c.cfg.Store != nil { // a Multi's own pages have none
			v.Store = c.cfg.Store.String()
		}
		v.ReadOnly = c.cfg.ReadOnly
	}
	if c.multi != nil {
		v.ConsoleCSRF = c.multi.front.csrfToken(r)
		if name != "login" {
			v.Sources = c.multi.switcher(r, v.Nav)
		}
	}
	if name == "overview" {
		v.Refresh = 5
	}
	if p, ok := data.(interface{ refreshSeconds() int }); ok { // a page that refreshes while it changes
		v.Refresh = p.refreshSeconds()
	}
	var buf bytes.Buffer
	if err := c.pages[name].Execute(&buf, v); err != nil {
		c.log.Error("console: rendering a page", "page", name, "error", err)
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail answers a store error: 404 for an unknown event, 500 otherwise
// (the error is logged; the page says only what failed).
func (c *Console) fail(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, "console: "+what+": not found", http.StatusNotFound)
		return
	}
	c.log.Error("console: "+what, "error", err)
	http.Error(w, "console: "+what+" failed: see the console's log", http.StatusInternalServerError)
}

// overviewPage is the overview's data.
type overviewPage struct {
	Stats store.StatusCounts
	Types []store.TypeStats
	// At is when the counts were read.
	At     time.Time
	Relays []relayRow
	// SinkDown are the live relays that find their sink down.
	SinkDown    []relayRow
	Chart       chart
	SampleEvery time.Duration
	// Endpoints are the webhook endpoints (endpoints mode) with their
	// deliveries' counts, and EndpointTotals their sums; none without
	// endpoints.
	Endpoints      []endpointRow
	EndpointTotals store.DeliveryCounts
	// CountsError, RelaysError and EndpointsError are true when that part
	// could not be read (the error is in the console's log).
	CountsError, RelaysError, EndpointsError bool
}

// relayRow is one relay: its presence row (Presence, when it wrote one),
// and the leases it holds (Events zero when none).
type relayRow struct {
	store.RelayLeases
	Expired  bool
	Presence *store.RelayPresence
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	var p overviewPage
	// The counts are the latest sample's (Run), or read now without one.
	// A part that cannot be read (a row the store fails on) is logged and
	// named on the page; the other parts still show.
	latest, ok := c.samples.latest()
	if !ok {
		var err error
		if latest, err = c.readSample(ctx); err != nil {
			c.log.Error("console: reading the counts", "error", err)
			p.CountsError = true
		}
	}
	p.Stats, p.Types, p.At = latest.stats, latest.types, latest.at
	p.Endpoints, p.EndpointsError = latest.endpoints, latest.endpointsError
	p.EndpointTotals = endpointTotals(p.Endpoints)
	relays, err := c.cfg.Store.Relays(ctx)
	if err == nil {
		var present []store.RelayPresence
		if present, err = c.cfg.Store.RelayPresences(ctx); err == nil {
			p.Relays, p.SinkDown = relayRows(present, relays, time.Now())
		}
	}
	if err != nil {
		c.log.Error("console: reading the relays", "error", err)
		p.RelaysError = true
	}
	p.Chart = newChart(c.samples.perMinute(time.Now()))
	p.SampleEvery = c.cfg.SampleEvery
	c.render(w, r, http.StatusOK, "overview", p)
}

// filterForm is the failed page's filters, as the form sends them.
type filterForm struct {
	// Endpoint is where the dead letters are read: "" for the outbox's
	// failed events, endpointAll for every webhook endpoint's failed
	// deliveries, or one endpoint's id. It is not a filter but a place:
	// no chip shows it, the selector does.
	Endpoint      string
	Type          string
	AggregateType string
	AggregateID   string
	Error         string
	// Older and Newer are ages ("90s", "2h", "3d"): failed more, or less,
	// than this long ago.
	Older string
	Newer string
	// Return is where a retry or purge brings the browser back to:
	// returnEndpoint for the page of the endpoint it reads (its dead
	// letters are listed there too), "" for the failed page. Not a
	// filter either: no link of the failed page carries it.
	Return string
}

// returnEndpoint is filterForm.Return of the endpoint's page.
const returnEndpoint = "endpoint"

func readFilter(v url.Values) filterForm {
	return filterForm{
		Endpoint: v.Get("endpoint"), Type: v.Get("type"), AggregateType: v.Get("aggregate_type"), AggregateID: v.Get("aggregate_id"),
		Error: v.Get("error"), Older: v.Get("older"), Newer: v.Get("newer"), Return: v.Get("return"),
	}
}

// returnPage is the endpoint's page a retry or purge of f returns to,
// when f asks for it (Return) and reads one endpoint.
func (f filterForm) returnPage() (string, bool) {
	id, err := f.endpointID()
	if err != nil || f.Return != returnEndpoint || id == uuid.Nil || id == store.AnyEndpoint {
		return "", false
	}
	return "/endpoints/" + id.String(), true
}

// back is the page a retry or purge of f returns to: the endpoint's page
// (returnPage), else the failed page of f.
func (f filterForm) back() string {
	if page, ok := f.returnPage(); ok {
		return page
	}
	return "/failed?" + f.query().Encode()
}

// query is the filter as URL parameters, without the empty ones.
func (f filterForm) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"endpoint": f.Endpoint, "type": f.Type, "aggregate_type": f.AggregateType, "aggregate_id": f.AggregateID, "error": f.Error, "older": f.Older, "newer": f.Newer} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// endpointAll is the failed page's endpoint parameter of every webhook
// endpoint's failed deliveries (store.AnyEndpoint).
const endpointAll = "all"

// endpointID is where f reads: uuid.Nil for the outbox, store.AnyEndpoint
// for every endpoint, else one endpoint's id.
func (f filterForm) endpointID() (uuid.UUID, error) {
	switch f.Endpoint {
	case "":
		return uuid.Nil, nil
	case endpointAll:
		return store.AnyEndpoint, nil
	}
	id, err := uuid.Parse(f.Endpoint)
	if err != nil || id == uuid.Nil || id == store.AnyEndpoint {
		return uuid.Nil, fmt.Errorf("endpoint %q: want all or an endpoint's id", show(f.Endpoint, 40))
	}
	return id, nil
}

// onEndpoints reports whether f reads endpoints' deliveries.
func (f filterForm) onEndpoints() bool { return f.Endpoint != "" }

// noun is what f selects, in the singular: "failed event" (the outbox)
// or "failed delivery" (endpoints).
func (f filterForm) noun() string {
	if f.onEndpoints() {
		return "failed delivery"
	}
	return "failed event"
}

// store turns the form into the store's filter.
func (f filterForm) store(now time.Time) (store.FailedFilter, error) {
	out := store.FailedFilter{EventType: f.Type, AggregateType: f.AggregateType, AggregateID: f.AggregateID, ErrorContains: f.Error}
	var err error
	if out.Endpoint, err = f.endpointID(); err != nil {
		return out, err
	}
	if f.Older != "" {
		d, err := parseAge(f.Older)
		if err != nil {
			return out, fmt.Errorf("older than: %w", err)
		}
		out.FailedBefore = now.Add(-d)
	}
	if f.Newer != "" {
		d, err := parseAge(f.Newer)
		if err != nil {
			return out, fmt.Errorf("newer than: %w", err)
		}
		out.FailedSince = now.Add(-d)
	}
	return out, nil
}

// appliedFilter is one filter in use, and the failed page's query
// without it.
type appliedFilter struct {
	Key, Label, Value, Without string
}

// applied lists the filters in use, in the form's order.
func (f filterForm) applied() []appliedFilter {
	var out []appliedFilter
	for _, x := range []struct{ key, label, value string }{
		{"type", "type", f.Type}, {"aggregate_type", "aggregate type", f.AggregateType},
		{"aggregate_id", "aggregate id", f.AggregateID}, {"error", "error contains", f.Error},
		{"older", "failed more than this long ago", f.Older}, {"newer", "failed less than this long ago", f.Newer},
	} {
		if x.value == "" {
			continue
		}
		without := f.query()
		without.Del(x.key)
		out = append(out, appliedFilter{Key: x.key, Label: x.label, Value: x.value, Without: without.Encode()})
	}
	return out
}

// describe says in words which failed events f selects; endpoint is the
// name of the endpoint it reads, if one.
func (f filterForm) describe(endpoint string) string {
	var parts []string
	add := func(what, v string) {
		if v != "" {
			parts = append(parts, what+` "`+show(v, cellMax)+`"`)
		}
	}
	add("of type", f.Type)
	add("of aggregate type", f.AggregateType)
	add("of aggregate id", f.AggregateID)
	add("whose last error contains", f.Error)
	add("that failed more than this long ago:", f.Older)
	add("that failed less than this long ago:", f.Newer)
	subject := "every failed event"
	switch {
	case f.Endpoint == endpointAll:
		subject = "every failed delivery to any endpoint"
	case f.onEndpoints():
		subject = `every failed delivery to the endpoint "` + show(endpoint, cellMax) + `"`
	}
	if len(parts) == 0 {
		return subject
	}
	return subject + " " + strings.Join(parts, ", ")
}

// ageMax is the longest age parseAge reads: far past any use (a grace
// period, a filter's age), well within a time.Duration.
const ageMax = 100 * 365 * 24 * time.Hour

// parseAge reads a duration: Go's ("90s", "1h30m") or a number of days
// ("3d"), from 0 to ageMax.
func parseAge(s string) (time.Duration, error) {
	refused := fmt.Errorf("%q: want a duration of at most 100 years, such as 90s, 2h or 3d", s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		// Compared as days: a number of days past the bound would
		// overflow a time.Duration.
		if err != nil || !(n >= 0) || n > float64(ageMax/(24*time.Hour)) {
			return 0, refused
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > ageMax {
		return 0, refused
	}
	return d, nil
}

// failedPage is the failed page's data.
type failedPage struct {
	Filter  filterForm
	Applied []appliedFilter
	Query   string // the filter as URL parameters
	// Clear is the page without filters, where it reads.
	Clear  string
	After  string
	Next   string
	Events []failedRow
	// Endpoints is the selector of where the page reads: the outbox,
	// every endpoint, each endpoint; empty when there is no endpoint.
	Endpoints []endpointOption
	// OnEndpoints is true when the page shows endpoints' deliveries
	// (rows name their endpoint); Noun is what a row is ("failed event",
	// "failed delivery").
	OnEndpoints bool
	Noun        string
	Notice      string
	BadInput    string
	// EndpointsError is true when the endpoints could not be listed (the
	// error is in the console's log): rows name their endpoint by id.
	EndpointsError bool
}

// failedRow is one row of the failed page: a failed event, or a failed
// delivery with its endpoint's name. Key is the value of its checkbox:
// the event's id, and in the view of every endpoint, "endpoint id/event
// id" (an event may have failed at several endpoints).
type failedRow struct {
	store.Record
	EndpointName string
	Key          string
}

// endpointOption is one choice of the failed page's selector.
type endpointOption struct {
	Value, Label string
	Selected     bool
}

// endpointNames names the endpoints by id.
func endpointNames(eps []store.Endpoint) map[uuid.UUID]string {
	names := make(map[uuid.UUID]string, len(eps))
	for _, e := range eps {
		names[e.ID] = e.Name
	}
	return names
}

func (c *Console) failed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := failedPage{Filter: readFilter(q), After: q.Get("after")}
	p.Query = p.Filter.query().Encode()
	p.Clear = "/failed"
	if p.Filter.Endpoint != "" {
		p.Clear += "?" + url.Values{"endpoint": {p.Filter.Endpoint}}.Encode()
	}
	p.Applied = p.Filter.applied()
	p.OnEndpoints, p.Noun = p.Filter.onEndpoints(), p.Filter.noun()
	switch n := numberParam(q.Get("n")); q.Get("done") {
	case "retry":
		p.Notice = fmt.Sprintf("Sent %s back to the queue.", plural(n, p.Noun))
	case "purge":
		p.Notice = fmt.Sprintf("Purged %s.", plural(n, p.Noun))
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	// The endpoints name the rows and the selector's choices; without
	// them the outbox's failed events still show.
	eps, err := c.cfg.Store.EndpointList(ctx)
	if err != nil {
		c.log.Error("console: listing the webhook endpoints", "error", err)
		p.EndpointsError = true
	}
	names := endpointNames(eps)
	if len(eps) > 0 || p.Filter.Endpoint != "" {
		p.Endpoints = append(p.Endpoints, endpointOption{Value: "", Label: "the outbox"},
			endpointOption{Value: endpointAll, Label: "every endpoint"})
		for _, e := range eps {
			p.Endpoints = append(p.Endpoints, endpointOption{Value: e.ID.String(), Label: "endpoint " + show(e.Name, cellMax)})
		}
		for i := range p.Endpoints {
			p.Endpoints[i].Selected = p.Endpoints[i].Value == p.Filter.Endpoint
		}
	}
	filter, err := p.Filter.store(time.Now())
	if err == nil && filter.Endpoint != uuid.Nil && filter.Endpoint != store.AnyEndpoint && !p.EndpointsError {
		if _, known := names[filter.Endpoint]; !known {
			err = fmt.Errorf("endpoint %s: no such endpoint (deleted?)", filter.Endpoint)
		}
	}
	if err != nil {
		p.BadInput = err.Error()
		c.render(w, r, http.StatusBadRequest, "failed", p)
		return
	}
	after, err := store.ParseFailedCursor(p.After)
	if err != nil {
		p.BadInput = "page: " + err.Error()
		c.render(w, r, http.StatusBadRequest, "failed", p)
		return
	}
	page, err := c.cfg.Store.FailedList(ctx, store.FailedListParams{FailedFilter: filter, After: after, Limit: c.cfg.PageSize})
	if err != nil {
		c.fail(w, "listing "+p.Noun+"s", err)
		return
	}
	p.Events = make([]failedRow, len(page.Events))
	for i, rec := range page.Events {
		row := failedRow{Record: rec, Key: rec.ID.String()}
		if p.OnEndpoints {
			if row.EndpointName = names[rec.Endpoint]; row.EndpointName == "" {
				row.EndpointName = rec.Endpoint.String()
			}
		}
		if filter.Endpoint == store.AnyEndpoint {
			row.Key = rec.Endpoint.String() + "/" + rec.ID.String()
		}
		p.Events[i] = row
	}
	p.Next = page.Next.String()
	c.render(w, r, http.StatusOK, "failed", p)
}

// plural writes n (a number, or its text) and what, in the plural unless
// n is 1: what and an s, or "ies" for a final "y" ("delivery").
func plural(n any, what string) string {
	s := fmt.Sprint(n)
	if s == "1" {
		return s + " " + what
	}
	if stem, ok := strings.CutSuffix(what, "y"); ok {
		return s + " " + stem + "ies"
	}
	return s + " " + what + "s"
}

// numberParam is s if it is a number, else "?".
func numberParam(s string) string {
	if _, err := strconv.Atoi(s); err != nil {
		return "?"
	}
	return s
}

// confirmPage asks before a retry or a purge.
type confirmPage struct {
	Action string
	// IDs are the rows ticked, as their checkboxes send them (failedRow.Key).
	IDs      []string
	All      bool
	Filter   filterForm
	Describe string
	// Count is how many failed events the action moves; with More, at
	// least that many (the count stopped at confirmCountMax).
	Count int
	More  bool
	// Back is the failed page the action was asked from.
	Back string
	// Noun is what the action moves, in the singular ("failed event",
	// "failed delivery"), and Unit the same, shorter ("event", "delivery").
	Noun, Unit string
}

// confirmCountMax bounds the failed events a confirmation counts.
const confirmCountMax = store.FailedGroupsScanDefault

// failedAction retries or purges failed events, or endpoints' failed
// deliveries (the form's endpoint): the ids sent, or all that the filter
// selects ("all"). Without "confirm" it asks first.
func (c *Console) failedAction(w http.ResponseWriter, r *http.Request) {
	action := r.PostFormValue("action")
	if action != "retry" && action != "purge" {
		http.Error(w, "console: action: want retry or purge", http.StatusBadRequest)
		return
	}
	p := confirmPage{Action: action, Filter: readFilter(r.PostForm), All: r.PostFormValue("all") == "1"}
	p.Noun, p.Unit = p.Filter.noun(), strings.TrimPrefix(p.Filter.noun(), "failed ")
	filter, err := p.Filter.store(time.Now())
	if err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusBadRequest)
		return
	}
	// The ids ticked, by the endpoint (uuid.Nil: the outbox) whose
	// dead letters they are: one retry or purge for each.
	var (
		byEndpoint = map[uuid.UUID][]uuid.UUID{}
		endpoints  []uuid.UUID
		seen       = map[string]bool{}
	)
	for _, key := range r.PostForm["id"] {
		endpoint, id, err := parseRowKey(key, filter.Endpoint)
		if err != nil {
			http.Error(w, "console: "+err.Error(), http.StatusBadRequest)
			return
		}
		canonical := id.String()
		if endpoint != filter.Endpoint {
			canonical = endpoint.String() + "/" + canonical
		}
		if seen[canonical] {
			continue
		}
		seen[canonical] = true
		if _, ok := byEndpoint[endpoint]; !ok {
			endpoints = append(endpoints, endpoint)
		}
		byEndpoint[endpoint] = append(byEndpoint[endpoint], id)
		p.IDs = append(p.IDs, canonical)
	}
	var sels []store.FailedSelection
	p.Describe = "the " + plural(len(p.IDs), "selected "+p.Unit)
	if p.All {
		sels = []store.FailedSelection{{FailedFilter: filter, All: true}}
		name := ""
		if p.Filter.onEndpoints() && filter.Endpoint != store.AnyEndpoint {
			if name, err = c.endpointName(r.Context(), filter.Endpoint); err != nil {
				c.fail(w, "reading the endpoint's name", err)
				return
			}
		}
		p.Describe = p.Filter.describe(name)
		p.IDs = nil
	} else {
		for _, e := range endpoints {
			sels = append(sels, store.FailedSelection{FailedFilter: store.FailedFilter{Endpoint: e}, IDs: byEndpoint[e]})
		}
	}
	p.Back = p.Filter.back()
	if len(sels) == 0 {
		http.Redirect(w, r, p.Back, http.StatusSeeOther)
		return
	}
	if r.PostFormValue("confirm") != "1" {
		if p.All {
			p.Count, p.More, err = c.countSelected(r.Context(), sels[0])
		} else {
			p.Count = len(p.IDs)
		}
		if err != nil {
			c.fail(w, "counting the "+p.Noun+"s selected", err)
			return
		}
		c.render(w, r, http.StatusOK, "confirm", p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	n := 0
	for _, sel := range sels {
		var done int
		if action == "retry" {
			done, err = c.cfg.Store.FailedRetry(ctx, store.FailedRetryParams{FailedSelection: sel})
		} else {
			done, err = c.cfg.Store.FailedPurge(ctx, store.FailedPurgeParams{FailedSelection: sel})
		}
		n += done
		if err != nil {
			break
		}
	}
	c.log.Info("console: "+action+" of "+p.Noun+"s", "selection", p.Describe, "endpoint", p.Filter.Endpoint, "done", n, "client", c.clientAddr(r).String(), "error", err)
	if err != nil {
		c.fail(w, fmt.Sprintf("%s (%s done; send it again to finish)", action, plural(n, p.Unit)), err)
		return
	}
	if page, ok := p.Filter.returnPage(); ok {
		http.Redirect(w, r, page+"?"+url.Values{"done": {action}, "n": {strconv.Itoa(n)}}.Encode(), http.StatusSeeOther)
		return
	}
	v := p.Filter.query()
	v.Set("done", action)
	v.Set("n", strconv.Itoa(n))
	http.Redirect(w, r, "/failed?"+v.Encode(), http.StatusSeeOther)
}

// parseRowKey reads a failed row's key (failedRow.Key): an event id, the
// dead letter of where the page reads (the outbox, an endpoint, or every
// endpoint), or "endpoint id/event id", one endpoint's.
func parseRowKey(key string, where uuid.UUID) (endpoint, id uuid.UUID, err error) {
	endpoint = where
	idText := key
	if e, rest, ok := strings.Cut(key, "/"); ok {
		if endpoint, err = uuid.Parse(e); err != nil || endpoint == uuid.Nil || endpoint == store.AnyEndpoint {
			return uuid.Nil, uuid.Nil, fmt.Errorf("endpoint id %q is not an endpoint's UUID", show(e, 40))
		}
		idText = rest
	}
	if id, err = uuid.Parse(idText); err != nil {
		return uuid.Nil, uuid.Nil, fmt.Errorf("event id %q is not a UUID", show(idText, 40))
	}
	return endpoint, id, nil
}

// endpointName is the name of the endpoint id, or its id when it is no
// longer in the store.
func (c *Console) endpointName(ctx context.Context, id uuid.UUID) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	eps, err := c.cfg.Store.EndpointList(ctx)
	if err != nil {
		return "", err
	}
	if name, ok := endpointNames(eps)[id]; ok {
		return name, nil
	}
	return id.String(), nil
}

// countSelected counts the failed events sel selects: its ids, or those
// its filter lets through (at most confirmCountMax; more is true past
// it).
func (c *Console) countSelected(ctx context.Context, sel store.FailedSelection) (n int, more bool, err error) {
	if !sel.All {
		return len(sel.IDs), false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	g, err := c.cfg.Store.FailedGroups(ctx, store.FailedGroupsParams{FailedFilter: sel.FailedFilter, Scan: confirmCountMax})
	if err != nil {
		return 0, false, err
	}
	return g.Scanned, !g.Complete, nil
}

// showRow serves the page of one row: the one get reads for the id in the
// path (an outbox event, an inbox row).
func showRow[T any](c *Console, page, what string, get func(context.Context, uuid.UUID) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, err := uuid.Parse(r.PathValue("id"))
		if err != nil {
			http.Error(w, "console: event id is not a UUID", http.StatusBadRequest)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
		defer cancel()
		row, err := get(ctx, id)
		if err != nil {
			c.fail(w, "reading "+what+" "+id.String(), err)
			return
		}
		c.render(w, r, http.StatusOK, page, row)
	}
}

// inboxPage is the inbox rows of one status.
type inboxPage struct {
	Status   string
	Statuses []string
	Rows     []store.InboxRecord
}

func (c *Console) inbox(w http.ResponseWriter, r *http.Request) {
	p := inboxPage{Status: r.URL.Query().Get("status"), Statuses: []string{store.StatusFailed, store.StatusPending, store.StatusDone}}
	if p.Status == "" {
		p.Status = store.StatusFailed
	}
	if !slices.Contains(p.Statuses, p.Status) {
		http.Error(w, "console: status: want failed, pending or done", http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	rows, err := c.cfg.Store.InboxList(ctx, store.InboxListParams{Status: p.Status, Limit: c.cfg.PageSize})
	if err != nil {
		c.fail(w, "listing inbox rows", err)
		return
	}
	p.Rows = rows
	c.render(w, r, http.StatusOK, "inbox", p)
}

// searchPage is a search that found nothing.
type searchPage struct {
	Query string
}

// search finds an event by id (in the outbox, then the inbox) or by dedup
// key, and redirects to its page.
func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		c.render(w, r, http.StatusOK, "search", searchPage{})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	found := func(err error) bool {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			c.log.Error("console: search", "error", err)
		}
		return err == nil
	}
	if id, err := uuid.Parse(q); err == nil {
		if _, err := c.cfg.Store.Get(ctx, id); found(err) {
			http.Redirect(w, r, "/events/"+id.String(), http.StatusSeeOther)
			return
		}
		if _, err := c.cfg.Store.InboxGet(ctx, id); found(err) {
			http.Redirect(w, r, "/inbox/"+id.String(), http.StatusSeeOther)
			return
		}
	}
	if rec, err := c.cfg.Store.GetByDedupKey(ctx, q); found(err) {
		http.Redirect(w, r, "/events/"+rec.ID.String(), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusNotFound, "search", searchPage{Query: q})
}

// showTime writes t in UTC, or "–" for the zero time.
func showTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// ago writes how long ago t was ("3m12s ago"), or how far ahead ("in 20s").
func ago(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := time.Since(t)
	switch {
	case d == math.MinInt64: // saturated: far in the future
		return "in " + roundAge(math.MaxInt64)
	case d < 0:
		return "in " + roundAge(-d)
	case d < time.Second:
		return "now"
	}
	return roundAge(d) + " ago"
}

func roundAge(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
	case d >= time.Hour:
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// header is one event header.
type header struct{ Name, Value string }

func sortedHeaders(h map[string]string) []header {
	out := make([]header, 0, len(h))
	for k, v := range h {
		out = append(out, header{k, v})
	}
	slices.SortFunc(out, func(a, b header) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// relayRows joins the relays' presence rows (those running, first) and the
// leases relays hold (those without a row after: a relay older than the
// presence table, or one whose row was pruned), and returns the live
// relays that find their sink down as well.
func relayRows(present []store.RelayPresence, leases []store.RelayLeases, now time.Time) (rows, sinkDown []relayRow) {
	byOwner := map[string]store.RelayLeases{}
	for _, rl := range leases {
		byOwner[rl.Owner] = rl
	}
	for i := range present {
		pr := &present[i]
		row := relayRow{RelayLeases: store.RelayLeases{Owner: pr.ID}, Presence: pr}
		if rl, ok := byOwner[pr.ID]; ok {
			row.RelayLeases, row.Expired = rl, rl.LastExpiry.Before(now)
			delete(byOwner, pr.ID)
		}
		rows = append(rows, row)
		if pr.SinkDown() && !pr.Stale() {
			sinkDown = append(sinkDown, row)
		}
	}
	for _, rl := range leases {
		if _, ok := byOwner[rl.Owner]; ok {
			rows = append(rows, relayRow{RelayLeases: rl, Expired: rl.LastExpiry.Before(now)})
		}
	}
	return rows, sinkDown
}
