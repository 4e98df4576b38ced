package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Find returns the endpoint ref names: its id, or its name when ref is no
// id and exactly one endpoint has it (ErrNotFound, ErrAmbiguous).
func (a *Admin) Find(ctx context.Context, ref string) (store.Endpoint, error) {
	if id, err := uuid.Parse(ref); err == nil {
		e, err := a.cfg.Store.EndpointGet(ctx, id)
		return e, notFound(id, err)
	}
	all, err := a.cfg.Store.EndpointList(ctx)
	if err != nil {
		return store.Endpoint{}, err
	}
	var found []store.Endpoint
	for _, e := range all {
		if e.Name == ref {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return store.Endpoint{}, &notFoundError{what: fmt.Sprintf("named %q", printable.String(ref))}
	case 1:
		return found[0], nil
	}
	return store.Endpoint{}, &ambiguousError{n: len(found), name: ref}
}

// ambiguousError is ErrAmbiguous: the name several endpoints have.
type ambiguousError struct {
	n    int
	name string
}

func (e *ambiguousError) Error() string {
	return fmt.Sprintf("%d endpoints are named %q: give the id of one", e.n, printable.String(e.name))
}

func (e *ambiguousError) Is(target error) bool { return target == ErrAmbiguous }

// List returns every endpoint's View, oldest first (no Deliveries).
func (a *Admin) List(ctx context.Context) ([]View, error) {
	all, err := a.cfg.Store.EndpointList(ctx)
	if err != nil {
		return nil, err
	}
	views := make([]View, len(all))
	for i, e := range all {
		views[i] = a.View(e)
	}
	return views, nil
}

// Get returns one endpoint's View with its Deliveries.
func (a *Admin) Get(ctx context.Context, id uuid.UUID) (View, error) {
	e, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return View{}, notFound(id, err)
	}
	counts, err := a.cfg.Store.DeliveryCounts(ctx, id)
	if err != nil {
		return View{}, notFound(id, err)
	}
	v := a.View(e)
	v.Deliveries = &counts
	return v, nil
}

// View is e as shown, without Deliveries: its URL redacted (sink.Redact),
// its envelope's kind ("raw" for none) apart from its CloudEvents source,
// its secrets as fingerprints (the previous one only while it still
// signs), never a secret.
func (a *Admin) View(e store.Endpoint) View {
	v := View{ID: e.ID, Settings: Settings{Name: e.Name, URL: sink.Redact(e.URL), Types: e.Types, Filter: e.Filter, Envelope: e.Envelope,
		Signature: e.Signature, RatePerSecond: e.RatePerSecond, Concurrency: e.Concurrency, Shadow: e.Shadow, AllowPrivate: e.AllowPrivate},
		State: e.State, Auth: []string{}, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if env, err := endpoint.ParseEnvelope(e.Envelope); err == nil {
		v.Envelope, v.CESource = env.Kind.String(), env.Source
	}
	if v.Types == nil {
		v.Types = []string{}
	}
	var current, previous string
	if e.Sealed.Data != nil {
		v.Sealed, v.SecretsKey = true, e.Sealed.Key
		if e.Sealed.Auth != "" {
			v.Auth = strings.Split(e.Sealed.Auth, "+")
		}
		fps := strings.Fields(e.Sealed.Fingerprint)
		if len(fps) > 0 {
			current = fps[0]
		}
		if len(fps) > 1 {
			previous = fps[1]
		}
	} else {
		if e.Secret != "" { // a broker's endpoint has none
			current = endpoint.Fingerprint(e.Secret)
		}
		if e.PreviousSecret != "" {
			previous = endpoint.Fingerprint(e.PreviousSecret)
		}
	}
	v.SecretFingerprint = current
	if previous != "" && a.now().Before(e.PreviousSecretUntil) {
		until := e.PreviousSecretUntil
		v.PreviousSecretFingerprint, v.PreviousSecretUntil = previous, &until
	}
	v.FailingSince, v.BreakerOpenUntil = timeOrNil(e.FailingSince), timeOrNil(e.BreakerOpenUntil)
	return v
}

// timeOrNil is &t, nil for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Open opens e's sealed credentials (needs the keyring; an endpoint in
// clear opens without).
func (a *Admin) Open(e store.Endpoint) (endpoint.Credentials, error) {
	return endpoint.Open(a.cfg.Keyring, e)
}

// Attempts returns up to limit of endpoint id's latest delivery attempts,
// the most recent first (never nil); ErrNotFound for an endpoint the
// store does not hold.
func (a *Admin) Attempts(ctx context.Context, id uuid.UUID, limit int) ([]store.Attempt, error) {
	if limit < 1 {
		return nil, a.refuse(SettingLimit, "%s %d: at least 1", a.name(SettingLimit), limit)
	}
	if _, err := a.cfg.Store.EndpointGet(ctx, id); err != nil {
		return nil, notFound(id, err)
	}
	attempts, err := a.cfg.Store.AttemptList(ctx, id, limit)
	if attempts == nil && err == nil {
		attempts = []store.Attempt{}
	}
	return attempts, err
}
