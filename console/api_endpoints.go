package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/store"
)

// Bounds of the endpoints' operations.
const (
	// apiGraceMax is the longest grace period of a rotation (the body's
	// default is admin.GraceDefault), the rotation form's too (parseAge).
	apiGraceMax = ageMax
	// apiTestTimeoutMax bounds a test event (the body's default is
	// admin.TestTimeoutDefault).
	apiTestTimeoutMax = 5 * time.Minute
	// apiAttemptsDefault and apiAttemptsMax bound the attempts listed.
	apiAttemptsDefault = 50
	apiAttemptsMax     = 1000
)

// apiEngine is the endpoints' engine, or nil with a 403 problem answered
// when the console has none (Config.Endpoints).
func (c *Console) apiEngine(w http.ResponseWriter) *admin.Admin {
	if c.cfg.Endpoints == nil {
		c.apiProblem(w, http.StatusForbidden, problemNoEngine, "this console does not manage endpoints (console.Config.Endpoints is nil)")
	}
	return c.cfg.Endpoints
}

// apiFind returns the engine and the endpoint of the path's {id} (its id,
// or a name only one endpoint has), or answers a problem and reports false.
func (c *Console) apiFind(w http.ResponseWriter, r *http.Request) (*admin.Admin, store.Endpoint, bool) {
	a := c.apiEngine(w)
	if a == nil {
		return nil, store.Endpoint{}, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	e, err := a.Find(ctx, r.PathValue("id"))
	if err != nil {
		c.apiFail(w, "finding an endpoint", err)
		return nil, store.Endpoint{}, false
	}
	return a, e, true
}

// apiLog logs an operation on an endpoint, with the client that asked.
func (c *Console) apiLog(r *http.Request, what string, id uuid.UUID, args ...any) {
	c.log.Info("console: API: "+what, append([]any{"endpoint", id, "client", c.clientAddr(r).String()}, args...)...)
}

func (c *Console) apiEndpointList(w http.ResponseWriter, r *http.Request) {
	a := c.apiEngine(w)
	if a == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	views, err := a.List(ctx)
	if err != nil {
		c.apiFail(w, "listing the endpoints", err)
		return
	}
	if views == nil {
		views = []admin.View{}
	}
	for i := range views {
		c.apiMask(&views[i])
	}
	c.apiJSON(w, http.StatusOK, views)
}

// apiMask describes v's URL on a read-only console (describeURL), as its
// pages show it: its path and query may hold a token (a chat service's),
// which only a console that manages the endpoints answers, for the
// programs that manage them.
func (c *Console) apiMask(v *admin.View) {
	if c.cfg.ReadOnly {
		v.URL = c.describeURL(v.URL)
	}
}

func (c *Console) apiEndpointGet(w http.ResponseWriter, r *http.Request) {
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	v, err := a.Get(ctx, e.ID)
	if err != nil {
		c.apiFail(w, "reading an endpoint", err)
		return
	}
	c.apiMask(&v)
	c.apiJSON(w, http.StatusOK, v)
}

// apiCreateBody is the body of POST /api/endpoints: the settings, and the
// credentials (none of them is ever answered).
type apiCreateBody struct {
	admin.Settings
	Secret  string              `json:"secret"`
	Headers map[string]string   `json:"headers"`
	Basic   *endpoint.BasicAuth `json:"basic"`
	Bearer  string              `json:"bearer"`
	OAuth2  *endpoint.OAuth2    `json:"oauth2"`
	TLS     *endpoint.ClientTLS `json:"tls"`
}

// apiCreated is the answer of POST /api/endpoints.
type apiCreated struct {
	Endpoint admin.View `json:"endpoint"`
	// Secret is the signing secret generated for a webhook added without
	// one: shown this once.
	Secret   string   `json:"secret,omitempty"`
	Warnings []string `json:"warnings"`
}

func (c *Console) apiEndpointCreate(w http.ResponseWriter, r *http.Request) {
	a := c.apiEngine(w)
	if a == nil {
		return
	}
	var body apiCreateBody
	if !c.apiRead(w, r, &body, false) {
		return
	}
	creds := endpoint.Credentials{Secret: body.Secret, Headers: body.Headers, Basic: body.Basic, Bearer: body.Bearer, OAuth2: body.OAuth2, TLS: body.TLS}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	created, err := a.Create(ctx, body.Settings, creds)
	if err != nil {
		c.apiFail(w, "adding an endpoint", err)
		return
	}
	c.apiLog(r, "endpoint added", created.Endpoint.ID, "name", created.Endpoint.Name, "secret_generated", created.Secret != "")
	w.Header().Set("Location", "/api/endpoints/"+created.Endpoint.ID.String())
	c.apiJSON(w, http.StatusCreated, apiCreated{Endpoint: created.Endpoint, Secret: created.Secret, Warnings: nonNil(created.Warnings)})
}

// apiUpdated is the answer of PATCH /api/endpoints/{id}.
type apiUpdated struct {
	Endpoint admin.View `json:"endpoint"`
	// Changed are the canonical names of the settings that changed.
	Changed  []string `json:"changed"`
	Warnings []string `json:"warnings"`
}

func (c *Console) apiEndpointPatch(w http.ResponseWriter, r *http.Request) {
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	body, ok := c.apiBody(w, r, false, "application/merge-patch+json", "application/json")
	if !ok {
		return
	}
	ch, err := apiChange(body)
	if err != nil {
		var fe *admin.FieldError
		if errors.As(err, &fe) {
			c.apiProblemSetting(w, http.StatusUnprocessableEntity, problemInvalid, fe.Message, fe.Setting)
		} else {
			c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "body: "+err.Error())
		}
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	up, err := a.Update(ctx, e.ID, ch)
	if err != nil {
		c.apiFail(w, "changing an endpoint", err)
		return
	}
	c.apiLog(r, "endpoint changed", e.ID, "changed", up.Changed)
	c.apiJSON(w, http.StatusOK, apiUpdated{Endpoint: up.Endpoint, Changed: nonNil(up.Changed), Warnings: nonNil(up.Warnings)})
}

// apiChange reads a change of an endpoint into an admin.Change: a JSON
// merge patch of the top level only (RFC 7396's members, not its
// recursion). A member replaces its setting whole, null sets it to its
// zero value (no filter, no types, ...). headers replaces every static
// header (null: none; a header given null is an empty value, which admin
// refuses); basic, bearer or oauth2 replaces the authentication (null:
// none); tls replaces the client certificate and CA (null: none). The
// signing secret changes only with rotate-secret.
func apiChange(body []byte) (admin.Change, error) {
	var patch map[string]json.RawMessage
	if err := apiDecode(body, &patch); err != nil {
		return admin.Change{}, err
	}
	if patch == nil {
		return admin.Change{}, errors.New("want a JSON object")
	}
	if _, ok := patch[admin.SettingSecret]; ok {
		return admin.Change{}, &admin.FieldError{Setting: admin.SettingSecret, Message: "secret: the signing secret changes with POST /api/endpoints/{id}/rotate-secret"}
	}
	for name := range patch {
		if !slices.Contains(apiPatchable, name) {
			return admin.Change{}, fmt.Errorf("unknown field %q", show(name, 80))
		}
	}
	var ch admin.Change
	null := func(raw json.RawMessage) bool { return string(raw) == "null" }
	// text sets *dst to the member name's string, when present.
	text := func(name string, dst **string) error {
		raw, ok := patch[name]
		if !ok {
			return nil
		}
		*dst = new(string)
		if null(raw) {
			return nil
		}
		return apiField(name, raw, *dst)
	}
	for _, f := range []struct {
		name string
		dst  **string
	}{
		{admin.SettingName, &ch.Name}, {admin.SettingURL, &ch.URL}, {admin.SettingFilter, &ch.Filter},
		{admin.SettingEnvelope, &ch.Envelope}, {admin.SettingCESource, &ch.CESource}, {admin.SettingSignature, &ch.Signature},
	} {
		if err := text(f.name, f.dst); err != nil {
			return ch, err
		}
	}
	if raw, ok := patch[admin.SettingTypes]; ok {
		ch.Types = &[]string{}
		if !null(raw) {
			if err := apiField(admin.SettingTypes, raw, ch.Types); err != nil {
				return ch, err
			}
		}
	}
	if raw, ok := patch[admin.SettingRate]; ok {
		ch.RatePerSecond = new(float64)
		if !null(raw) {
			if err := apiField(admin.SettingRate, raw, ch.RatePerSecond); err != nil {
				return ch, err
			}
		}
	}
	if raw, ok := patch[admin.SettingConcurrency]; ok {
		ch.Concurrency = new(int)
		if !null(raw) {
			if err := apiField(admin.SettingConcurrency, raw, ch.Concurrency); err != nil {
				return ch, err
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  **bool
	}{{admin.SettingShadow, &ch.Shadow}, {admin.SettingAllowPrivate, &ch.AllowPrivate}} {
		if raw, ok := patch[f.name]; ok {
			*f.dst = new(bool)
			if !null(raw) {
				if err := apiField(f.name, raw, *f.dst); err != nil {
					return ch, err
				}
			}
		}
	}
	cr := &ch.Credentials
	if raw, ok := patch[admin.SettingHeaders]; ok {
		cr.SetHeaders = true
		if !null(raw) {
			if err := apiField(admin.SettingHeaders, raw, &cr.Headers); err != nil {
				return ch, err
			}
		}
	}
	var auths []string
	for _, name := range []string{admin.SettingBasic, admin.SettingBearer, admin.SettingOAuth2} {
		raw, ok := patch[name]
		if !ok {
			continue
		}
		cr.SetAuth = true
		if null(raw) {
			continue
		}
		auths = append(auths, name)
		var err error
		switch name {
		case admin.SettingBasic:
			err = apiField(name, raw, &cr.Basic)
		case admin.SettingBearer:
			err = apiField(name, raw, &cr.Bearer)
		default:
			err = apiField(name, raw, &cr.OAuth2)
		}
		if err != nil {
			return ch, err
		}
	}
	if len(auths) > 1 {
		return ch, &admin.FieldError{Setting: admin.SettingAuth, Message: "give at most one of basic, bearer and oauth2: they are all the Authorization header"}
	}
	if raw, ok := patch[admin.SettingTLS]; ok {
		cr.SetTLS = true
		if !null(raw) {
			if err := apiField(admin.SettingTLS, raw, &cr.TLS); err != nil {
				return ch, err
			}
		}
	}
	return ch, nil
}

// apiPatchable are the members a patch of an endpoint may hold.
var apiPatchable = []string{
	admin.SettingName, admin.SettingURL, admin.SettingTypes, admin.SettingFilter, admin.SettingEnvelope, admin.SettingCESource,
	admin.SettingSignature, admin.SettingRate, admin.SettingConcurrency, admin.SettingShadow, admin.SettingAllowPrivate,
	admin.SettingHeaders, admin.SettingBasic, admin.SettingBearer, admin.SettingOAuth2, admin.SettingTLS,
}

// apiField decodes member name of a patch into dst.
func apiField(name string, raw json.RawMessage, dst any) error {
	if err := apiDecode(raw, dst); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func (c *Console) apiEndpointDelete(w http.ResponseWriter, r *http.Request) {
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if err := a.Delete(ctx, e.ID); err != nil {
		c.apiFail(w, "removing an endpoint", err)
		return
	}
	c.apiLog(r, "endpoint removed", e.ID, "name", e.Name)
	w.WriteHeader(http.StatusNoContent)
}

func (c *Console) apiEndpointEnable(w http.ResponseWriter, r *http.Request) {
	c.apiSetState(w, r, store.EndpointEnabled)
}

func (c *Console) apiEndpointDisable(w http.ResponseWriter, r *http.Request) {
	c.apiSetState(w, r, store.EndpointDisabled)
}

// apiSetState enables or disables the endpoint and answers its View.
func (c *Console) apiSetState(w http.ResponseWriter, r *http.Request, state string) {
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	var none struct{}
	if !c.apiRead(w, r, &none, true) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	if err := a.SetState(ctx, e.ID, state); err != nil {
		c.apiFail(w, "changing an endpoint's state", err)
		return
	}
	c.apiLog(r, "endpoint "+state, e.ID)
	v, err := a.Get(ctx, e.ID)
	if err != nil {
		c.apiFail(w, "reading an endpoint", err)
		return
	}
	c.apiJSON(w, http.StatusOK, v)
}

// apiRotateBody is the body of POST /api/endpoints/{id}/rotate-secret.
type apiRotateBody struct {
	// Secret is the new signing secret; absent or "": a new one is
	// generated and answered once.
	Secret string `json:"secret"`
	// GraceSeconds is how long the current secret keeps signing
	// (admin.GraceDefault when absent).
	GraceSeconds *float64 `json:"grace_seconds"`
}

// apiRotated is the answer of a rotation.
type apiRotated struct {
	Secret        string    `json:"secret,omitempty"`
	Fingerprint   string    `json:"fingerprint"`
	SecretsKey    string    `json:"secrets_key"`
	PreviousUntil time.Time `json:"previous_until"`
}

func (c *Console) apiEndpointRotate(w http.ResponseWriter, r *http.Request) {
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	var body apiRotateBody
	if !c.apiRead(w, r, &body, true) {
		return
	}
	grace := admin.GraceDefault
	if body.GraceSeconds != nil {
		if !(*body.GraceSeconds >= 0) || *body.GraceSeconds > apiGraceMax.Seconds() {
			c.apiProblemSetting(w, http.StatusUnprocessableEntity, problemInvalid, fmt.Sprintf("grace_seconds: want 0 to %v seconds", apiGraceMax.Seconds()), admin.SettingGrace)
			return
		}
		grace = time.Duration(*body.GraceSeconds * float64(time.Second))
	}
	ctx, cancel := context.WithTimeout(r.Context(), actionTimeout)
	defer cancel()
	rot, err := a.RotateSecret(ctx, e.ID, body.Secret, grace)
	if err != nil {
		c.apiFail(w, "rotating an endpoint's secret", err)
		return
	}
	c.apiLog(r, "endpoint secret rotated", e.ID, "fingerprint", rot.Fingerprint, "key", rot.Key, "previous_until", rot.PreviousUntil, "generated", rot.Secret != "")
	c.apiJSON(w, http.StatusOK, apiRotated{Secret: rot.Secret, Fingerprint: rot.Fingerprint, SecretsKey: rot.Key, PreviousUntil: rot.PreviousUntil.UTC()})
}

// apiTestBody is the body of POST /api/endpoints/{id}/test.
type apiTestBody struct {
	TimeoutSeconds *float64 `json:"timeout_seconds"`
}

// apiTested is the answer of a test event delivered.
type apiTested struct {
	EventID    uuid.UUID `json:"event_id"`
	DurationMS int64     `json:"duration_ms"`
}

func (c *Console) apiEndpointTest(w http.ResponseWriter, r *http.Request) {
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	var body apiTestBody
	if !c.apiRead(w, r, &body, true) {
		return
	}
	timeout := admin.TestTimeoutDefault
	if body.TimeoutSeconds != nil {
		if !(*body.TimeoutSeconds > 0) || *body.TimeoutSeconds > apiTestTimeoutMax.Seconds() {
			c.apiProblem(w, http.StatusBadRequest, problemBadRequest, fmt.Sprintf("timeout_seconds: want more than 0 and at most %v", apiTestTimeoutMax.Seconds()))
			return
		}
		timeout = time.Duration(*body.TimeoutSeconds * float64(time.Second))
	}
	tested, err := a.Test(r.Context(), e.ID, timeout)
	if te, failed := errors.AsType[*admin.TestError](err); failed {
		// The test's own failure: what the endpoint (or the way to it)
		// answered, which is what the caller asked to know (its text
		// holds the URL redacted, no secret).
		c.apiLog(r, "endpoint test failed", e.ID, "event", te.EventID, "error", te)
		c.apiProblem(w, http.StatusBadGateway, problemTestFailed, te.Error())
		return
	}
	if err != nil {
		c.apiFail(w, "testing an endpoint", err)
		return
	}
	c.apiLog(r, "endpoint test delivered", e.ID, "event", tested.EventID, "duration", tested.Duration)
	c.apiJSON(w, http.StatusOK, apiTested{EventID: tested.EventID, DurationMS: tested.Duration.Milliseconds()})
}

func (c *Console) apiEndpointAttempts(w http.ResponseWriter, r *http.Request) {
	limit, ok := c.apiLimit(w, r, apiAttemptsDefault, apiAttemptsMax)
	if !ok {
		return
	}
	a, e, ok := c.apiFind(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	attempts, err := a.Attempts(ctx, e.ID, limit)
	if err != nil {
		c.apiFail(w, "listing an endpoint's attempts", err)
		return
	}
	c.apiJSON(w, http.StatusOK, attempts)
}

// apiLimit reads the query's limit: def when absent, 1 to max.
func (c *Console) apiLimit(w http.ResponseWriter, r *http.Request, def, max int) (int, bool) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, true
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, fmt.Sprintf("limit: want 1 to %d", max))
		return 0, false
	}
	return n, true
}

// nonNil is s, or an empty slice for nil (JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
