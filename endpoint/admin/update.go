package admin

import (
	"context"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/store"
)

// Update checks and makes ch to endpoint id: settings in one write, and
// credentials sealed again (endpoint.Reseal, a compare-and-swap; with a
// changed URL, in the same write). The SSRF check runs again when the URL
// or the private allowance is given (an endpoint registered before the
// check existed keeps working while its other settings change); the
// webhook's sink is built, connecting nowhere, when what it is built from
// changes. The keyring is needed only when the credentials are opened:
// when they change, when the URL changes, or when a webhook's sink is
// checked. CheckChange makes the same checks without writing.
func (a *Admin) Update(ctx context.Context, id uuid.UUID, ch Change) (Updated, error) {
	p, err := a.prepareUpdate(ctx, id, ch)
	if err != nil {
		return Updated{}, err
	}
	if p.reseal {
		if err := endpoint.Reseal(ctx, a.cfg.Store, p.k, id, p.url, p.change); err != nil {
			return Updated{}, notFound(id, err)
		}
	}
	changed := changedSettings(p.before, p.e)
	if len(changed) > 0 {
		if _, err := a.cfg.Store.EndpointUpdate(ctx, p.e); err != nil {
			return Updated{}, notFound(id, err)
		}
	}
	if p.reseal {
		changed = append(changed, ch.Credentials.names()...)
	}
	after, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return Updated{}, notFound(id, err)
	}
	return Updated{Endpoint: a.View(after), Changed: changed, Warnings: warningsOf(p.warning)}, nil
}

// CheckChange makes every check Update makes of ch to endpoint id, and
// writes nothing: it returns the refusal Update would return (a
// *FieldError, ErrNotFound, endpoint.ErrNoKeyring when the credentials
// must be opened without a keyring), or the warnings Update would give.
func (a *Admin) CheckChange(ctx context.Context, id uuid.UUID, ch Change) (warnings []string, err error) {
	p, err := a.prepareUpdate(ctx, id, ch)
	if err != nil {
		return nil, err
	}
	return warningsOf(p.warning), nil
}

// preparedUpdate is what Update writes: the endpoint as read (before) and
// with its new settings (e); whether its credentials are sealed again
// (reseal) with k by change, with url ("" when the URL is not given); the
// warning of its checks.
type preparedUpdate struct {
	before, e store.Endpoint
	reseal    bool
	k         *keyring.Keyring
	url       string
	change    func(*endpoint.Credentials, *time.Time) error
	warning   string
}

// prepareUpdate reads endpoint id and makes Update's checks of ch:
// everything Update does but the writes.
func (a *Admin) prepareUpdate(ctx context.Context, id uuid.UUID, ch Change) (preparedUpdate, error) {
	var p preparedUpdate
	e, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return p, notFound(id, err)
	}
	p.before = e
	if ch.AllowPrivate != nil && *ch.AllowPrivate && !e.AllowPrivate {
		if err := a.checkPrivate(); err != nil {
			return p, err
		}
	}
	if err := a.applySettings(&e, ch); err != nil {
		return p, err
	}
	cc := ch.Credentials
	if cc.SetHeaders {
		if cc.Headers, err = a.checkHeaders(cc.Headers); err != nil {
			return p, err
		}
	}
	rawURL := e.URL
	if ch.URL != nil {
		if err := a.checkBasicAndUserInfo(rawURL, setBasic(cc)); err != nil {
			return p, err
		}
		var scratch endpoint.Credentials
		if err := a.moveURLCredentials(&e, &scratch); err != nil {
			return p, err
		}
	}
	if p.warning, err = a.checkFields(ctx, e, ch.URL != nil || ch.AllowPrivate != nil, ch.Signature != nil); err != nil {
		return p, err
	}
	webhookURL := a.IsWebhook(e.URL)
	p.change = func(c *endpoint.Credentials, _ *time.Time) error {
		cc.apply(c)
		if ch.URL != nil {
			if err := a.moveURLCredentials(&store.Endpoint{URL: rawURL}, c); err != nil {
				return err
			}
			if webhookURL { // a broker's user and password: no webhook's
				c.URLUser, c.URLPassword = "", ""
			}
		}
		return a.checkCredentialsFor(e.URL, *c, true)
	}
	p.e = e
	sinkChanged := ch.URL != nil || ch.Signature != nil || ch.Envelope != nil || ch.CESource != nil
	if !cc.any() && ch.URL == nil && !(webhookURL && sinkChanged) {
		return p, nil
	}
	if p.k, err = a.keyring(); err != nil {
		return p, err
	}
	current, err := endpoint.Open(p.k, e)
	if err != nil {
		return p, err
	}
	next := current
	if err := p.change(&next, nil); err != nil {
		return p, err
	}
	if webhookURL && next.Secret == "" {
		return p, a.refuse(SettingURL, "%s: a webhook signs its requests, and this endpoint has no secret (it was added for a broker): give it one first with %s %s",
			a.name(SettingURL), a.name(SettingRotateSecret), e.ID)
	}
	p.reseal = !reflect.DeepEqual(current, next)
	if webhookURL && (p.reseal || sinkChanged) {
		probe := e
		if err := endpoint.Seal(p.k, &probe, next); err != nil {
			return p, err
		}
		if err := a.checkWebhookSink(ctx, p.k, probe); err != nil {
			return p, err
		}
	}
	if ch.URL != nil { // a URL given changes with its credentials, in one write
		p.url = e.URL
	}
	return p, nil
}

// applySettings sets the settings of e that ch gives.
func (a *Admin) applySettings(e *store.Endpoint, ch Change) error {
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&e.Name, ch.Name)
	set(&e.URL, ch.URL)
	set(&e.Filter, ch.Filter)
	if ch.Types != nil {
		e.Types = *ch.Types
	}
	if ch.RatePerSecond != nil {
		e.RatePerSecond = *ch.RatePerSecond
	}
	if ch.Concurrency != nil {
		e.Concurrency = *ch.Concurrency
	}
	if ch.Shadow != nil {
		e.Shadow = *ch.Shadow
	}
	if ch.AllowPrivate != nil {
		e.AllowPrivate = *ch.AllowPrivate
	}
	var err error
	if ch.Signature != nil {
		if e.Signature, err = a.signatureSetting(*ch.Signature); err != nil {
			return err
		}
	}
	if ch.Envelope != nil || ch.CESource != nil {
		if e.Envelope, err = a.envelopeSetting(e.Envelope, ch.Envelope, ch.CESource); err != nil {
			return err
		}
	}
	return nil
}

// changedSettings are the canonical names of the settings that differ
// between a and b.
func changedSettings(a, b store.Endpoint) []string {
	var changed []string
	for _, s := range []struct {
		name string
		same bool
	}{
		{SettingName, a.Name == b.Name},
		{SettingURL, a.URL == b.URL},
		{SettingTypes, slices.Equal(a.Types, b.Types)},
		{SettingFilter, a.Filter == b.Filter},
		{SettingEnvelope, a.Envelope == b.Envelope},
		{SettingSignature, a.Signature == b.Signature},
		{SettingRate, a.RatePerSecond == b.RatePerSecond},
		{SettingConcurrency, a.Concurrency == b.Concurrency},
		{SettingShadow, a.Shadow == b.Shadow},
		{SettingAllowPrivate, a.AllowPrivate == b.AllowPrivate},
	} {
		if !s.same {
			changed = append(changed, s.name)
		}
	}
	return changed
}

// setBasic is the Basic authentication cc sets, nil when it sets none.
func setBasic(cc CredentialChange) *endpoint.BasicAuth {
	if !cc.SetAuth {
		return nil
	}
	return cc.Basic
}

// any reports whether cc changes anything.
func (cc CredentialChange) any() bool { return cc.SetHeaders || cc.SetAuth || cc.SetTLS }

// apply makes the change to c. Removing the authentication (SetAuth with
// none) removes a broker URL's user and password too.
func (cc CredentialChange) apply(c *endpoint.Credentials) {
	if cc.SetHeaders {
		c.Headers = cc.Headers
	}
	if cc.SetAuth {
		c.Basic, c.Bearer, c.OAuth2 = cc.Basic, cc.Bearer, cc.OAuth2
		if cc.Basic == nil && cc.Bearer == "" && cc.OAuth2 == nil {
			c.URLUser, c.URLPassword = "", ""
		}
	}
	if cc.SetTLS {
		c.TLS = cc.TLS
	}
}

// names are the canonical names of the credentials cc replaces.
func (cc CredentialChange) names() []string {
	var names []string
	if cc.SetHeaders {
		names = append(names, SettingHeaders)
	}
	if cc.SetAuth {
		names = append(names, SettingAuth)
	}
	if cc.SetTLS {
		names = append(names, SettingTLS)
	}
	return names
}

// SetState enables or disables endpoint id (store.EndpointEnabled,
// store.EndpointDisabled). Enabling clears its failing run and makes its
// waiting deliveries due at once.
func (a *Admin) SetState(ctx context.Context, id uuid.UUID, state string) error {
	if state != store.EndpointEnabled && state != store.EndpointDisabled {
		return a.refuse(SettingState, "%s %q: want %s or %s", a.name(SettingState), state, store.EndpointEnabled, store.EndpointDisabled)
	}
	return notFound(id, a.cfg.Store.EndpointSetState(ctx, id, state))
}

// Delete removes endpoint id with its deliveries and attempts.
func (a *Admin) Delete(ctx context.Context, id uuid.UUID) error {
	return notFound(id, a.cfg.Store.EndpointDelete(ctx, id))
}
