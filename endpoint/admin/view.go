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
	"github.com/postbox-go/postbox/sink/envelope"
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

// View is ViewOf(e) at the Admin's clock (Config.Now).
func (a *Admin) View(e store.Endpoint) View { return ViewOf(e, a.now()) }

// ViewOf is e as shown at now, without Deliveries; it needs no Admin
// (what shows endpoints without managing them calls it). Its URL is
// redacted (sink.Redact); its other settings are in their canonical form
// (Canonical): the envelope's kind ("raw" for none) apart from its
// CloudEvents source ("" for envelope.SourceDefault); its secrets are
// fingerprints (the previous one only while it still signs at now),
// never a secret.
func ViewOf(e store.Endpoint, now time.Time) View {
	v := View{ID: e.ID, Settings: Settings{Name: e.Name, URL: sink.Redact(e.URL), Types: e.Types, Filter: e.Filter, Envelope: e.Envelope,
		Signature: e.Signature, RatePerSecond: e.RatePerSecond, Concurrency: e.Concurrency, Shadow: e.Shadow, AllowPrivate: e.AllowPrivate},
		State: e.State, Auth: []string{}, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt}
	if env, err := endpoint.ParseEnvelope(e.Envelope); err == nil {
		v.Envelope, v.CESource = envelopeView(env)
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
	if previous != "" && now.Before(e.PreviousSecretUntil) {
		until := e.PreviousSecretUntil
		v.PreviousSecretFingerprint, v.PreviousSecretUntil = previous, &until
	}
	v.FailingSince, v.BreakerOpenUntil = timeOrNil(e.FailingSince), timeOrNil(e.BreakerOpenUntil)
	return v
}

// envelopeView is the envelope env as Settings name it: its kind's name
// ("raw" for none) and its CloudEvents source, "" for
// envelope.SourceDefault.
func envelopeView(env envelope.Config) (kind, source string) {
	if env.Source == envelope.SourceDefault {
		return env.Kind.String(), ""
	}
	return env.Kind.String(), env.Source
}

// Canonical is s in the form View shows the settings Create (or Update)
// stores of it, so that two ways of writing a setting compare equal and
// View(e).Settings given back is Canonical already: the envelope's kind
// by its name ("" is "raw") and its CloudEvents source ("" for
// envelope.SourceDefault, which it is when not given), the signature
// profile as signature.Profile.String writes it ("" for the relay's),
// Concurrency 0 as ConcurrencyDefault, Types never nil. The URL is left as
// given (Create moves its user information into the credentials; View
// redacts it). An envelope, source or profile that does not parse is
// Create's refusal (a *FieldError naming the setting by its canonical
// name).
func Canonical(s Settings) (Settings, error) {
	var a Admin
	sig, err := a.signatureSetting(s.Signature)
	if err != nil {
		return s, err
	}
	stored, err := a.envelopeSetting("", given(s.Envelope), given(s.CESource))
	if err != nil {
		return s, err
	}
	env, err := endpoint.ParseEnvelope(stored)
	if err != nil {
		return s, a.refuse(SettingEnvelope, "%s: %v", a.name(SettingEnvelope), err)
	}
	s.Signature = sig
	s.Envelope, s.CESource = envelopeView(env)
	if s.Concurrency == 0 {
		s.Concurrency = ConcurrencyDefault
	}
	if s.Types == nil {
		s.Types = []string{}
	}
	return s, nil
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

// DescribeURL describes an endpoint's rawURL as endpoint.DescribeURL does
// with the Admin's kinds (Config.Kinds): its kind and what tells its
// destination apart, never a credential, a webhook's path nor a
// parameter that may hold one.
func (a *Admin) DescribeURL(rawURL string) string {
	return endpoint.DescribeURL(a.cfg.Kinds, rawURL)
}
