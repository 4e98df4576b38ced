package console_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/config"

	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/postboxtest/logbuf"
)

// apiDocument is the API's OpenAPI document as the repository holds it.
func apiDocument(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// apiValidator validates requests and answers against the document.
func apiValidator(t *testing.T) validator.Validator {
	t.Helper()
	doc, err := libopenapi.NewDocument(apiDocument(t))
	if err != nil {
		t.Fatal(err)
	}
	v, errs := validator.NewValidator(doc, config.WithFormatAssertions())
	if len(errs) > 0 {
		t.Fatalf("openapi.json: %v", errs)
	}
	return v
}

// apiOperations are the document's operations, "METHOD /api/path".
func apiOperations(t *testing.T) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(apiDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	var ops []string
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				ops = append(ops, strings.ToUpper(method)+" "+path)
			}
		}
	}
	slices.Sort(ops)
	return ops
}

// The document is a valid OpenAPI 3.1 document, and the console serves
// it as the repository holds it.
func TestAPIDocumentIsValidOpenAPI31(t *testing.T) {
	t.Parallel()
	v := apiValidator(t)
	if ok, errs := v.ValidateDocument(); !ok {
		for _, e := range errs {
			t.Errorf("openapi.json: %s", e.Error())
		}
	}
	var head struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(apiDocument(t), &head); err != nil || head.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json: openapi %q (%v), want 3.1.0", head.OpenAPI, err)
	}
	a := newAPI(t, console.Config{Store: sqliteStore(t), Token: testToken})
	res, body := a.call(t, apiCall{method: http.MethodGet, path: "/api/openapi.json"}, http.StatusOK)
	if !bytes.Equal(body, apiDocument(t)) {
		t.Fatal("GET /api/openapi.json is not console/openapi.json")
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q", ct)
	}
}

// Every route the API registers is an operation of the document and
// every operation of the document a route: apiTable (all the API's
// routes: apiRoutes mounts one mux built from it) against the document's
// paths, and the console's sources hold no other pattern under /api.
func TestAPIRoutesAreDocumented(t *testing.T) {
	t.Parallel()
	routes := console.APIRoutes()
	slices.Sort(routes)
	ops := apiOperations(t)
	for _, r := range routes {
		if _, found := slices.BinarySearch(ops, r); !found {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, op := range ops {
		if _, found := slices.BinarySearch(routes, op); !found {
			t.Errorf("openapi.json's %s is no route of the console", op)
		}
	}
	// A pattern written beside the table would escape the check above:
	// the only literal pattern under /api in the console's code is the
	// mount point "/api/" (and its own catch-all).
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			pattern, _ := strconv.Unquote(lit.Value)
			if strings.Contains(pattern, "/api") && pattern != "/api/" {
				t.Errorf("%s: pattern %q: the API's routes belong in apiTable (console/api.go), so that the document's test sees them", fset.Position(lit.Pos()), pattern)
			}
			return true
		})
	}
}

// apiAPI is a client of one console's JSON API that validates every
// request it sends as valid and every answer against openapi.json, and
// records which operations answered 2xx.
type apiAPI struct {
	base    string
	http    *http.Client
	v       validator.Validator
	ops     *http.ServeMux // the document's operations: Handler names a request's
	token   string
	log     *logbuf.Buffer
	mu      sync.Mutex
	covered map[string]bool
	answers []string
}

func newAPI(t *testing.T, cfg console.Config) *apiAPI {
	t.Helper()
	a := &apiAPI{v: apiValidator(t), ops: http.NewServeMux(), token: cfg.Token, log: &logbuf.Buffer{}, covered: map[string]bool{}}
	for _, op := range apiOperations(t) {
		a.ops.HandleFunc(op, func(http.ResponseWriter, *http.Request) {})
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(a.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.serve(t, c)
	return a
}

// newAPIOf is newAPI for a handler built by the test (a Multi), whose
// token is token.
func newAPIOf(t *testing.T, h http.Handler, token string) *apiAPI {
	t.Helper()
	a := &apiAPI{v: apiValidator(t), ops: http.NewServeMux(), token: token, log: &logbuf.Buffer{}, covered: map[string]bool{}}
	for _, op := range apiOperations(t) {
		a.ops.HandleFunc(op, func(http.ResponseWriter, *http.Request) {})
	}
	a.serve(t, h)
	return a
}

// serve serves h to a's client until t ends.
func (a *apiAPI) serve(t *testing.T, h http.Handler) {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	a.base, a.http = srv.URL, &http.Client{Jar: jar, Timeout: time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// apiCall is one request. By default it carries the bearer token; body,
// when not nil, is sent as JSON (a string or []byte as it is).
type apiCall struct {
	method, path string
	body         any
	contentType  string
	header       http.Header
	// noBearer leaves the bearer token out (a session's cookie, or none).
	noBearer bool
	// hostile marks a request that breaks the document on purpose: only
	// its answer is validated.
	hostile bool
	// undocumented marks a path or a method the document does not have:
	// its answer cannot be validated, and must be a problem.
	undocumented bool
}

// call sends c, checks the answer's status, validates both against the
// document, and returns the answer and its body.
func (a *apiAPI) call(t *testing.T, c apiCall, want int) (*http.Response, []byte) {
	t.Helper()
	var body []byte
	switch b := c.body.(type) {
	case nil:
	case string:
		body = []byte(b)
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	newReq := func() *http.Request {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req, err := http.NewRequest(c.method, a.base+c.path, r)
		if err != nil {
			t.Fatal(err)
		}
		for k, vs := range c.header {
			req.Header[k] = vs
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			ct := c.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
		}
		if a.token != "" && !c.noBearer {
			req.Header.Set("Authorization", "Bearer "+a.token)
		}
		if u, _ := url.Parse(a.base); a.http.Jar != nil {
			for _, ck := range a.http.Jar.Cookies(u) {
				req.AddCookie(ck)
			}
		}
		return req
	}
	req := newReq()
	res, err := (&http.Client{Timeout: a.http.Timeout, CheckRedirect: a.http.CheckRedirect}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.answers = append(a.answers, c.method+" "+c.path+" "+strconv.Itoa(res.StatusCode)+"\n"+fmt.Sprint(res.Header)+"\n"+string(got))
	a.mu.Unlock()
	if res.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d; body:\n%s", c.method, c.path, res.StatusCode, want, got)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s %s: Cache-Control %q, want no-store", c.method, c.path, cc)
	}
	if !c.hostile {
		if ok, errs := a.v.ValidateHttpRequest(newReq()); !ok {
			t.Errorf("%s %s: the request does not follow openapi.json:\n%s", c.method, c.path, validationErrors(errs))
		}
	}
	check := newReq()
	res.Body = io.NopCloser(bytes.NewReader(got))
	if ok, errs := a.v.ValidateHttpResponse(check, res); !ok && !c.undocumented {
		t.Errorf("%s %s: the answer %d does not follow openapi.json:\n%s\n%s", c.method, c.path, res.StatusCode, validationErrors(errs), got)
	}
	if res.StatusCode >= 400 && res.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: %d answered as %q, want application/problem+json", c.method, c.path, res.StatusCode, res.Header.Get("Content-Type"))
	}
	if res.StatusCode < 300 {
		if _, pattern := a.ops.Handler(check); pattern != "" {
			a.mu.Lock()
			a.covered[pattern] = true
			a.mu.Unlock()
		}
	}
	return res, got
}

// validationErrors lists errs, one a line.
func validationErrors[E interface{ Error() string }](errs []E) string {
	var b strings.Builder
	for _, e := range errs {
		b.WriteString("  " + e.Error() + "\n")
	}
	return b.String()
}

// problemOf reads a problem answer, and checks its status member.
func problemOf(t *testing.T, res *http.Response, body []byte) apiProblem {
	t.Helper()
	var p apiProblem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("problem %s: %v", body, err)
	}
	if p.Status != res.StatusCode {
		t.Fatalf("problem status %d, answered %d", p.Status, res.StatusCode)
	}
	return p
}

type apiProblem struct {
	Type, Title, Detail, Setting string
	Status                       int
}

// wantProblem checks that a call is refused with status and problem kind.
func (a *apiAPI) wantProblem(t *testing.T, c apiCall, status int, kind string) apiProblem {
	t.Helper()
	c.hostile = true
	res, body := a.call(t, c, status)
	p := problemOf(t, res, body)
	if p.Type != "urn:postbox:problem:"+kind {
		t.Fatalf("%s %s: problem %s, want %s", c.method, c.path, p.Type, kind)
	}
	return p
}

// decode decodes body into v, zeroed first (a member an answer leaves
// out is not one the answer before gave).
func decode(t *testing.T, body []byte, v any) {
	t.Helper()
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
}

// Every concurrency the document describes has the bound admin keeps.
func TestAPIDocumentBoundsConcurrency(t *testing.T) {
	var doc any
	if err := json.Unmarshal(apiDocument(t), &doc); err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "concurrency" {
					n++
					if m, _ := x.(map[string]any); m["maximum"] != float64(admin.ConcurrencyMax) {
						t.Errorf("%s/concurrency: maximum %v, want %d", path, m["maximum"], admin.ConcurrencyMax)
					}
				}
				walk(path+"/"+k, x)
			}
		case []any:
			for i, x := range v {
				walk(path+"/"+strconv.Itoa(i), x)
			}
		}
	}
	walk("", doc)
	if n == 0 {
		t.Fatal("the document describes no concurrency")
	}
}
