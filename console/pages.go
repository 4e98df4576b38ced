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

var pageNames = []string{"overview", "failed", "confirm", "event", "inbox", "inbox_event", "search", "login"}

func parsePages() (pages, error) {
	funcs := template.FuncMap{
		"time": showTime, "ago": ago, "pretty": prettyJSON, "headers": sortedHeaders,
		"cell":    func(s string) string { return show(s, cellMax) },
		"errcell": func(s string) string { return show(s, errorCellMax) },
		"all":     showAll, "plural": plural,
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

func (c *Console) routes() {
	static, _ := fs.Sub(staticFiles, "static") // a directory of the embedded files
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusOK, "login", loginPage{Next: r.URL.Query().Get("next")})
	})
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.form(c.logout))
	mux.HandleFunc("GET /{$}", c.requireAuth(c.overview))
	mux.HandleFunc("GET /failed", c.requireAuth(c.failed))
	mux.HandleFunc("POST /failed/action", c.action(c.failedAction))
	mux.HandleFunc("GET /events/{id}", c.requireAuth(showRow(c, "event", "event", c.cfg.Store.Get)))
	mux.HandleFunc("GET /inbox", c.requireAuth(c.inbox))
	mux.HandleFunc("GET /inbox/{id}", c.requireAuth(showRow(c, "inbox_event", "inbox event", c.cfg.Store.InboxGet)))
	mux.HandleFunc("GET /search", c.requireAuth(c.search))
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
	Refresh  int // seconds; 0: the page does not refresh itself
	Page     any
}

// render writes page name with data, or a 500 when the template fails.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	v := view{Title: name, Nav: name, Token: c.cfg.Token != "", CSRF: c.csrfToken(r), Page: data}
	if name != "login" { // before login, nothing about the deployment
		v.Store, v.ReadOnly = c.cfg.Store.String(), c.cfg.ReadOnly
	}
	if name == "overview" {
		v.Refresh = 5
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
	Stats store.Stats
	Types []store.TypeStats
	// At is when the counts were read.
	At     time.Time
	Relays []relayRow
	// SinkDown are the live relays that find their sink down.
	SinkDown    []relayRow
	Chart       chart
	SampleEvery time.Duration
	// CountsError and RelaysError are true when that part could not be
	// read (the error is in the console's log).
	CountsError, RelaysError bool
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
	Type          string
	AggregateType string
	AggregateID   string
	Error         string
	// Older and Newer are ages ("90s", "2h", "3d"): failed more, or less,
	// than this long ago.
	Older string
	Newer string
}

func readFilter(v url.Values) filterForm {
	return filterForm{
		Type: v.Get("type"), AggregateType: v.Get("aggregate_type"), AggregateID: v.Get("aggregate_id"),
		Error: v.Get("error"), Older: v.Get("older"), Newer: v.Get("newer"),
	}
}

// query is the filter as URL parameters, without the empty ones.
func (f filterForm) query() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"type": f.Type, "aggregate_type": f.AggregateType, "aggregate_id": f.AggregateID, "error": f.Error, "older": f.Older, "newer": f.Newer} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// store turns the form into the store's filter.
func (f filterForm) store(now time.Time) (store.FailedFilter, error) {
	out := store.FailedFilter{EventType: f.Type, AggregateType: f.AggregateType, AggregateID: f.AggregateID, ErrorContains: f.Error}
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

// describe says in words which failed events f selects.
func (f filterForm) describe() string {
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
	if len(parts) == 0 {
		return "every failed event"
	}
	return "every failed event " + strings.Join(parts, ", ")
}

// parseAge reads a duration: Go's ("90s", "1h30m") or a number of days
// ("3d").
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q: want a duration such as 90s, 2h or 3d", s)
		}
		return time.Duration(n * 24 * float64(time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a duration such as 90s, 2h or 3d", s)
	}
	return d, nil
}

// failedPage is the failed page's data.
type failedPage struct {
	Filter   filterForm
	Applied  []appliedFilter
	Query    string // the filter as URL parameters
	After    string
	Next     string
	Events   []store.Record
	Notice   string
	BadInput string
}

func (c *Console) failed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := failedPage{Filter: readFilter(q), After: q.Get("after")}
	p.Query = p.Filter.query().Encode()
	p.Applied = p.Filter.applied()
	switch n := numberParam(q.Get("n")); q.Get("done") {
	case "retry":
		p.Notice = fmt.Sprintf("Sent %s back to the queue.", plural(n, "failed event"))
	case "purge":
		p.Notice = fmt.Sprintf("Purged %s.", plural(n, "failed event"))
	}
	filter, err := p.Filter.store(time.Now())
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
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	page, err := c.cfg.Store.FailedList(ctx, store.FailedListParams{FailedFilter: filter, After: after, Limit: c.cfg.PageSize})
	if err != nil {
		c.fail(w, "listing failed events", err)
		return
	}
	p.Events, p.Next = page.Events, page.Next.String()
	c.render(w, r, http.StatusOK, "failed", p)
}

// plural writes n (a number, or its text) and what, with an s unless n
// is 1.
func plural(n any, what string) string {
	s := fmt.Sprint(n)
	if s == "1" {
		return s + " " + what
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
	Action   string
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
}

// confirmCountMax bounds the failed events a confirmation counts.
const confirmCountMax = store.FailedGroupsScanDefault

// failedAction retries or purges failed events: the ids sent, or all that
// the filter selects ("all"). Without "confirm" it asks first.
func (c *Console) failedAction(w http.ResponseWriter, r *http.Request) {
	action := r.PostFormValue("action")
	if action != "retry" && action != "purge" {
		http.Error(w, "console: action: want retry or purge", http.StatusBadRequest)
		return
	}
	p := confirmPage{Action: action, Filter: readFilter(r.PostForm), All: r.PostFormValue("all") == "1"}
	var ids []uuid.UUID
	for _, s := range r.PostForm["id"] {
		id, err := uuid.Parse(s)
		if err != nil {
			http.Error(w, fmt.Sprintf("console: event id %q is not a UUID", show(s, 40)), http.StatusBadRequest)
			return
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
			p.IDs = append(p.IDs, id.String())
		}
	}
	filter, err := p.Filter.store(time.Now())
	if err != nil {
		http.Error(w, "console: "+err.Error(), http.StatusBadRequest)
		return
	}
	sel := store.FailedSelection{IDs: ids}
	p.Describe = "the " + plural(len(ids), "selected event")
	if p.All {
		sel = store.FailedSelection{FailedFilter: filter, All: true}
		p.Describe = p.Filter.describe()
		p.IDs = nil
	}
	p.Back = "/failed?" + p.Filter.query().Encode()
	if sel.IsZero() || !p.All && len(ids) == 0 {
		http.Redirect(w, r, p.Back, http.StatusSeeOther)
		return
	}
	if r.PostFormValue("confirm") != "1" {
		if p.Count, p.More, err = c.countSelected(r.Context(), sel); err != nil {
			c.fail(w, "counting the failed events selected", err)
			return
		}
		c.render(w, r, http.StatusOK, "confirm", p)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	var n int
	if action == "retry" {
		n, err = c.cfg.Store.FailedRetry(ctx, store.FailedRetryParams{FailedSelection: sel})
	} else {
		n, err = c.cfg.Store.FailedPurge(ctx, store.FailedPurgeParams{FailedSelection: sel})
	}
	c.log.Info("console: "+action+" of failed events", "selection", p.Describe, "events", n, "client", c.clientAddr(r).String(), "error", err)
	if err != nil {
		c.fail(w, fmt.Sprintf("%s (%d events done; send it again to finish)", action, n), err)
		return
	}
	v := p.Filter.query()
	v.Set("done", action)
	v.Set("n", strconv.Itoa(n))
	http.Redirect(w, r, "/failed?"+v.Encode(), http.StatusSeeOther)
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
