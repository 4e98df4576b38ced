package endpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/store"
)

// Credentials are an endpoint's secrets: what its store row keeps sealed
// (store.Endpoint.Sealed) under the operator's key, and what its lane opens
// to deliver. Seal seals them, Open opens them; the store never sees them
// in clear.
type Credentials struct {
	// Secret signs a webhook endpoint's deliveries; PreviousSecret signs
	// them as well until the endpoint's PreviousSecretUntil (a rotation's
	// grace period). A broker endpoint has none.
	Secret         string `json:"secret,omitempty"`
	PreviousSecret string `json:"previous_secret,omitempty"`
	// Headers are static headers set on every request to a webhook
	// endpoint, and on every message to a broker endpoint. Their values
	// are kept as secrets (an API key, a tenant token).
	Headers map[string]string `json:"headers,omitempty"`
	// At most one of Basic, Bearer and OAuth2 authenticates a webhook
	// endpoint's requests (the Authorization header).
	Basic  *BasicAuth `json:"basic,omitempty"`
	Bearer string     `json:"bearer,omitempty"`
	OAuth2 *OAuth2    `json:"oauth2,omitempty"`
	// TLS holds a webhook endpoint's client certificate (mTLS) and the CA
	// its server's certificate is checked against.
	TLS *ClientTLS `json:"tls,omitempty"`
	// URLUser and URLPassword are a broker endpoint's credentials, taken
	// out of its URL when it was registered (MoveURLCredentials): the
	// stored URL has no user information.
	URLUser     string `json:"url_user,omitempty"`
	URLPassword string `json:"url_password,omitempty"`
}

// BasicAuth is HTTP Basic authentication.
type BasicAuth struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// OAuth2 is the OAuth 2.0 client credentials grant: the relay fetches a
// token from TokenURL, caches it until it expires, and sends it as a
// bearer token.
type OAuth2 struct {
	TokenURL     string              `json:"token_url"`
	ClientID     string              `json:"client_id"`
	ClientSecret string              `json:"client_secret"`
	Scopes       []string            `json:"scopes,omitempty"`
	Params       map[string][]string `json:"params,omitempty"`
}

// ClientTLS is a client certificate and key (PEM), and a CA bundle (PEM)
// that the endpoint's server certificate must chain to; each may be empty.
type ClientTLS struct {
	CertPEM string `json:"cert_pem,omitempty"`
	KeyPEM  string `json:"key_pem,omitempty"`
	CAPEM   string `json:"ca_pem,omitempty"`
}

// ErrNoKeyring is returned when sealed secrets are to be opened or
// written without a keyring.
var ErrNoKeyring = errors.New("endpoint: the endpoints' secrets are sealed: a secrets key is needed (POSTBOX_SECRETS_KEY or --secrets-key-file)")

// credentialsAAD binds an endpoint's sealed secrets to its id, so that a
// blob copied to another row does not open there.
func credentialsAAD(id uuid.UUID) []byte {
	return append([]byte("postbox endpoint credentials "), id[:]...)
}

// authKinds names what c authenticates with, for display
// (store.SealedSecrets.Auth): "basic", "bearer", "oauth2", "mtls",
// "headers", joined by "+"; "" for none.
func (c Credentials) authKinds() string {
	var kinds []string
	switch {
	case c.Basic != nil:
		kinds = append(kinds, "basic")
	case c.Bearer != "":
		kinds = append(kinds, "bearer")
	case c.OAuth2 != nil:
		kinds = append(kinds, "oauth2")
	}
	if c.TLS != nil && c.TLS.CertPEM != "" {
		kinds = append(kinds, "mtls")
	}
	if len(c.Headers) > 0 {
		kinds = append(kinds, "headers")
	}
	return strings.Join(kinds, "+")
}

// fingerprints names c's signing secrets without revealing them
// (store.SealedSecrets.Fingerprint): the current one's, and the previous
// one's after a space.
func (c Credentials) fingerprints() string {
	var fps []string
	for _, s := range []string{c.Secret, c.PreviousSecret} {
		if s != "" {
			fps = append(fps, Fingerprint(s))
		}
	}
	return strings.Join(fps, " ")
}

// Check refuses credentials that could never be used: more than one
// Authorization scheme. Its errors never hold a secret.
func (c Credentials) Check() error {
	n := 0
	if c.Basic != nil {
		n++
	}
	if c.Bearer != "" {
		n++
	}
	if c.OAuth2 != nil {
		n++
	}
	if n > 1 {
		return errors.New("endpoint: give at most one of basic, bearer and oauth2 authentication")
	}
	return CheckHeaders(c.Headers)
}

// reservedHeaderPrefixes are the prefixes, in lower case, of the header
// names a static header may not have: CloudEvents attributes in each
// protocol binding (an envelope's, which a static header would replace
// or forge) and postbox's own.
var reservedHeaderPrefixes = [...]string{"ce-", "ce_", "cloudevents:", "cloudevents_", "postbox-"}

// CheckHeaders refuses static headers that would replace what the sinks
// and envelopes set themselves: postbox's own (Postbox-*), the content
// type, and CloudEvents attributes under any binding's prefix (ce-, ce_,
// cloudEvents:, cloudEvents_). A webhook refuses more of its own
// (webhook.Config.Headers: credentials, framing, the signature's). The
// error names the header, never its value.
func CheckHeaders(headers map[string]string) error {
	for name := range headers {
		lower := strings.ToLower(name)
		if lower == "content-type" {
			return fmt.Errorf("endpoint: static header %s: the content type is the envelope's (or JSON)", name)
		}
		for _, p := range reservedHeaderPrefixes {
			if strings.HasPrefix(lower, p) {
				return fmt.Errorf("endpoint: static header %s: names starting with %q are postbox's own or an envelope's attributes", name, p)
			}
		}
	}
	return nil
}

// Seal seals c for e with the keyring's primary key: it sets e.Sealed
// (and e.ID, when zero, as the sealed secrets are bound to it), and clears
// e's clear secrets. Write e with EndpointCreate, or its Sealed with
// EndpointSeal.
func Seal(k *keyring.Keyring, e *store.Endpoint, c Credentials) error {
	if k == nil {
		return ErrNoKeyring
	}
	if err := c.Check(); err != nil {
		return err
	}
	if e.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		e.ID = id
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("endpoint: encoding the credentials: %w", err)
	}
	data, err := k.Seal(plain, credentialsAAD(e.ID))
	clear(plain)
	if err != nil {
		return fmt.Errorf("endpoint: sealing the credentials: %w", err)
	}
	e.Sealed = store.SealedSecrets{Data: data, Key: k.PrimaryID(), Fingerprint: c.fingerprints(), Auth: c.authKinds()}
	e.Secret, e.PreviousSecret = "", ""
	return nil
}

// Open returns e's credentials: its sealed ones opened with k, or, for a
// row written before secrets were sealed (no Sealed data), its clear
// secrets (k may then be nil). An error names the endpoint and, when the
// key that sealed them is not in k, its id; never a secret.
func Open(k *keyring.Keyring, e store.Endpoint) (Credentials, error) {
	if e.Sealed.Data == nil {
		return Credentials{Secret: e.Secret, PreviousSecret: e.PreviousSecret}, nil
	}
	if k == nil {
		return Credentials{}, fmt.Errorf("endpoint %s: %w", e.ID, ErrNoKeyring)
	}
	plain, err := k.Open(e.Sealed.Data, credentialsAAD(e.ID))
	if err != nil {
		return Credentials{}, fmt.Errorf("endpoint %s: opening its secrets: %w", e.ID, err)
	}
	defer clear(plain)
	var c Credentials
	if err := json.Unmarshal(plain, &c); err != nil {
		return Credentials{}, fmt.Errorf("endpoint %s: its opened secrets are not credentials (%T)", e.ID, err)
	}
	return c, nil
}

// Signing returns the secrets that sign a delivery made at now: the
// current one, and the previous one until e's PreviousSecretUntil.
func (c Credentials) Signing(e store.Endpoint, now time.Time) []string {
	if c.PreviousSecret != "" && now.Before(e.PreviousSecretUntil) {
		return []string{c.Secret, c.PreviousSecret}
	}
	if c.Secret == "" {
		return nil
	}
	return []string{c.Secret}
}

// resealTries bounds Reseal's read-change-write rounds lost to a
// concurrent change of the same endpoint's secrets.
const resealTries = 5

// Reseal changes an endpoint's credentials: it reads the endpoint, opens
// its credentials, lets change modify them and the end of the previous
// secret's grace period, seals them with k's primary key and writes them
// only if nobody changed them meanwhile (store.Endpoints.EndpointSeal),
// reading again if someone did. A row not sealed yet is sealed. A url that
// is not empty becomes the endpoint's URL in the same write: the URL for
// which the credentials are (a partner's credentials must never be seen
// beside another partner's URL, even for a moment).
func Reseal(ctx context.Context, s store.Endpoints, k *keyring.Keyring, id uuid.UUID, url string, change func(c *Credentials, previousUntil *time.Time) error) error {
	for try := 1; ; try++ {
		e, err := s.EndpointGet(ctx, id)
		if err != nil {
			return err
		}
		c, err := Open(k, e)
		if err != nil {
			return err
		}
		until := e.PreviousSecretUntil
		if err := change(&c, &until); err != nil {
			return err
		}
		was := e.Sealed.Data
		if err := Seal(k, &e, c); err != nil {
			return err
		}
		err = s.EndpointSeal(ctx, id, e.Sealed, until, url, was)
		if errors.Is(err, store.ErrEndpointChanged) && try < resealTries {
			continue
		}
		return err
	}
}

// Rotate makes secret the endpoint's signing secret; the current one keeps
// signing until graceUntil.
func Rotate(ctx context.Context, s store.Endpoints, k *keyring.Keyring, id uuid.UUID, secret string, graceUntil time.Time) error {
	return Reseal(ctx, s, k, id, "", func(c *Credentials, until *time.Time) error {
		c.Secret, c.PreviousSecret, *until = secret, c.Secret, graceUntil
		return nil
	})
}

// RekeyReport is what Rekey did, or in a dry run would do.
type RekeyReport struct {
	// Sealed endpoints had their secrets in clear (written before
	// migration 0014) and are now sealed.
	Sealed int
	// Rewrapped endpoints were sealed by another key than the primary and
	// are now sealed by the primary (their data key re-wrapped).
	Rewrapped int
	// Current endpoints were already sealed by the primary key.
	Current int
	// Failed lists the endpoints left as they were, and why.
	Failed []RekeyFailure
}

// RekeyFailure is an endpoint Rekey could not seal or re-wrap.
type RekeyFailure struct {
	ID   uuid.UUID
	Name string
	Err  error
}

// Rekey brings every endpoint's secrets under k's primary key: it seals
// those still in clear and re-wraps those sealed by a previous key of k
// (only their data key is encrypted again). An endpoint sealed by a key k
// does not hold, or whose secrets do not open, is reported in Failed and
// left as it is; the others go on. With dryRun nothing is written. It is
// safe to run again, and beside running relays (each write is a
// compare-and-swap).
func Rekey(ctx context.Context, s store.Endpoints, k *keyring.Keyring, dryRun bool) (RekeyReport, error) {
	var r RekeyReport
	if k == nil {
		return r, ErrNoKeyring
	}
	all, err := s.EndpointList(ctx)
	if err != nil {
		return r, err
	}
	for _, e := range all {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		switch key, err := keyOf(e); {
		case err != nil:
			r.Failed = append(r.Failed, RekeyFailure{ID: e.ID, Name: e.Name, Err: err})
		case key == k.PrimaryID():
			if _, err := k.Open(e.Sealed.Data, credentialsAAD(e.ID)); err != nil {
				r.Failed = append(r.Failed, RekeyFailure{ID: e.ID, Name: e.Name, Err: err})
				continue
			}
			r.Current++
		case key == "":
			if !dryRun {
				err = sealClear(ctx, s, k, e)
			}
			if err != nil {
				r.Failed = append(r.Failed, RekeyFailure{ID: e.ID, Name: e.Name, Err: err})
				continue
			}
			r.Sealed++
		default:
			_, _, err := k.Rewrap(e.Sealed.Data, credentialsAAD(e.ID))
			if err == nil && !dryRun {
				err = rewrap(ctx, s, k, e)
			}
			if err != nil {
				r.Failed = append(r.Failed, RekeyFailure{ID: e.ID, Name: e.Name, Err: err})
				continue
			}
			r.Rewrapped++
		}
	}
	return r, nil
}

// sealClear seals the clear secrets of e, an endpoint written before
// secrets were sealed, with the user information of its URL (which the
// postbox of that time took as a webhook's Basic credentials or a broker's
// login): the URL is written without it, in the same statement.
func sealClear(ctx context.Context, s store.Endpoints, k *keyring.Keyring, e store.Endpoint) error {
	stripped := e
	var moved Credentials
	if err := MoveURLCredentials(&stripped, &moved); err != nil {
		return err
	}
	url := ""
	if stripped.URL != e.URL {
		url = stripped.URL
	}
	return Reseal(ctx, s, k, e.ID, url, func(c *Credentials, _ *time.Time) error {
		if url == "" {
			return nil
		}
		return MoveURLCredentials(&store.Endpoint{URL: e.URL}, c)
	})
}

// rewrap re-wraps e's sealed data under k's primary key, reading e again
// when a concurrent change of its credentials wins the compare-and-swap.
func rewrap(ctx context.Context, s store.Endpoints, k *keyring.Keyring, e store.Endpoint) error {
	for try := 1; ; try++ {
		data, changed, err := k.Rewrap(e.Sealed.Data, credentialsAAD(e.ID))
		if err != nil || !changed {
			return err
		}
		sealed := e.Sealed
		sealed.Data, sealed.Key = data, k.PrimaryID()
		err = s.EndpointSeal(ctx, e.ID, sealed, e.PreviousSecretUntil, "", e.Sealed.Data)
		if !errors.Is(err, store.ErrEndpointChanged) || try >= resealTries {
			return err
		}
		if e, err = s.EndpointGet(ctx, e.ID); err != nil {
			return err
		}
	}
}

// keyOf returns the id of the key that sealed e's secrets, "" when they
// are not sealed.
func keyOf(e store.Endpoint) (string, error) {
	if e.Sealed.Data == nil {
		return "", nil
	}
	return keyring.KeyID(e.Sealed.Data)
}

// MoveURLCredentials takes the user information out of e's URL into c, so
// that the stored URL holds no credential: a webhook's becomes Basic
// authentication (refused when c has another), a broker's URLUser and
// URLPassword (its sink's URLOptions). A URL without user information is
// left as it is.
func MoveURLCredentials(e *store.Endpoint, c *Credentials) error {
	u, err := url.Parse(e.URL)
	if err != nil || u.User == nil {
		return nil
	}
	user := u.User.Username()
	password, _ := u.User.Password()
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		if c.Bearer != "" || c.OAuth2 != nil {
			return errors.New("endpoint: the URL's user information is Basic authentication, and another is given")
		}
		c.Basic = &BasicAuth{User: user, Password: password}
	default:
		c.URLUser, c.URLPassword = user, password
	}
	u.User = nil
	e.URL = u.String()
	return nil
}

// String, GoString, Format and LogValue show only what the credentials
// authenticate with (authKinds), never a secret: a Credentials printed or
// logged by mistake reveals nothing.
func (c Credentials) String() string             { return "endpoint.Credentials{" + c.authKinds() + "}" }
func (c Credentials) GoString() string           { return c.String() }
func (c Credentials) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, c.String()) }
func (c Credentials) LogValue() slog.Value       { return slog.StringValue(c.String()) }

// The parts of Credentials print as much: their kind.
func (BasicAuth) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "endpoint.BasicAuth{hidden}") }
func (OAuth2) Format(f fmt.State, _ rune)    { _, _ = io.WriteString(f, "endpoint.OAuth2{hidden}") }
func (ClientTLS) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, "endpoint.ClientTLS{hidden}") }
