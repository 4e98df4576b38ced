package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/store"
)

// updateTries bounds Update's read-change-check-write rounds lost to
// concurrent changes of the same endpoint.
const updateTries = 5

// Update checks and makes ch to endpoint id: its credentials sealed again
// (with a changed URL, in the same write: a URL is never seen beside
// another URL's credentials), then its settings in one write. Each write
// is a compare-and-swap on what Update read (the row's UpdatedAt): when
// another change of the endpoint came between, Update reads it again and
// makes ch over it, a few times, then returns an error that wraps
// store.ErrEndpointChanged; no concurrent change is lost. The SSRF check
// runs again when the URL or the private allowance is given (an endpoint
// registered before the check existed keeps working while its other
// settings change); the webhook's sink is built, connecting nowhere,
// when what it is built from changes. The keyring is needed only when
// the credentials are opened: when they change, when the URL or the
// signing secret changes, or when a webhook's sink is checked.
// CheckChange makes the same checks without writing.
func (a *Admin) Update(ctx context.Context, id uuid.UUID, ch Change) (Updated, error) {
	var generated string
	if ch.Secret != nil && *ch.Secret == "" {
		// Generated once: a round lost to a concurrent change makes the
		// same rotation again, which the round that won does not repeat.
		var err error
		if generated, err = signature.GenerateSecret(); err != nil {
			return Updated{}, err
		}
		ch.Secret = &generated
	}
	for try := 1; ; try++ {
		u, err := a.update(ctx, id, ch)
		switch {
		case err == nil:
			u.Secret = generated
			return u, nil
		case !errors.Is(err, store.ErrEndpointChanged):
			return Updated{}, err
		case try == updateTries:
			return Updated{}, fmt.Errorf("admin: endpoint %s changed %d times while being updated (try again): %w", id, updateTries, err)
		}
	}
}

// update is one round of Update: it returns store.ErrEndpointChanged when
// the endpoint changed since it was read.
func (a *Admin) update(ctx context.Context, id uuid.UUID, ch Change) (Updated, error) {
	p, err := a.prepareUpdate(ctx, id, ch)
	if err != nil {
		return Updated{}, err
	}
	changed := changedSettings(p.before, p.e)
	if p.reseal {
		if err := a.reseal(ctx, id, p); err != nil {
			return Updated{}, notFound(id, err)
		}
		if len(changed) > 0 {
			// The settings are written over the row the reseal left,
			// only if nothing else changed it since it was read.
			fresh, err := a.cfg.Store.EndpointGet(ctx, id)
			if err != nil {
				return Updated{}, notFound(id, err)
			}
			want := p.before
			want.URL = p.e.URL
			if len(changedSettings(want, fresh)) > 0 {
				return Updated{}, store.ErrEndpointChanged
			}
			p.e.UpdatedAt = fresh.UpdatedAt
		}
	}
	if len(changed) > 0 {
		if _, err := a.cfg.Store.EndpointUpdate(ctx, p.e); err != nil {
			return Updated{}, notFound(id, err)
		}
	}
	if p.reseal {
		changed = append(changed, ch.Credentials.names()...)
		if ch.Secret != nil {
			changed = append(changed, SettingSecret)
		}
	}
	after, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return Updated{}, notFound(id, err)
	}
	return Updated{Endpoint: a.View(after), Changed: changed, Warnings: warningsOf(p.warning)}, nil
}

// reseal seals the endpoint's credentials changed by p.change, with p.url,
// in one compare-and-swap (store.Endpoints.EndpointSeal) on the row p
// read: store.ErrEndpointChanged when it changed since (its settings or
// its secrets).
func (a *Admin) reseal(ctx context.Context, id uuid.UUID, p preparedUpdate) error {
	e, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return err
	}
	if !e.UpdatedAt.Equal(p.before.UpdatedAt) || !bytes.Equal(e.Sealed.Data, p.before.Sealed.Data) {
		return store.ErrEndpointChanged
	}
	c, err := endpoint.Open(p.k, e)
	if err != nil {
		return err
	}
	until := e.PreviousSecretUntil
	if err := p.change(&c, &until); err != nil {
		return err
	}
	was := e.Sealed.Data
	if err := endpoint.Seal(p.k, &e, c); err != nil {
		return err
	}
	return a.cfg.Store.EndpointSeal(ctx, id, e.Sealed, until, p.url, was)
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
	if ch.Secret != nil && ch.SecretGrace < 0 {
		return p, a.refuse(SettingGrace, "%s %v: must not be negative", a.name(SettingGrace), ch.SecretGrace)
	}
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
	var secret string
	if ch.Secret != nil {
		if secret = *ch.Secret; secret == "" { // CheckChange: checked with a new one, forgotten
			if secret, err = signature.GenerateSecret(); err != nil {
				return p, err
			}
		}
		// Checked against the profile the endpoint has after the change.
		if err := a.CheckSecret(secret, e.Signature); err != nil {
			return p, err
		}
	}
	p.change = func(c *endpoint.Credentials, until *time.Time) error {
		cc.apply(c)
		if ch.Secret != nil && c.Secret != secret { // not again in a round after one that made it
			c.Secret, c.PreviousSecret = secret, c.Secret
			if until != nil {
				*until = a.now().Add(ch.SecretGrace)
			}
		}
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
	if !cc.any() && ch.URL == nil && ch.Secret == nil && !(webhookURL && sinkChanged) {
		return p, nil
	}
	if p.k, err = a.keyring(); err != nil {
		return p, err
	}
	current, err := endpoint.Open(p.k, e)
	if err != nil {
		return p, err
	}
	if ch.Secret != nil && ch.SecretGrace > 0 && current.Secret != "" && current.Secret != secret {
		if err := a.CheckSecret(current.Secret, e.Signature); err != nil {
			return p, a.refuse(SettingGrace, "%s %v: the current secret cannot sign with the endpoint's signature profile as changed: give %s 0",
				a.name(SettingGrace), ch.SecretGrace, a.name(SettingGrace))
		}
	}
	next := current
	if err := p.change(&next, nil); err != nil {
		return p, err
	}
	if webhookURL && next.Secret == "" {
		return p, a.refuse(SettingURL, "%s: a webhook signs its requests, and this endpoint has no secret (it was added for a broker): give it one first with %s %s",
			a.name(SettingURL), a.name(SettingRotateSecret), e.ID)
	}
	// A URL changes with the credentials' compare-and-swap even when they
	// stay as they are: a concurrent change of them is never lost.
	p.reseal = !reflect.DeepEqual(current, next) || e.URL != p.before.URL
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
