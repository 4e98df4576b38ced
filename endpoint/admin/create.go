package admin

import (
	"context"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

// Create checks s and c, seals c (a webhook without a Secret gets a new
// one, returned once in Created.Secret), and writes the endpoint, enabled.
// A broker URL's user information is moved into the sealed credentials
// (URLUser, URLPassword); a webhook URL's becomes its Basic
// authentication. Check makes the same checks without writing.
func (a *Admin) Create(ctx context.Context, s Settings, c endpoint.Credentials) (Created, error) {
	return a.CreateWithState(ctx, s, c, store.EndpointEnabled)
}

// CreateWithState is Create of an endpoint in state (store.EndpointEnabled
// or store.EndpointDisabled), in the same write: an endpoint created
// disabled is never enabled, not for a moment (no delivery is fanned out
// to it before it is enabled).
func (a *Admin) CreateWithState(ctx context.Context, s Settings, c endpoint.Credentials, state string) (Created, error) {
	if state != store.EndpointEnabled && state != store.EndpointDisabled {
		return Created{}, a.refuse(SettingState, "%s %q: want %s or %s", a.name(SettingState), state, store.EndpointEnabled, store.EndpointDisabled)
	}
	p, err := a.prepareCreate(ctx, s, c)
	if err != nil {
		return Created{}, err
	}
	p.e.State = state
	e, err := a.cfg.Store.EndpointCreate(ctx, p.e)
	if err != nil {
		return Created{}, err
	}
	return Created{Endpoint: a.View(e), Secret: p.secret, Warnings: warningsOf(p.warning)}, nil
}

// Check makes every check Create makes of s and c, and writes nothing:
// it returns the refusal Create would return (a *FieldError,
// endpoint.ErrNoKeyring without a keyring), or the warnings Create would
// give. A webhook without a Secret is checked with a new one, which is
// forgotten.
func (a *Admin) Check(ctx context.Context, s Settings, c endpoint.Credentials) (warnings []string, err error) {
	p, err := a.prepareCreate(ctx, s, c)
	if err != nil {
		return nil, err
	}
	return warningsOf(p.warning), nil
}

// preparedCreate is the endpoint Create writes: sealed, with the secret
// it generated ("" when one was given or for a broker's endpoint) and
// the warning of its checks.
type preparedCreate struct {
	e       store.Endpoint
	secret  string
	warning string
}

// prepareCreate makes Create's checks of s and c and seals c: everything
// Create does but the write.
func (a *Admin) prepareCreate(ctx context.Context, s Settings, c endpoint.Credentials) (preparedCreate, error) {
	var p preparedCreate
	e := store.Endpoint{Name: s.Name, URL: s.URL, Types: s.Types, Filter: s.Filter, RatePerSecond: s.RatePerSecond,
		Concurrency: s.Concurrency, Shadow: s.Shadow, AllowPrivate: s.AllowPrivate}
	if e.Concurrency == 0 {
		e.Concurrency = ConcurrencyDefault
	}
	if e.AllowPrivate {
		if err := a.checkPrivate(); err != nil {
			return p, err
		}
	}
	if err := a.checkURL(e.URL); err != nil {
		return p, err
	}
	var err error
	if e.Signature, err = a.signatureSetting(s.Signature); err != nil {
		return p, err
	}
	if e.Envelope, err = a.envelopeSetting("", given(s.Envelope), given(s.CESource)); err != nil {
		return p, err
	}
	webhookURL := a.IsWebhook(e.URL)
	switch {
	case webhookURL && c.Secret != "":
		if err := a.CheckSecret(c.Secret, e.Signature); err != nil {
			return p, err
		}
	case !webhookURL && c.Secret != "":
		return p, a.refuse(SettingSecret, "%s: a broker's endpoint signs nothing (only webhooks, http:// and https://, have a secret)", a.name(SettingSecret))
	}
	if err := a.checkBasicAndUserInfo(e.URL, c.Basic); err != nil {
		return p, err
	}
	if c.Headers, err = a.checkHeaders(c.Headers); err != nil {
		return p, err
	}
	if err := a.moveURLCredentials(&e, &c); err != nil {
		return p, err
	}
	if err := a.checkCredentialsFor(e.URL, c, false); err != nil {
		return p, err
	}
	if p.warning, err = a.checkFields(ctx, e, true, true); err != nil {
		return p, err
	}
	k, err := a.keyring()
	if err != nil {
		return p, err
	}
	if webhookURL && c.Secret == "" {
		if c.Secret, err = signature.GenerateSecret(); err != nil {
			return p, err
		}
		p.secret = c.Secret
	}
	if err := endpoint.Seal(k, &e, c); err != nil {
		return p, err
	}
	if webhookURL {
		if err := a.checkWebhookSink(ctx, k, e); err != nil {
			return p, err
		}
	}
	p.e = e
	return p, nil
}

// warningsOf is the warning as Created's and Updated's Warnings: nil for
// none.
func warningsOf(warning string) []string {
	if warning == "" {
		return nil
	}
	return []string{warning}
}

// given is v as a setting given when not empty, nil when empty.
func given(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
