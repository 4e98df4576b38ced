package console_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/console"
	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/store"
)

// apiAdmin is an endpoints' engine of s; with a key unless noKey. Its
// endpoints may reach private addresses (the tests' receivers are on
// 127.0.0.1), as postbox console --allow-private-endpoints's.
func apiAdmin(t *testing.T, s console.Store, noKey bool) *admin.Admin {
	t.Helper()
	cfg := admin.Config{Store: driverOf(t, s), PrivateEndpoints: true}
	if !noKey {
		k, err := keyring.Parse(keyring.GenerateKey())
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keyring = k
	}
	a, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// testCertificate is a self-signed client certificate and its key, PEM.
func testCertificate(t *testing.T) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "postbox test client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// apiReceiver is a webhook endpoint on 127.0.0.1 that answers 204 and
// keeps the requests' headers.
type apiReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []http.Header
}

func newReceiver(t *testing.T) *apiReceiver {
	r := &apiReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.got = append(r.got, req.Header.Clone())
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *apiReceiver) requests() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// apiView is the part of an endpoint's JSON the tests read.
type apiView struct {
	ID                uuid.UUID             `json:"id"`
	Name              string                `json:"name"`
	URL               string                `json:"url"`
	Filter            string                `json:"filter"`
	RatePerSecond     float64               `json:"rate_per_second"`
	State             string                `json:"state"`
	Auth              []string              `json:"auth"`
	SecretFingerprint string                `json:"secret_fingerprint"`
	Deliveries        *store.DeliveryCounts `json:"deliveries"`
}

// Every operation of openapi.json, called against a console over a real
// store (PostgreSQL and SQLite) as its documentation says: each request
// and each answer is validated against the document, every operation
// answers 2xx at least once, and what each answer says is checked. No
// answer holds a secret given (signing secrets, passwords, bearer tokens,
// header values, PEM keys, the console's token), a generated secret is in
// its one answer only, and the console's log holds none.
func TestAPIConformance(t *testing.T) {
	forEachStore(t, func(t *testing.T, s console.Store) {
		a := newAPI(t, console.Config{Store: s, Token: testToken, Endpoints: apiAdmin(t, s, false)})
		recv := newReceiver(t)
		certPEM, keyPEM := testCertificate(t)
		const (
			givenSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
			rotatedSecret = "whsec_dGhpcyBpcyB0aGUgcm90YXRlZCBzZWNyZXQh"
			headerSecret  = "api-key-header-value-not-shown"
			headerSecret2 = "second-api-key-header-value-not-shown"
			bearerSecret  = "bearer-token-for-the-partner-not-shown"
			password      = "basic-password-not-shown"
			clientSecret  = "oauth2-client-secret-not-shown"
		)
		get := func(path string) []byte {
			_, body := a.call(t, apiCall{method: http.MethodGet, path: path}, http.StatusOK)
			return body
		}
		post := func(path string, body any, want int) []byte {
			_, got := a.call(t, apiCall{method: http.MethodPost, path: path, body: body}, want)
			return got
		}

		// The document, the session, the counts.
		get("/api/openapi.json")
		var session struct {
			Auth string `json:"auth"`
		}
		decode(t, get("/api/session"), &session)
		if session.Auth != "bearer" {
			t.Fatalf("session auth %q, want bearer", session.Auth)
		}
		var list []apiView
		if decode(t, get("/api/endpoints"), &list); len(list) != 0 {
			t.Fatalf("endpoints before any: %v", list)
		}

		// Create: a webhook on 127.0.0.1 (allow_private) with a static
		// header and a bearer token, its secret generated; a public one
		// with its secret given, Basic authentication and a client
		// certificate.
		res, body := a.call(t, apiCall{method: http.MethodPost, path: "/api/endpoints", body: map[string]any{
			"name": "warehouse", "url": recv.URL + "/hook", "types": []string{"order.*", "postbox.test"}, "allow_private": true,
			"headers": map[string]string{"X-Api-Key": headerSecret}, "bearer": bearerSecret,
		}}, http.StatusCreated)
		var created struct {
			Endpoint apiView `json:"endpoint"`
			Secret   string  `json:"secret"`
			Warnings []string
		}
		decode(t, body, &created)
		wh := created.Endpoint
		generated := created.Secret
		if !strings.HasPrefix(generated, "whsec_") || wh.Name != "warehouse" || wh.State != store.EndpointEnabled {
			t.Fatalf("created %s", body)
		}
		if loc := res.Header.Get("Location"); loc != "/api/endpoints/"+wh.ID.String() {
			t.Fatalf("Location %q", loc)
		}
		if !slices.Contains(wh.Auth, "bearer") || !slices.Contains(wh.Auth, "headers") {
			t.Fatalf("auth %v, want bearer and headers", wh.Auth)
		}
		decode(t, post("/api/endpoints", map[string]any{
			"name": "partner", "url": "https://93.184.215.14/hooks/orders", "secret": givenSecret, "concurrency": 2,
			"basic": map[string]string{"user": "postbox", "password": password},
			"tls":   map[string]string{"cert_pem": certPEM, "key_pem": keyPEM},
		}, http.StatusCreated), &created)
		partner := created.Endpoint
		if created.Secret != "" || !slices.Contains(partner.Auth, "basic") || !slices.Contains(partner.Auth, "mtls") {
			t.Fatalf("partner created: secret answered %v, auth %v", created.Secret != "", partner.Auth)
		}

		// Read: the list, one by id with its deliveries, one by name.
		if decode(t, get("/api/endpoints"), &list); len(list) != 2 || list[0].ID != wh.ID || list[1].ID != partner.ID {
			t.Fatalf("list: %+v", list)
		}
		var one apiView
		if decode(t, get("/api/endpoints/"+wh.ID.String()), &one); one.Deliveries == nil || one.ID != wh.ID {
			t.Fatalf("get: %+v", one)
		}
		if decode(t, get("/api/endpoints/partner"), &one); one.ID != partner.ID {
			t.Fatalf("get by name: %+v", one)
		}

		// Patch: the filter and the rate (a merge patch), the headers
		// replaced, the bearer token removed, OAuth2 on the partner.
		var updated struct {
			Endpoint apiView  `json:"endpoint"`
			Changed  []string `json:"changed"`
		}
		_, body = a.call(t, apiCall{method: http.MethodPatch, path: "/api/endpoints/" + wh.ID.String(), contentType: "application/merge-patch+json",
			body: map[string]any{"filter": "payload.total > 100", "rate_per_second": 5}}, http.StatusOK)
		decode(t, body, &updated)
		if updated.Endpoint.Filter != "payload.total > 100" || updated.Endpoint.RatePerSecond != 5 ||
			!slices.Contains(updated.Changed, "filter") || !slices.Contains(updated.Changed, "rate_per_second") {
			t.Fatalf("patched: %s", body)
		}
		_, body = a.call(t, apiCall{method: http.MethodPatch, path: "/api/endpoints/warehouse",
			body: map[string]any{"headers": map[string]string{"X-Api-Key": headerSecret2}, "bearer": nil}}, http.StatusOK)
		decode(t, body, &updated)
		if slices.Contains(updated.Endpoint.Auth, "bearer") || !slices.Contains(updated.Endpoint.Auth, "headers") {
			t.Fatalf("headers replaced, bearer removed: %s", body)
		}
		_, body = a.call(t, apiCall{method: http.MethodPatch, path: "/api/endpoints/" + partner.ID.String(), body: map[string]any{
			"oauth2": map[string]any{"token_url": "https://93.184.215.14/token", "client_id": "postbox", "client_secret": clientSecret, "scopes": []string{"hooks"}},
		}}, http.StatusOK)
		if decode(t, body, &updated); !slices.Contains(updated.Endpoint.Auth, "oauth2") || slices.Contains(updated.Endpoint.Auth, "basic") {
			t.Fatalf("oauth2 instead of basic: %s", body)
		}

		// Disable, enable.
		if decode(t, post("/api/endpoints/"+wh.ID.String()+"/disable", nil, http.StatusOK), &one); one.State != store.EndpointDisabled {
			t.Fatalf("disabled: %+v", one)
		}
		if decode(t, post("/api/endpoints/"+wh.ID.String()+"/enable", map[string]any{}, http.StatusOK), &one); one.State != store.EndpointEnabled {
			t.Fatalf("enabled: %+v", one)
		}

		// Rotate: a generated secret (answered once), then one given.
		var rotated struct {
			Secret, Fingerprint string
			SecretsKey          string    `json:"secrets_key"`
			PreviousUntil       time.Time `json:"previous_until"`
		}
		decode(t, post("/api/endpoints/"+wh.ID.String()+"/rotate-secret", nil, http.StatusOK), &rotated)
		rotatedGenerated := rotated.Secret
		if !strings.HasPrefix(rotatedGenerated, "whsec_") || rotated.Fingerprint == "" || time.Until(rotated.PreviousUntil) < 23*time.Hour {
			t.Fatalf("rotated: %+v", rotated)
		}
		decode(t, post("/api/endpoints/"+wh.ID.String()+"/rotate-secret", map[string]any{"secret": rotatedSecret, "grace_seconds": 60}, http.StatusOK), &rotated)
		if rotated.Secret != "" || time.Until(rotated.PreviousUntil) > 2*time.Minute {
			t.Fatalf("rotated to a given secret: %+v", rotated)
		}
		if decode(t, get("/api/endpoints/"+wh.ID.String()), &one); one.SecretFingerprint != rotated.Fingerprint {
			t.Fatalf("fingerprint %q after the rotation, want %q", one.SecretFingerprint, rotated.Fingerprint)
		}

		// Test: the receiver gets postbox.test with the static header.
		var tested struct {
			EventID    uuid.UUID `json:"event_id"`
			DurationMS int64     `json:"duration_ms"`
		}
		decode(t, post("/api/endpoints/"+wh.ID.String()+"/test", map[string]any{"timeout_seconds": 10}, http.StatusOK), &tested)
		got := recv.requests()
		if len(got) != 1 || got[0].Get("webhook-id") != tested.EventID.String() || got[0].Get("X-Api-Key") != headerSecret2 {
			t.Fatalf("the receiver got %v; want one request, webhook-id %s, the static header", got, tested.EventID)
		}

		// Attempts: the log as the relay writes it.
		eng := driverOf(t, s)
		if err := eng.AttemptInsert(ctxFor(t), []store.Attempt{
			{EndpointID: wh.ID, EventID: postbox.NewID(), EventType: "order.paid", Attempt: 1, StatusCode: 503, Duration: 42 * time.Millisecond,
				Response: "busy", Error: "HTTP 503", At: time.Now().Add(-time.Minute)},
			{EndpointID: wh.ID, EventID: postbox.NewID(), EventType: "order.paid", Attempt: 1, StatusCode: 204, Duration: 7 * time.Millisecond, At: time.Now()},
		}); err != nil {
			t.Fatal(err)
		}
		var attempts []store.Attempt
		if decode(t, get("/api/endpoints/"+wh.ID.String()+"/attempts?limit=10"), &attempts); len(attempts) != 2 || attempts[0].StatusCode != 204 || attempts[1].Error != "HTTP 503" {
			t.Fatalf("attempts: %+v", attempts)
		}

		// Dead letters: the outbox's, and the warehouse's deliveries.
		outboxIDs := failEvents(t, s, []postbox.Event{orderEvent(1), orderEvent(2)}, []string{"HTTP 500 from the sink", "HTTP 500 from the sink"})
		deliveries := []postbox.Event{orderEvent(3), orderEvent(4), orderEvent(5)}
		failDeliveries(t, s, store.Endpoint{ID: wh.ID, Name: "warehouse"}, deliveries, []string{"HTTP 502", "HTTP 502", "timeout"})
		var page struct {
			Events []struct {
				ID           uuid.UUID  `json:"id"`
				Endpoint     *uuid.UUID `json:"endpoint"`
				EndpointName string     `json:"endpoint_name"`
			} `json:"events"`
			Next string `json:"next"`
		}
		if decode(t, get("/api/dead-letters"), &page); len(page.Events) != 2 || page.Events[0].Endpoint != nil {
			t.Fatalf("outbox dead letters: %+v", page)
		}
		if decode(t, get("/api/dead-letters?endpoint=warehouse&type=order.paid"), &page); len(page.Events) != 3 || page.Events[0].EndpointName != "warehouse" {
			t.Fatalf("warehouse dead letters: %+v", page)
		}
		q := url.Values{"endpoint": {"all"}, "limit": {"2"}, "failed_since": {time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}}
		if decode(t, get("/api/dead-letters?"+q.Encode()), &page); len(page.Events) != 2 || page.Next == "" {
			t.Fatalf("first page: %+v", page)
		}
		q.Set("after", page.Next)
		if decode(t, get("/api/dead-letters?"+q.Encode()), &page); len(page.Events) != 1 || page.Next != "" {
			t.Fatalf("second page: %+v", page)
		}
		var groups struct {
			Groups []struct {
				ID    string `json:"id"`
				Count int    `json:"count"`
			} `json:"groups"`
			Scanned  int  `json:"scanned"`
			Complete bool `json:"complete"`
		}
		if decode(t, get("/api/dead-letters/groups?endpoint="+wh.ID.String()), &groups); len(groups.Groups) != 2 || groups.Scanned != 3 || !groups.Complete {
			t.Fatalf("groups: %+v", groups)
		}
		var count struct{ Count int }
		if decode(t, post("/api/dead-letters/retry", map[string]any{"endpoint": "warehouse", "ids": []string{deliveries[0].ID.String()}}, http.StatusOK), &count); count.Count != 1 {
			t.Fatalf("retry of one delivery: %+v", count)
		}
		if decode(t, post("/api/dead-letters/retry", map[string]any{"endpoint": "warehouse", "group": groups.Groups[len(groups.Groups)-1].ID}, http.StatusOK), &count); count.Count != 1 {
			t.Fatalf("retry of the smaller group: %+v", count)
		}
		if decode(t, post("/api/dead-letters/retry", map[string]any{"ids": []string{outboxIDs[0].String()}}, http.StatusOK), &count); count.Count != 1 || status(t, s, outboxIDs[0]) != store.StatusPending {
			t.Fatalf("retry of an outbox event: %+v", count)
		}
		if decode(t, post("/api/dead-letters/purge", map[string]any{"all": true, "type": "order.paid"}, http.StatusOK), &count); count.Count != 1 {
			t.Fatalf("purge of the outbox's order.paid: %+v", count)
		}
		if _, err := s.Get(ctxFor(t), outboxIDs[1]); err == nil {
			t.Fatal("the purged event is still there")
		}

		// Stats.
		var stats struct {
			Outbox struct {
				Pending, Failed int64
			} `json:"outbox"`
			Endpoints []struct {
				Name       string
				Deliveries struct {
					Pending, Failed int64
				}
			}
		}
		if decode(t, get("/api/stats"), &stats); stats.Outbox.Pending != 1 || stats.Outbox.Failed != 0 || len(stats.Endpoints) != 2 ||
			stats.Endpoints[0].Deliveries.Failed != 1 || stats.Endpoints[0].Deliveries.Pending != 2 {
			t.Fatalf("stats: %+v", stats)
		}

		// Delete.
		a.call(t, apiCall{method: http.MethodDelete, path: "/api/endpoints/" + partner.ID.String()}, http.StatusNoContent)
		a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/endpoints/" + partner.ID.String()}, http.StatusNotFound, "not-found")

		// A console of one store has no sources (TestMultiAPI exercises
		// GET /api/sources).
		a.wantProblem(t, apiCall{method: http.MethodGet, path: "/api/sources"}, http.StatusNotFound, "not-found")
		for _, op := range apiOperations(t) {
			if !a.covered[op] && !strings.Contains(op, "/api/replays") && op != "GET /api/sources" { // TestAPIReplays exercises those
				t.Errorf("openapi.json's %s was not exercised", op)
			}
		}
		for _, what := range []string{"endpoint added", "endpoint changed", "endpoint disabled", "endpoint secret rotated", "endpoint test delivered", "endpoint removed", "retry of dead letters"} {
			if !strings.Contains(a.log.String(), "console: API: "+what) {
				t.Errorf("the console's log does not say %q", what)
			}
		}
		a.wantNoSecret(t, []string{testToken, givenSecret, rotatedSecret, headerSecret, headerSecret2, bearerSecret, password, clientSecret, keyPEM},
			[]string{generated, rotatedGenerated})
	})
}

var pemBlock = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)

// wantNoSecret checks that no answer and no log line holds one of
// secrets, nor a PEM private key, and that each of once is in exactly one
// answer (the one that generated it) and in no log line.
func (a *apiAPI) wantNoSecret(t *testing.T, secrets, once []string) {
	t.Helper()
	a.mu.Lock()
	answers := slices.Clone(a.answers)
	a.mu.Unlock()
	log := a.log.String()
	for _, ans := range answers {
		for _, s := range secrets {
			if strings.Contains(ans, s) {
				t.Errorf("a secret (%.8s...) is in the answer to %s", s, strings.SplitN(ans, "\n", 2)[0])
			}
		}
		if pemBlock.MatchString(ans) {
			t.Errorf("a private key is in the answer to %s", strings.SplitN(ans, "\n", 2)[0])
		}
	}
	for _, s := range once {
		n := 0
		for _, ans := range answers {
			if strings.Contains(ans, s) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("a generated secret (%.10s...) is in %d answers, want 1", s, n)
		}
	}
	for _, s := range append(slices.Clone(secrets), once...) {
		if strings.Contains(log, s) {
			t.Errorf("a secret (%.8s...) is in the console's log", s)
		}
	}
	if pemBlock.MatchString(log) || strings.Contains(log, "whsec_") {
		t.Errorf("the console's log holds a key or a signing secret:\n%s", log)
	}
}
