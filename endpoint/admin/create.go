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
// authentication.
func (a *Admin) Create(ctx context.Context, s Settings, c endpoint.Credentials) (Created, error) {
	e := store.Endpoint{Name: s.Name, URL: s.URL, Types: s.Types, Filter: s.Filter, RatePerSecond: s.RatePerSecond,
		Concurrency: s.Concurrency, Shadow: s.Shadow, AllowPrivate: s.AllowPrivate}
	if e.Concurrency == 0 {
		e.Concurrency = ConcurrencyDefault
	}
	if err := a.checkURL(e.URL); err != nil {
		return Created{}, err
	}
	var err error
	if e.Signature, err = a.signatureSetting(s.Signature); err != nil {
		return Created{}, err
	}
	if e.Envelope, err = a.envelopeSetting("", given(s.Envelope), given(s.CESource)); err != nil {
		return Created{}, err
	}
	webhookURL := a.IsWebhook(e.URL)
	switch {
	case webhookURL && c.Secret != "":
		if err := a.checkSecret(c.Secret, e.Signature); err != nil {
			return Created{}, err
		}
	case !webhookURL && c.Secret != "":
		return Created{}, a.refuse(SettingSecret, "%s: a broker's endpoint signs nothing (only webhooks, http:// and https://, have a secret)", a.name(SettingSecret))
	}
	if err := a.checkBasicAndUserInfo(e.URL, c.Basic); err != nil {
		return Created{}, err
	}
	if c.Headers, err = a.checkHeaders(c.Headers); err != nil {
		return Created{}, err
	}
	if err := a.moveURLCredentials(&e, &c); err != nil {
		return Created{}, err
	}
	if err := a.checkCredentialsFor(e.URL, c, false); err != nil {
		return Created{}, err
	}
	warning, err := a.checkFields(ctx, e, true, true)
	if err != nil {
		return Created{}, err
	}
	k, err := a.keyring()
	if err != nil {
		return Created{}, err
	}
	var created Created
	if webhookURL && c.Secret == "" {
		if c.Secret, err = signature.GenerateSecret(); err != nil {
			return Created{}, err
		}
		created.Secret = c.Secret
	}
	if err := endpoint.Seal(k, &e, c); err != nil {
		return Created{}, err
	}
	if webhookURL {
		if err := a.checkWebhookSink(ctx, k, e); err != nil {
			return Created{}, err
		}
	}
	if e, err = a.cfg.Store.EndpointCreate(ctx, e); err != nil {
		return Created{}, err
	}
	created.Endpoint = a.View(e)
	if warning != "" {
		created.Warnings = []string{warning}
	}
	return created, nil
}

// given is v as a setting given when not empty, nil when empty.
func given(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
