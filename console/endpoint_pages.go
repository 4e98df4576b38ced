package console

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// Bounds of the endpoint pages.
const (
	// attemptsShown is the most attempts an endpoint's page lists, the
	// most recent first.
	attemptsShown = 50
	// deadLettersShown is the most failed deliveries an endpoint's page
	// lists; the failed page lists them all.
	deadLettersShown = 10
	// rateWindow is the time the success rates are measured over.
	rateWindow = time.Hour
)

// endpointPageRoutes adds the endpoint pages' routes, under /endpoints.
func (c *Console) endpointPageRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /endpoints", c.requireAuth(c.endpoints))
	mux.HandleFunc("GET /endpoints/new", c.requireAuth(c.endpointNew))
	mux.HandleFunc("POST /endpoints/new", c.manage(c.endpointCreate))
	mux.HandleFunc("GET /endpoints/{id}", c.requireAuth(c.endpointShow))
	mux.HandleFunc("GET /endpoints/{id}/edit", c.requireAuth(c.endpointEdit))
	mux.HandleFunc("POST /endpoints/{id}/edit", c.manage(c.endpointUpdate))
	mux.HandleFunc("POST /endpoints/{id}/enable", c.manage(c.endpointSetState(store.EndpointEnabled)))
	mux.HandleFunc("POST /endpoints/{id}/disable", c.manage(c.endpointSetState(store.EndpointDisabled)))
	mux.HandleFunc("POST /endpoints/{id}/rotate", c.manage(c.endpointRotate))
	mux.HandleFunc("POST /endpoints/{id}/test", c.manage(c.endpointTest))
	mux.HandleFunc("POST /endpoints/{id}/remove", c.manage(c.endpointRemove))
}

// actionsOff says why this console cannot change endpoints ("" when it
// can): it is read-only, or it was given no admin.
func (c *Console) actionsOff() string {
	switch {
	case c.cfg.ReadOnly:
		return "This console is read-only: endpoints are shown, never changed."
	case c.cfg.Endpoints == nil:
		return "This console was started without managing endpoints: they are shown, never changed (postbox console manages them unless --read-only)."
	}
	return ""
}

// manage guards a POST that changes an endpoint: c.action's checks (the
// token, the CSRF token, not read-only), and an admin to call.
func (c *Console) manage(next http.HandlerFunc) http.HandlerFunc {
	return c.action(func(w http.ResponseWriter, r *http.Request) {
		if off := c.actionsOff(); off != "" {
			http.Error(w, "console: "+off, http.StatusForbidden)
			return
		}
		next(w, r)
	})
}

// keyOff says up front what this console refuses for want of a secrets
// key ("" when it has one, or when it changes no endpoint anyway): the
// POSTs refuse it too (noKeyring).
func (c *Console) keyOff() string {
	if c.actionsOff() != "" || c.cfg.Endpoints.HasKeyring() {
		return ""
	}
	return "This console has no secrets key: adding endpoints, rotating their secrets and sending test events to sealed endpoints are refused " +
		"(start postbox console with --secrets-key-file or POSTBOX_SECRETS_KEY). Editing, enabling, disabling and removing work."
}

// view is e as the endpoint pages show it: admin's View (only
// fingerprints of its secrets), admin.ViewOf for a console without
// Config.Endpoints, its URL described (describeURL).
func (c *Console) view(e store.Endpoint) admin.View {
	var v admin.View
	if c.cfg.Endpoints != nil {
		v = c.cfg.Endpoints.View(e)
	} else {
		v = admin.ViewOf(e, time.Now())
	}
	v.URL = c.describeURL(e.URL)
	return v
}

// describeURL is an endpoint's URL as the pages (and a read-only
// console's API) show it: its kind, scheme and host, "/…" for a path or
// a query (endpoint.DescribeURL), which may hold a token; for a scheme
// that is not a webhook's nor one of Config.Kinds, its scheme and host.
// Never its user information.
func (c *Console) describeURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return "a URL that does not parse"
	}
	known := func(k sink.URLKind) bool {
		return slices.ContainsFunc(k.Schemes, func(s string) bool { return strings.EqualFold(s, u.Scheme) })
	}
	if known(webhook.URL) || slices.ContainsFunc(c.cfg.Kinds, known) {
		return endpoint.DescribeURL(c.cfg.Kinds, rawURL)
	}
	desc := u.Scheme + "://" + u.Host
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		desc += "/…"
	}
	return desc
}

// successRate is an endpoint's attempts over the last rateWindow, and
// how many of them delivered.
type successRate struct {
	Attempts, Delivered int64
}

// Text writes the rate: "98.5% of 200", or "–" without attempts.
func (s successRate) Text() string {
	if s.Attempts == 0 {
		return "–"
	}
	pct := 100 * float64(s.Delivered) / float64(s.Attempts)
	// Never round up to 100% while an attempt failed, nor down to 0%
	// while one delivered.
	text := strconv.FormatFloat(math.Floor(pct*10)/10, 'f', -1, 64)
	if s.Delivered > 0 && pct < 0.1 {
		text = "<0.1"
	}
	return text + "% of " + plural(s.Attempts, "attempt")
}

// Bad reports whether fewer than nine attempts in ten delivered.
func (s successRate) Bad() bool { return s.Attempts > 0 && s.Delivered*10 < s.Attempts*9 }

// successRates reads every endpoint's success rate since the start of
// rateWindow.
func (c *Console) successRates(ctx context.Context) (map[uuid.UUID]successRate, error) {
	sums, err := c.cfg.Store.AttemptSummary(ctx, time.Now().Add(-rateWindow))
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]successRate, len(sums))
	for _, s := range sums {
		out[s.EndpointID] = successRate{Attempts: s.Attempts, Delivered: s.Succeeded}
	}
	return out, nil
}

// endpointListRow is one row of the endpoints' list.
type endpointListRow struct {
	admin.View
	// Counts are its deliveries' counts (nil: they could not be read).
	Counts *store.DeliveryCounts
	Rate   successRate
}

// endpointsPage is the endpoints' list.
type endpointsPage struct {
	Rows []endpointListRow
	// ActionsOff says why no action is offered ("": they are); KeyOff
	// which are refused for want of a secrets key.
	ActionsOff, KeyOff string
	Notice             string
	// CountsError and RatesError are true when the deliveries' counts, or
	// the success rates, could not be read (the error is in the log).
	CountsError, RatesError bool
}

func (c *Console) endpoints(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	p := endpointsPage{ActionsOff: c.actionsOff(), KeyOff: c.keyOff(), Notice: doneNotice(r.URL.Query())}
	eps, err := c.cfg.Store.EndpointList(ctx)
	if err != nil {
		c.fail(w, "listing the endpoints", err)
		return
	}
	// The counts and the rates are parts of their own: when they cannot
	// be read, the endpoints still show.
	counts, err := c.cfg.Store.DeliveryCountsAll(ctx)
	if err != nil {
		c.log.Error("console: reading the endpoints' counts", "error", err)
		p.CountsError = true
	}
	rates, err := c.successRates(ctx)
	if err != nil {
		c.log.Error("console: reading the endpoints' success rates", "error", err)
		p.RatesError = true
	}
	p.Rows = make([]endpointListRow, len(eps))
	for i, e := range eps {
		p.Rows[i] = endpointListRow{View: c.view(e), Rate: rates[e.ID]}
		if !p.CountsError {
			n := counts[e.ID]
			p.Rows[i].Counts = &n
		}
	}
	c.render(w, r, http.StatusOK, "endpoints", p)
}

// doneNotice is the notice of an action done, as its redirect's query
// says (done, and n for a retry or purge); "" for none.
func doneNotice(q url.Values) string {
	n := numberParam(q.Get("n"))
	switch q.Get("done") {
	case "enable":
		return "Endpoint enabled: its pending deliveries are due at once."
	case "disable":
		return "Endpoint disabled: nothing is delivered to it until it is enabled."
	case "save":
		return "Settings saved."
	case "rotate":
		return "Secret rotated."
	case "remove":
		return "Endpoint removed, with its deliveries and their attempts."
	case "retry":
		return fmt.Sprintf("Sent %s back to the queue.", plural(n, "failed delivery"))
	case "purge":
		return fmt.Sprintf("Purged %s.", plural(n, "failed delivery"))
	}
	return ""
}

// endpointPage is one endpoint's page.
type endpointPage struct {
	admin.View
	Rate     successRate
	Attempts []store.Attempt
	// DeadLetters are its most recent failed deliveries (at most
	// deadLettersShown); DeadFilter the failed page's filter of them all.
	DeadLetters []failedRow
	DeadFilter  filterForm
	// ActionsOff says why no action is offered ("": they are); KeyOff
	// which are refused for want of a secrets key.
	ActionsOff, KeyOff string
	Notice             string
	// Test is the result of the test event just sent, if one was.
	Test *testResult
	// Grace is the rotation form's grace period; RotateError why the
	// rotation was refused.
	Grace       string
	RotateError string
	// StateError is why enabling or disabling was refused.
	StateError string
	// PartsError names the parts that could not be read (the error is in
	// the log).
	PartsError []string
}

// testResult is how a test event went.
type testResult struct {
	Delivered bool
	// EventID is the test event's id ("" when none was sent).
	EventID  string
	Duration time.Duration
	// Error is why it was not delivered: admin's TestError, which names
	// the endpoint's URL described (describeURL) and never a secret, or
	// why no test event was sent.
	Error string
}

// endpointID reads the endpoint id of the path, or answers 400.
func endpointID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		http.Error(w, "console: endpoint id is not a UUID", http.StatusBadRequest)
		return uuid.Nil, false
	}
	return id, true
}

// endpointFail answers a store error about an endpoint: 404 for one the
// store does not hold.
func (c *Console) endpointFail(w http.ResponseWriter, what string, err error) {
	if errors.Is(err, store.ErrEndpointNotFound) || errors.Is(err, admin.ErrNotFound) {
		http.Error(w, "console: "+what+": no such endpoint (removed?)", http.StatusNotFound)
		return
	}
	c.fail(w, what, err)
}

func (c *Console) endpointShow(w http.ResponseWriter, r *http.Request) {
	id, ok := endpointID(w, r)
	if !ok {
		return
	}
	c.showEndpoint(w, r, id, http.StatusOK, func(p *endpointPage) { p.Notice = doneNotice(r.URL.Query()) })
}

// showEndpoint renders endpoint id's page with status; set, when not
// nil, adds what an action has to say.
func (c *Console) showEndpoint(w http.ResponseWriter, r *http.Request, id uuid.UUID, status int, set func(*endpointPage)) {
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	e, err := c.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		c.endpointFail(w, "reading endpoint "+id.String(), err)
		return
	}
	p := endpointPage{View: c.view(e), ActionsOff: c.actionsOff(), KeyOff: c.keyOff(), Grace: ageText(admin.GraceDefault),
		DeadFilter: filterForm{Endpoint: id.String(), Return: returnEndpoint}}
	// Each part below is a part of its own: one that cannot be read is
	// named on the page, and the others still show.
	part := func(what string, err error) {
		if err != nil {
			c.log.Error("console: reading endpoint "+id.String()+"'s "+what, "error", err)
			p.PartsError = append(p.PartsError, what)
		}
	}
	counts, err := c.cfg.Store.DeliveryCounts(ctx, id)
	if part("deliveries' counts", err); err == nil {
		p.Deliveries = &counts
	}
	rates, err := c.successRates(ctx)
	if part("success rate", err); err == nil {
		p.Rate = rates[id]
	}
	p.Attempts, err = c.cfg.Store.AttemptList(ctx, id, attemptsShown)
	part("attempts", err)
	dead, err := c.cfg.Store.FailedList(ctx, store.FailedListParams{FailedFilter: store.FailedFilter{Endpoint: id}, Limit: deadLettersShown})
	part("failed deliveries", err)
	for _, rec := range dead.Events {
		p.DeadLetters = append(p.DeadLetters, failedRow{Record: rec, EndpointName: e.Name, Key: rec.ID.String()})
	}
	if set != nil {
		set(&p)
	}
	c.render(w, r, status, "endpoint", p)
}

// endpointForm is the add and edit forms as sent, shown again with the
// refusals beside their fields. Secrets (the signing secret, the bearer
// token, the headers' values) are never sent back.
type endpointForm struct {
	// Edit is true for the edit form (of ID), false for the add form.
	Edit bool
	ID   uuid.UUID
	// The fields, named as the settings' canonical names (admin's
	// Setting* constants).
	Name, URL, Types, Filter, Envelope, CESource, Signature, Rate, Concurrency string
	Shadow, AllowPrivate                                                       bool
	// Errors are the refusals by field; Error one that is of no field
	// the form has.
	Errors map[string]string
	Error  string
	// SecretsCleared is true when the form is shown again after a
	// refusal: the secrets given are not, and must be given again.
	SecretsCleared bool
	// ActionsOff says why the form is not offered ("": it is); KeyOff
	// why the add form is not, for want of a secrets key.
	ActionsOff, KeyOff string
}

// envelopes are the add form's choices of envelope.
var envelopes = []struct{ Value, Label string }{
	{"", "raw: the payload as stored"}, {"standard", "standard: JSON with the event's id, type and aggregate"},
	{"cloudevents", "cloudevents: structured (JSON)"}, {"cloudevents-binary", "cloudevents-binary: ce- headers"},
}

// Envelopes are the envelope's choices, for the template.
func (f endpointForm) Envelopes() []struct{ Value, Label string } { return envelopes }

// formFields are the fields of each form: a refusal of another setting
// shows above the form.
var formFields = map[bool][]string{
	false: {admin.SettingName, admin.SettingURL, admin.SettingTypes, admin.SettingFilter, admin.SettingEnvelope,
		admin.SettingCESource, admin.SettingSignature, admin.SettingRate, admin.SettingConcurrency, admin.SettingShadow,
		admin.SettingAllowPrivate, admin.SettingSecret, admin.SettingHeaders, admin.SettingBearer},
	true: {admin.SettingName, admin.SettingTypes, admin.SettingFilter, admin.SettingRate, admin.SettingConcurrency, admin.SettingShadow},
}

// refuse records a refusal of setting: beside its field, or above the
// form.
func (f *endpointForm) refuse(setting, message string) {
	for _, name := range formFields[f.Edit] {
		if name == setting {
			if f.Errors == nil {
				f.Errors = map[string]string{}
			}
			if f.Errors[setting] == "" {
				f.Errors[setting] = message
			}
			return
		}
	}
	if f.Error == "" {
		f.Error = message
	}
}

// refused reports whether the form has a refusal.
func (f *endpointForm) refused() bool { return len(f.Errors) > 0 || f.Error != "" }

// readEndpointForm reads the settings' fields of a posted form.
func readEndpointForm(r *http.Request, edit bool) endpointForm {
	v := func(name string) string { return strings.TrimSpace(r.PostFormValue(name)) }
	return endpointForm{
		Edit: edit, Name: v(admin.SettingName), URL: v(admin.SettingURL), Types: v(admin.SettingTypes),
		Filter: strings.TrimSpace(r.PostFormValue(admin.SettingFilter)), Envelope: v(admin.SettingEnvelope),
		CESource: v(admin.SettingCESource), Signature: v(admin.SettingSignature), Rate: v(admin.SettingRate),
		Concurrency: v(admin.SettingConcurrency), Shadow: r.PostFormValue(admin.SettingShadow) == "1",
		AllowPrivate: r.PostFormValue(admin.SettingAllowPrivate) == "1",
	}
}

// rate reads the rate field: a number of deliveries per second, 0 (or
// empty) for no bound.
func (f *endpointForm) rate() float64 {
	if f.Rate == "" {
		return 0
	}
	n, err := strconv.ParseFloat(f.Rate, 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
		f.refuse(admin.SettingRate, "want a number of deliveries per second, such as 50 or 0.5 (empty or 0: no bound)")
	}
	return n
}

// concurrency reads the concurrency field (empty: 0, admin's default on
// add).
func (f *endpointForm) concurrency() int {
	if f.Concurrency == "" {
		return 0
	}
	n, err := strconv.Atoi(f.Concurrency)
	if err != nil {
		f.refuse(admin.SettingConcurrency, "want a whole number of deliveries in flight, such as 8")
	}
	return n
}

// settings are the add form's settings.
func (f *endpointForm) settings() admin.Settings {
	return admin.Settings{
		Name: f.Name, URL: f.URL, Types: store.SplitTypes(f.Types), Filter: f.Filter, Envelope: f.Envelope,
		CESource: f.CESource, Signature: f.Signature, RatePerSecond: f.rate(), Concurrency: f.concurrency(),
		Shadow: f.Shadow, AllowPrivate: f.AllowPrivate,
	}
}

// readCredentials reads the add form's secrets: the signing secret
// (empty: a new one is generated), the bearer token, and the static
// headers, one "Name: value" a line.
func (f *endpointForm) readCredentials(r *http.Request) endpoint.Credentials {
	c := endpoint.Credentials{Secret: strings.TrimSpace(r.PostFormValue(admin.SettingSecret)), Bearer: strings.TrimSpace(r.PostFormValue(admin.SettingBearer))}
	for i, line := range strings.Split(r.PostFormValue(admin.SettingHeaders), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			// The line is not quoted: it may hold a header's value.
			f.refuse(admin.SettingHeaders, fmt.Sprintf("line %d: want Name: value", i+1))
			continue
		}
		if c.Headers == nil {
			c.Headers = map[string]string{}
		}
		key := http.CanonicalHeaderKey(name)
		if _, twice := c.Headers[key]; twice {
			f.refuse(admin.SettingHeaders, fmt.Sprintf("line %d: header %s given twice", i+1, show(key, cellMax)))
			continue
		}
		c.Headers[key] = strings.TrimSpace(value)
	}
	return c
}

// adminRefusal files err of an admin call: a refusal of a setting (or of
// the missing secrets key) on the form, reported true; false for another
// error, which the caller answers.
func (f *endpointForm) adminRefusal(err error) bool {
	var fe *admin.FieldError
	switch {
	case errors.As(err, &fe):
		f.refuse(fe.Setting, fe.Message)
	case errors.Is(err, endpoint.ErrNoKeyring):
		f.refuse("", noKeyring)
	case errors.Is(err, admin.ErrInvalid):
		f.refuse("", err.Error())
	default:
		return false
	}
	return true
}

// noKeyring says why an action that seals or opens secrets is refused.
const noKeyring = "Refused: this console has no secrets key, so it cannot seal or open the endpoints' secrets (start postbox console with --secrets-key-file or POSTBOX_SECRETS_KEY)."

func (c *Console) endpointNew(w http.ResponseWriter, r *http.Request) {
	f := endpointForm{Concurrency: strconv.Itoa(admin.ConcurrencyDefault), ActionsOff: c.actionsOff(), KeyOff: c.keyOff()}
	status := http.StatusOK
	if f.ActionsOff != "" {
		status = http.StatusForbidden
	}
	c.render(w, r, status, "endpoint_new", f)
}

// secretPage shows the signing secret an add or a rotation generated:
// once, never again.
type secretPage struct {
	ID   uuid.UUID
	Name string
	// URL is where the endpoint delivers, described (describeURL).
	URL string
	// Added is true after an add, false after a rotation.
	Added bool
	// Secret is the generated secret ("" when one was given, or for a
	// broker's endpoint); Fingerprint names the endpoint's secret.
	Secret, Fingerprint string
	// PreviousUntil is when a rotation's previous secret stops signing.
	PreviousUntil time.Time
	Warnings      []string
}

func (c *Console) endpointCreate(w http.ResponseWriter, r *http.Request) {
	f := readEndpointForm(r, false)
	s := f.settings()
	creds := f.readCredentials(r)
	var created admin.Created
	if !f.refused() {
		ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
		defer cancel()
		var err error
		if created, err = c.cfg.Endpoints.Create(ctx, s, creds); err != nil && !f.adminRefusal(err) {
			c.fail(w, "adding the endpoint", err)
			return
		}
	}
	if f.refused() {
		var userInfo bool
		f.URL, userInfo = withoutUserInfo(f.URL)
		f.SecretsCleared = userInfo || creds.Secret != "" || creds.Bearer != "" || len(creds.Headers) > 0 || r.PostFormValue(admin.SettingHeaders) != ""
		f.KeyOff = c.keyOff()
		c.render(w, r, http.StatusUnprocessableEntity, "endpoint_new", f)
		return
	}
	e := created.Endpoint
	c.log.Info("console: endpoint added", "endpoint", e.ID, "name", e.Name, "secret", e.SecretFingerprint, "client", c.clientAddr(r).String())
	c.render(w, r, http.StatusOK, "endpoint_secret", secretPage{ID: e.ID, Name: e.Name, URL: c.describeURL(e.URL), Added: true,
		Secret: created.Secret, Fingerprint: e.SecretFingerprint, Warnings: created.Warnings})
}

// withoutUserInfo is rawURL without its user information (a user and
// password, or a token), which the add form never shows again, and
// whether it had any. A text that does not parse as a URL, or parses as
// an opaque one, but holds an '@' is dropped whole: what comes before it
// may be a password.
func withoutUserInfo(rawURL string) (string, bool) {
	u, err := url.Parse(rawURL)
	switch {
	case err != nil || u.Opaque != "":
		// "user:password@host" parses as an opaque URL of scheme "user".
		if strings.Contains(rawURL, "@") {
			return "", true
		}
		return rawURL, false
	case u.User == nil:
		return rawURL, false
	}
	u.User = nil
	return u.String(), true
}

// editForm is endpoint e's edit form, filled with its settings.
func editForm(e admin.View) endpointForm {
	f := endpointForm{Edit: true, ID: e.ID, Name: e.Name, Types: strings.Join(e.Types, ", "), Filter: e.Filter,
		Concurrency: strconv.Itoa(e.Concurrency), Shadow: e.Shadow}
	if e.RatePerSecond != 0 {
		f.Rate = strconv.FormatFloat(e.RatePerSecond, 'g', -1, 64)
	}
	return f
}

func (c *Console) endpointEdit(w http.ResponseWriter, r *http.Request) {
	id, ok := endpointID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	e, err := c.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		c.endpointFail(w, "reading endpoint "+id.String(), err)
		return
	}
	f := editForm(c.view(e))
	status := http.StatusOK
	if f.ActionsOff = c.actionsOff(); f.ActionsOff != "" {
		status = http.StatusForbidden
	}
	c.render(w, r, status, "endpoint_edit", f)
}

func (c *Console) endpointUpdate(w http.ResponseWriter, r *http.Request) {
	id, ok := endpointID(w, r)
	if !ok {
		return
	}
	f := readEndpointForm(r, true)
	f.ID = id
	types := store.SplitTypes(f.Types)
	ch := admin.Change{Name: &f.Name, Types: &types, Filter: &f.Filter, Shadow: &f.Shadow}
	rate, conc := f.rate(), f.concurrency()
	ch.RatePerSecond, ch.Concurrency = &rate, &conc
	var updated admin.Updated
	if !f.refused() {
		ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
		defer cancel()
		var err error
		if updated, err = c.cfg.Endpoints.Update(ctx, id, ch); err != nil && !f.adminRefusal(err) {
			c.endpointFail(w, "changing endpoint "+id.String(), err)
			return
		}
	}
	if f.refused() {
		c.render(w, r, http.StatusUnprocessableEntity, "endpoint_edit", f)
		return
	}
	// Update warns only of a URL's host that does not resolve: the form
	// changes no URL.
	c.log.Info("console: endpoint changed", "endpoint", id, "changed", updated.Changed, "client", c.clientAddr(r).String())
	http.Redirect(w, r, "/endpoints/"+id.String()+"?done=save", http.StatusSeeOther)
}

// returnList is the value of the state forms' "return" field that brings
// the browser back to the list rather than the endpoint's page.
const returnList = "list"

// endpointSetState enables or disables the endpoint of the path.
func (c *Console) endpointSetState(state string) http.HandlerFunc {
	verb := map[string]string{store.EndpointEnabled: "enable", store.EndpointDisabled: "disable"}[state]
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := endpointID(w, r)
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
		defer cancel()
		if err := c.cfg.Endpoints.SetState(ctx, id, state); err != nil {
			var f endpointForm
			if !f.adminRefusal(err) {
				c.endpointFail(w, verb+" endpoint "+id.String(), err)
				return
			}
			c.showEndpoint(w, r, id, http.StatusUnprocessableEntity, func(p *endpointPage) { p.StateError = f.Error })
			return
		}
		c.log.Info("console: endpoint "+verb+"d", "endpoint", id, "client", c.clientAddr(r).String())
		back := "/endpoints/" + id.String()
		if r.PostFormValue("return") == returnList {
			back = "/endpoints"
		}
		http.Redirect(w, r, back+"?done="+verb, http.StatusSeeOther)
	}
}

func (c *Console) endpointRotate(w http.ResponseWriter, r *http.Request) {
	id, ok := endpointID(w, r)
	if !ok {
		return
	}
	graceText := strings.TrimSpace(r.PostFormValue("grace"))
	refused := func(msg string) {
		c.showEndpoint(w, r, id, http.StatusUnprocessableEntity, func(p *endpointPage) { p.Grace, p.RotateError = graceText, msg })
	}
	grace, err := parseAge(graceText)
	if err != nil {
		refused("Grace period: " + err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	e, err := c.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		c.endpointFail(w, "reading endpoint "+id.String(), err)
		return
	}
	rot, err := c.cfg.Endpoints.RotateSecret(ctx, id, strings.TrimSpace(r.PostFormValue(admin.SettingSecret)), grace)
	if err != nil {
		var f endpointForm
		if !f.adminRefusal(err) {
			c.endpointFail(w, "rotating endpoint "+id.String()+"'s secret", err)
			return
		}
		refused(f.Error)
		return
	}
	c.log.Info("console: endpoint's secret rotated", "endpoint", id, "secret", rot.Fingerprint, "key", rot.Key, "previous_until", rot.PreviousUntil, "client", c.clientAddr(r).String())
	c.render(w, r, http.StatusOK, "endpoint_secret", secretPage{ID: id, Name: e.Name, URL: c.describeURL(e.URL), Secret: rot.Secret,
		Fingerprint: rot.Fingerprint, PreviousUntil: rot.PreviousUntil})
}

func (c *Console) endpointTest(w http.ResponseWriter, r *http.Request) {
	id, ok := endpointID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout+admin.TestTimeoutDefault)
	defer cancel()
	tested, err := c.cfg.Endpoints.Test(ctx, id, admin.TestTimeoutDefault)
	if errors.Is(err, admin.ErrNotFound) || errors.Is(err, store.ErrEndpointNotFound) {
		c.endpointFail(w, "testing endpoint "+id.String(), err)
		return
	}
	res := &testResult{Delivered: err == nil, Duration: tested.Duration}
	var te *admin.TestError
	status := http.StatusOK
	switch {
	case errors.As(err, &te):
		// What the endpoint answered is the point of a test: it is shown,
		// with the URL described as the page shows it.
		shown := *te
		shown.URL = c.describeURL(te.URL)
		res.Error = shown.Error()
		tested.EventID = te.EventID
		status = http.StatusBadGateway
	case errors.Is(err, endpoint.ErrNoKeyring):
		res.Error, status = noKeyring, http.StatusUnprocessableEntity
	case err != nil:
		c.fail(w, "testing endpoint "+id.String(), err)
		return
	}
	if tested.EventID != uuid.Nil {
		res.EventID = tested.EventID.String()
	}
	c.log.Info("console: test event sent", "endpoint", id, "event", tested.EventID, "delivered", res.Delivered, "client", c.clientAddr(r).String())
	c.showEndpoint(w, r, id, status, func(p *endpointPage) { p.Test = res })
}

// removePage asks before an endpoint is removed.
type removePage struct {
	admin.View
	Counts store.DeliveryCounts
}

// Total counts the deliveries removed with the endpoint.
func (p removePage) Total() int64 {
	c := p.Counts
	return c.Pending + c.Processing + c.Done + c.Failed + c.Dropped
}

// endpointRemove removes the endpoint of the path; without "confirm" it
// asks first, saying what goes with it.
func (c *Console) endpointRemove(w http.ResponseWriter, r *http.Request) {
	id, ok := endpointID(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if r.PostFormValue("confirm") != "1" {
		e, err := c.cfg.Store.EndpointGet(ctx, id)
		if err != nil {
			c.endpointFail(w, "reading endpoint "+id.String(), err)
			return
		}
		counts, err := c.cfg.Store.DeliveryCounts(ctx, id)
		if err != nil {
			c.fail(w, "counting endpoint "+id.String()+"'s deliveries", err)
			return
		}
		c.render(w, r, http.StatusOK, "endpoint_remove", removePage{View: c.view(e), Counts: counts})
		return
	}
	if err := c.cfg.Endpoints.Delete(ctx, id); err != nil {
		c.endpointFail(w, "removing endpoint "+id.String(), err)
		return
	}
	c.log.Info("console: endpoint removed", "endpoint", id, "client", c.clientAddr(r).String())
	http.Redirect(w, r, "/endpoints?done=remove", http.StatusSeeOther)
}

// ageText writes d as a person would type it in the rotation form: "24h"
// rather than "24h0m0s".
func ageText(d time.Duration) string {
	text := d.String()
	if strings.HasSuffix(text, "m0s") {
		text = strings.TrimSuffix(text, "0s")
		if strings.HasSuffix(text, "h0m") {
			text = strings.TrimSuffix(text, "0m")
		}
	}
	return text
}

// stateText is an endpoint's state as the pages show it.
func stateText(state string) string {
	if state == store.EndpointAutoDisabled {
		return "auto-disabled"
	}
	return state
}

// typesText is an endpoint's types as the pages show them: "every type"
// for none.
func typesText(types []string) string {
	if len(types) == 0 {
		return "every type"
	}
	return show(strings.Join(types, ", "), cellMax)
}

// rateText is an endpoint's rate bound.
func rateText(r float64) string {
	if r == 0 {
		return "no bound"
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + " deliveries a second"
}

// envelopeText is an endpoint's envelope, "raw" for none.
func envelopeText(spec string) string {
	if spec == "" {
		return "raw"
	}
	return spec
}

// millis writes a latency: in milliseconds under a second, else in
// seconds to a tenth.
func millis(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Round(100*time.Millisecond).Seconds(), 'f', 1, 64) + " s"
}
