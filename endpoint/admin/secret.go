package admin

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/signature"
)

// RotateSecret makes secret (a new whsec_ when "") endpoint id's signing
// secret; the current one keeps signing for grace. A secret given is
// checked against the endpoint's signature profile. A broker's endpoint
// may be given one too: it needs it before its URL becomes a webhook's.
func (a *Admin) RotateSecret(ctx context.Context, id uuid.UUID, secret string, grace time.Duration) (Rotated, error) {
	if grace < 0 {
		return Rotated{}, a.refuse(SettingGrace, "%s %v: must not be negative", a.name(SettingGrace), grace)
	}
	k, err := a.keyring()
	if err != nil {
		return Rotated{}, err
	}
	e, err := a.cfg.Store.EndpointGet(ctx, id)
	if err != nil {
		return Rotated{}, notFound(id, err)
	}
	var r Rotated
	if secret == "" {
		if secret, err = signature.GenerateSecret(); err != nil {
			return Rotated{}, err
		}
		r.Secret = secret
	} else if err := a.CheckSecret(secret, e.Signature); err != nil {
		return Rotated{}, err
	}
	r.PreviousUntil = a.now().Add(grace)
	if err := endpoint.Rotate(ctx, a.cfg.Store, k, id, secret, r.PreviousUntil); err != nil {
		return Rotated{}, notFound(id, err)
	}
	r.Fingerprint, r.Key = endpoint.Fingerprint(secret), k.PrimaryID()
	return r, nil
}
