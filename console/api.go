package console

import (
	"bytes"
	"crypto/hmac"
	_ "embed" // openapi.json
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/jsondepth"
	"github.com/postbox-go/postbox/store"
)

// The JSON API is the console's routes under /api/, for programs (a
// bearer token) and for the console's own pages (their session cookie):
// the webhook endpoints (through Config.Endpoints), the dead letters and
// the counts. openapi.json describes every route; the test of the API
// checks that the document and apiTable name the same operations, and
// validates every request and answer against the document.
//
// Authentication is the pages' (a bearer token, or a login session's
// cookie; no token: loopback hosts only), but a refusal is a 401 problem,
// never the login page. A request that changes anything (every method
// but GET and HEAD) must moreover be one no other site could have made
// a browser send:
//   - an Origin header, when sent, must be this console's, and a
//     Sec-Fetch-Site header, when sent, "same-origin" or "none";
//   - unless it carries the right bearer token, it must carry the
//     session's CSRF token in X-CSRF-Token (GET /api/session returns it).
//     That holds for a cookie session and for a console without a token
//     alike: another site's page can neither read that answer nor send
//     that header (it would need a CORS preflight, which the console
//     never grants), and a page that rebinds its name to 127.0.0.1 is
//     refused by the loopback host check before anything else.
//
// A read-only console refuses every such request (403).

// openAPIDocument is the JSON API's OpenAPI 3.1 document, served at GET
// /api/openapi.json.
//
//go:embed openapi.json
var openAPIDocument []byte

// apiBodyMax bounds a request's body (413 past it).
const apiBodyMax = 1 << 20

// apiDepthMax bounds how deeply a request's body nests arrays and objects.
const apiDepthMax = 32

// apiRoute is one operation of the JSON API: its method and its path as
// openapi.json writes them (the ServeMux pattern is "METHOD PATH").
type apiRoute struct {
	method, path string
	serve        func(c *Console, w http.ResponseWriter, r *http.Request)
}

// apiTable is every route of the JSON API; apiRoutes registers these and
// no other.
var apiTable = []apiRoute{
	{http.MethodGet, "/api/openapi.json", (*Console).apiOpenAPI},
	{http.MethodGet, "/api/session", (*Console).apiSession},
	{http.MethodGet, "/api/endpoints", (*Console).apiEndpointList},
	{http.MethodPost, "/api/endpoints", (*Console).apiEndpointCreate},
	{http.MethodGet, "/api/endpoints/{id}", (*Console).apiEndpointGet},
	{http.MethodPatch, "/api/endpoints/{id}", (*Console).apiEndpointPatch},
	{http.MethodDelete, "/api/endpoints/{id}", (*Console).apiEndpointDelete},
	{http.MethodPost, "/api/endpoints/{id}/enable", (*Console).apiEndpointEnable},
	{http.MethodPost, "/api/endpoints/{id}/disable", (*Console).apiEndpointDisable},
	{http.MethodPost, "/api/endpoints/{id}/rotate-secret", (*Console).apiEndpointRotate},
	{http.MethodPost, "/api/endpoints/{id}/test", (*Console).apiEndpointTest},
	{http.MethodGet, "/api/endpoints/{id}/attempts", (*Console).apiEndpointAttempts},
	{http.MethodGet, "/api/dead-letters", (*Console).apiDeadLetterList},
	{http.MethodGet, "/api/dead-letters/groups", (*Console).apiDeadLetterGroups},
	{http.MethodPost, "/api/dead-letters/retry", (*Console).apiDeadLetterRetry},
	{http.MethodPost, "/api/dead-letters/purge", (*Console).apiDeadLetterPurge},
	{http.MethodGet, "/api/stats", (*Console).apiStats},
	{http.MethodGet, "/api/replays", (*Console).apiReplayList},
	{http.MethodPost, "/api/replays", (*Console).apiReplayCreate},
	{http.MethodGet, "/api/replays/{id}", (*Console).apiReplayGet},
	{http.MethodPost, "/api/replays/{id}/cancel", (*Console).apiReplayCancel},
	{http.MethodGet, "/api/sources", (*Console).apiSources},
}

// apiRoutes adds the JSON API's routes, under /api/ (see openapi.json):
// one entry of mux, in front of a mux of its own that holds apiTable's
// routes and answers every other path under /api/ with a problem (404,
// or 405 when another method has the path).
func (c *Console) apiRoutes(mux *http.ServeMux) {
	api := http.NewServeMux()
	for _, rt := range apiTable {
		api.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) { rt.serve(c, w, r) })
	}
	api.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { c.apiNoRoute(api, w, r) })
	mux.Handle("/api/", c.apiGuard(api))
}

// apiNoRoute answers a request no route of api takes: 405 with Allow when
// the path is a route's with other methods, 404 otherwise.
func (c *Console) apiNoRoute(api *http.ServeMux, w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := api.Handler(probe); pattern != "/api/" && !slices.Contains(allow, m) {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		c.apiProblem(w, http.StatusMethodNotAllowed, problemMethod, r.Method+" is not an operation of "+r.URL.Path)
		return
	}
	c.apiProblem(w, http.StatusNotFound, problemNotFound, "no such route: the routes are in /api/openapi.json")
}

// apiAuthKind is how a request of the API was authenticated.
type apiAuthKind string

const (
	apiByBearer  apiAuthKind = "bearer"  // the token, in Authorization
	apiBySession apiAuthKind = "session" // a login session's cookie
	apiByNothing apiAuthKind = "none"    // a console without a token
)

// apiGuard checks what every request of the API needs (its token or
// session, and for a request that changes something, its origin, its
// CSRF token and a console that is not read-only) before api serves it.
func (c *Console) apiGuard(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		by, ok := c.apiAuth(w, r)
		if !ok {
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !c.apiMayChange(w, r, by) {
			return
		}
		api.ServeHTTP(w, r)
	})
}

// apiAuth authenticates r as requireAuth does, and answers a 401 or 429
// problem (never the login page) when it fails.
func (c *Console) apiAuth(w http.ResponseWriter, r *http.Request) (apiAuthKind, bool) {
	if c.cfg.Token == "" {
		return apiByNothing, true
	}
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		switch right, wait := c.guess(r, bearer); {
		case right:
			return apiByBearer, true
		case wait > 0:
			secs := int64((wait + time.Second - 1) / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			c.apiProblem(w, http.StatusTooManyRequests, problemBackoff,
				fmt.Sprintf("too many wrong tokens from this client: try again in %d s", secs))
			return "", false
		}
	} else if ck, err := r.Cookie(sessionCookie); err == nil && c.sessions.valid(ck.Value, c.now(), true) {
		return apiBySession, true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="postbox console"`)
	c.apiProblem(w, http.StatusUnauthorized, problemUnauthorized, "send the console's token as Authorization: Bearer TOKEN")
	return "", false
}

// apiMayChange checks a request that changes something: it comes from
// this console's origin, carries the CSRF token unless it carries the
// bearer token, and the console is not read-only. It answers 403 and
// reports false otherwise.
func (c *Console) apiMayChange(w http.ResponseWriter, r *http.Request, by apiAuthKind) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		if u, err := url.Parse(origin); err != nil || u.Host != r.Host {
			c.apiProblem(w, http.StatusForbidden, problemCrossOrigin, "the request comes from another origin than the console's")
			return false
		}
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		c.apiProblem(w, http.StatusForbidden, problemCrossOrigin, "the request comes from another site (Sec-Fetch-Site: "+show(site, 20)+")")
		return false
	}
	if by != apiByBearer && !c.apiCSRFValid(r) {
		c.apiProblem(w, http.StatusForbidden, problemCSRF, "a request that changes something needs the bearer token, or the X-CSRF-Token header that GET /api/session returns")
		return false
	}
	if c.cfg.ReadOnly {
		c.apiProblem(w, http.StatusForbidden, problemReadOnly, "the console is read-only: nothing can be changed through it")
		return false
	}
	return true
}

// apiCSRFValid checks r's X-CSRF-Token header against the CSRF token of
// its session (csrfToken).
func (c *Console) apiCSRFValid(r *http.Request) bool {
	got, err := hex.DecodeString(r.Header.Get("X-CSRF-Token"))
	if err != nil || len(got) == 0 {
		return false
	}
	want, _ := hex.DecodeString(c.csrfToken(r))
	return hmac.Equal(got, want)
}

// apiOpenAPI serves the OpenAPI document.
func (c *Console) apiOpenAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
}

// apiSessionInfo is the answer of GET /api/session.
type apiSessionInfo struct {
	Auth      apiAuthKind `json:"auth"`
	CSRFToken string      `json:"csrf_token"`
	ReadOnly  bool        `json:"read_only"`
	// Endpoints is "manage" when the console manages endpoints,
	// "read-only" when it has their engine but is read-only (it shows
	// them, as its start line says), "off" without the engine.
	Endpoints string `json:"endpoints"`
}

// apiSession says how the request was authenticated and returns the
// CSRF token its changes need.
func (c *Console) apiSession(w http.ResponseWriter, r *http.Request) {
	by := apiByNothing
	switch {
	case c.cfg.Token == "":
	case strings.HasPrefix(r.Header.Get("Authorization"), "Bearer "):
		by = apiByBearer
	default:
		by = apiBySession
	}
	info := apiSessionInfo{Auth: by, CSRFToken: c.csrfToken(r), ReadOnly: c.cfg.ReadOnly, Endpoints: "off"}
	switch {
	case c.cfg.Endpoints == nil:
	case c.cfg.ReadOnly:
		info.Endpoints = "read-only"
	default:
		info.Endpoints = "manage"
	}
	c.apiJSON(w, http.StatusOK, info)
}

// apiJSON writes v as JSON with status.
func (c *Console) apiJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		c.log.Error("console: encoding an API answer", "error", err)
		c.apiProblem(w, http.StatusInternalServerError, problemInternal, "the answer could not be encoded: see the console's log")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// A problem names one kind of refusal (RFC 9457): its type URI ends with
// it, and its title is the kind's.
type problem string

// The problems of the JSON API.
const (
	problemBadRequest    problem = "bad-request"
	problemUnauthorized  problem = "unauthorized"
	problemBackoff       problem = "too-many-wrong-tokens"
	problemCrossOrigin   problem = "cross-origin"
	problemCSRF          problem = "csrf"
	problemReadOnly      problem = "read-only"
	problemNoEngine      problem = "endpoints-off"
	problemNoKey         problem = "no-secrets-key"
	problemNotFound      problem = "not-found"
	problemMethod        problem = "method-not-allowed"
	problemAmbiguous     problem = "ambiguous"
	problemChanged       problem = "changed"
	problemTooLarge      problem = "body-too-large"
	problemMediaType     problem = "unsupported-media-type"
	problemInvalid       problem = "invalid-setting"
	problemTestFailed    problem = "test-failed"
	problemInternal      problem = "internal"
	problemReplayOff     problem = "replay-off"
	problemReplayRunning problem = "replay-running"
	problemSourceUnknown problem = "source-unknown"
	problemSourceDown    problem = "source-unavailable"
)

// problemTitles are the problems' titles, the same for every problem of
// a kind.
var problemTitles = map[problem]string{
	problemBadRequest:    "Bad request",
	problemUnauthorized:  "Authentication required",
	problemBackoff:       "Too many wrong tokens",
	problemCrossOrigin:   "Cross-origin request refused",
	problemCSRF:          "Missing or wrong CSRF token",
	problemReadOnly:      "The console is read-only",
	problemNoEngine:      "Endpoint management is off",
	problemNoKey:         "No secrets key",
	problemNotFound:      "Not found",
	problemMethod:        "Method not allowed",
	problemAmbiguous:     "Ambiguous name",
	problemChanged:       "Changed meanwhile",
	problemTooLarge:      "Request body too large",
	problemMediaType:     "Unsupported media type",
	problemInvalid:       "Invalid setting",
	problemTestFailed:    "Test event not delivered",
	problemInternal:      "Internal error",
	problemReplayOff:     "Replay is off",
	problemReplayRunning: "A replay is running",
	problemSourceUnknown: "No such source",
	problemSourceDown:    "Source unavailable",
}

// problemTypePrefix starts every problem's type URI.
const problemTypePrefix = "urn:postbox:problem:"

// apiProblemBody is an RFC 9457 problem: what every refusal of the API
// answers, as application/problem+json. Setting names the refused
// setting (admin.FieldError's canonical name) of a 422.
type apiProblemBody struct {
	Type    string `json:"type"`
	Title   string `json:"title"`
	Status  int    `json:"status"`
	Detail  string `json:"detail,omitempty"`
	Setting string `json:"setting,omitempty"`
}

// apiProblem answers a problem of kind p with status and detail.
func (c *Console) apiProblem(w http.ResponseWriter, status int, p problem, detail string) {
	c.apiProblemSetting(w, status, p, detail, "")
}

// apiProblemSetting answers a problem that names the refused setting.
func (c *Console) apiProblemSetting(w http.ResponseWriter, status int, p problem, detail, setting string) {
	b, _ := json.Marshal(apiProblemBody{Type: problemTypePrefix + string(p), Title: problemTitles[p], Status: status, Detail: detail, Setting: setting})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// apiFail answers err, an error of the endpoints' engine or of the store,
// with its problem; what is not the client's doing is logged (what)
// and answered 500 without its text.
func (c *Console) apiFail(w http.ResponseWriter, what string, err error) {
	var fe *admin.FieldError
	switch {
	case errors.As(err, &fe):
		c.apiProblemSetting(w, http.StatusUnprocessableEntity, problemInvalid, fe.Message, fe.Setting)
	case errors.Is(err, admin.ErrInvalid):
		c.apiProblem(w, http.StatusUnprocessableEntity, problemInvalid, err.Error())
	case errors.Is(err, admin.ErrNotFound), errors.Is(err, store.ErrEndpointNotFound):
		c.apiProblem(w, http.StatusNotFound, problemNotFound, "no such endpoint")
	case errors.Is(err, admin.ErrAmbiguous):
		c.apiProblem(w, http.StatusConflict, problemAmbiguous, "several endpoints have this name: give the id")
	case errors.Is(err, store.ErrEndpointChanged):
		c.apiProblem(w, http.StatusConflict, problemChanged, "the endpoint was changed meanwhile: read it again and retry")
	case errors.Is(err, endpoint.ErrNoKeyring):
		c.apiProblem(w, http.StatusForbidden, problemNoKey, "the console has no secrets key (POSTBOX_SECRETS_KEY or --secrets-key-file): it cannot seal nor open endpoints' secrets, so it does not add, rotate or test endpoints, nor change their credentials")
	default:
		c.log.Error("console: API: "+what, "error", err)
		c.apiProblem(w, http.StatusInternalServerError, problemInternal, what+" failed: see the console's log")
	}
}

// apiRead reads r's JSON body into v, and answers a problem and reports
// false when it cannot: 413 past apiBodyMax, 415 for a body not of one of
// mediaTypes (application/json when none), 400 for a body that is not
// one JSON value of v's shape (an unknown field included). An empty body
// leaves v as it is when optional, and is refused otherwise.
func (c *Console) apiRead(w http.ResponseWriter, r *http.Request, v any, optional bool, mediaTypes ...string) bool {
	body, ok := c.apiBody(w, r, optional, mediaTypes...)
	if !ok || body == nil {
		return ok
	}
	if err := apiDecode(body, v); err != nil {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "body: "+err.Error())
		return false
	}
	return true
}

// apiBody reads r's body (nil when empty and optional), checking its size,
// media type and nesting.
func (c *Console) apiBody(w http.ResponseWriter, r *http.Request, optional bool, mediaTypes ...string) ([]byte, bool) {
	if len(mediaTypes) == 0 {
		mediaTypes = []string{"application/json"}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !slices.Contains(mediaTypes, mt) {
			c.apiProblem(w, http.StatusUnsupportedMediaType, problemMediaType, "Content-Type: want "+strings.Join(mediaTypes, " or "))
			return nil, false
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, apiBodyMax))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			c.apiProblem(w, http.StatusRequestEntityTooLarge, problemTooLarge, fmt.Sprintf("the body is larger than %d bytes", apiBodyMax))
		} else {
			c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "the body could not be read")
		}
		return nil, false
	}
	switch {
	case len(bytes.TrimSpace(body)) == 0 && optional:
		return nil, true
	case len(bytes.TrimSpace(body)) == 0:
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, "body: want a JSON object")
		return nil, false
	case r.Header.Get("Content-Type") == "":
		c.apiProblem(w, http.StatusUnsupportedMediaType, problemMediaType, "Content-Type: want "+strings.Join(mediaTypes, " or "))
		return nil, false
	}
	if _, deep := jsondepth.Exceeds(body, apiDepthMax); deep {
		c.apiProblem(w, http.StatusBadRequest, problemBadRequest, fmt.Sprintf("body: nests deeper than %d", apiDepthMax))
		return nil, false
	}
	return body, true
}

// apiDecode decodes one JSON value from b into v, refusing unknown fields
// and anything after the value. Its errors name the field, never a value.
func apiDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return fmt.Errorf("not JSON (at byte %d)", syntax.Offset)
		case errors.As(err, &typ) && typ.Field != "":
			return fmt.Errorf("%s: want %s", typ.Field, apiTypeName(typ.Type.Kind().String()))
		case errors.As(err, &typ):
			return fmt.Errorf("want %s", apiTypeName(typ.Type.Kind().String()))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return errors.New("the JSON ends early")
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return fmt.Errorf("unknown field %s", show(field, 80))
		}
		return errors.New("not a JSON value of the expected shape")
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("more than one JSON value")
	}
	return nil
}

// apiTypeName names a Go kind the JSON way.
func apiTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	}
	return "a number"
}
