// Package admin manages webhook endpoints: it adds, changes, enables,
// disables and removes them, rotates their secrets and sends them test
// events, with every check the relay would otherwise make too late (the
// URL and its kind, the SSRF guard at registration, the filter, the
// envelope, the signature profile, the credentials a sink can use). The
// command line (postbox endpoints), the console's pages and its JSON API,
// and the declarative apply (package endpoint/manifest) all call it, so
// that an endpoint is checked alike wherever it comes from.
//
// Secrets are sealed with the operator's keyring (package endpoint's Seal)
// before the store sees them; nothing here logs or returns one, but the
// signing secret Create or RotateSecret generated, which the caller shows
// once.
package admin

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// ConcurrencyDefault is an endpoint's Concurrency when Create is given 0.
const ConcurrencyDefault = 8

// ConcurrencyMax is the most deliveries in flight an endpoint may have
// (Settings.Concurrency): Create and Update refuse more.
const ConcurrencyMax = 1024

// GraceDefault is how long an endpoint's previous signing secret keeps
// signing after a rotation when the front end is not told otherwise (postbox
// endpoints rotate-secret --grace, postbox endpoints apply --grace).
const GraceDefault = 24 * time.Hour

// TestTimeoutDefault bounds Test's request, or the broker's connection and
// acknowledgement, when Test is given no timeout (postbox endpoints test
// --timeout).
const TestTimeoutDefault = 10 * time.Second

// Errors of the operations. A FieldError wraps ErrInvalid.
var (
	// ErrInvalid is wrapped by every refusal of a setting (FieldError):
	// the command line exits 2, the API answers 422.
	ErrInvalid = errors.New("admin: invalid setting")
	// ErrNotFound is returned for an endpoint the store does not hold (it
	// wraps store.ErrEndpointNotFound as well).
	ErrNotFound = errors.New("admin: no such endpoint")
	// ErrAmbiguous is returned by Find for a name that several endpoints
	// have.
	ErrAmbiguous = errors.New("admin: several endpoints have this name")
)

// FieldError is a refused setting. Setting is its canonical name (one of
// the Setting* constants); Message says why, naming settings the way
// Config.Names does (the command line's flags, the API's JSON names), and
// never holds a secret.
type FieldError struct {
	Setting string
	Message string
}

func (e *FieldError) Error() string { return e.Message }

// Unwrap makes every FieldError an ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// notFoundError is ErrNotFound and store.ErrEndpointNotFound at once:
// what the store did not hold, named by id or by name.
type notFoundError struct{ what string }

func (e *notFoundError) Error() string { return "no endpoint " + e.what }

func (e *notFoundError) Is(target error) bool {
	return target == ErrNotFound || target == store.ErrEndpointNotFound
}

// notFound turns the store's store.ErrEndpointNotFound for endpoint id
// into the error that is ErrNotFound too; other errors, and nil, are
// returned as they are.
func notFound(id uuid.UUID, err error) error {
	if errors.Is(err, store.ErrEndpointNotFound) {
		return &notFoundError{what: id.String()}
	}
	return err
}

// The settings' canonical names: the JSON names of Settings and of the
// API's credential fields, and what FieldError.Setting holds.
const (
	SettingName          = "name"
	SettingURL           = "url"
	SettingTypes         = "types"
	SettingFilter        = "filter"
	SettingEnvelope      = "envelope"
	SettingCESource      = "ce_source"
	SettingSignature     = "signature"
	SettingRate          = "rate_per_second"
	SettingConcurrency   = "concurrency"
	SettingShadow        = "shadow"
	SettingAllowPrivate  = "allow_private"
	SettingSecret        = "secret"
	SettingGrace         = "grace"
	SettingHeaders       = "headers"
	SettingAuth          = "auth"
	SettingBasic         = "basic"
	SettingBearer        = "bearer"
	SettingOAuth2        = "oauth2"
	SettingOAuth2URL     = "oauth2.token_url"
	SettingOAuth2ID      = "oauth2.client_id"
	SettingOAuth2Secret  = "oauth2.client_secret"
	SettingOAuth2Scopes  = "oauth2.scopes"
	SettingOAuth2Params  = "oauth2.params"
	SettingTLS           = "tls"
	SettingTLSCert       = "tls.cert"
	SettingTLSKey        = "tls.key"
	SettingTLSCA         = "tls.ca"
	SettingRemoveAuth    = "auth.none"    // what removes the authentication (CLI: --auth none)
	SettingRemoveTLS     = "tls.none"     // what removes the client certificate and CA (CLI: --no-tls)
	SettingRemoveHeaders = "headers.none" // what removes the static headers (CLI: --clear-headers)
	// SettingState is an endpoint's state, which SetState sets.
	SettingState = "state"
	// SettingLimit is how many attempts Attempts returns at most.
	SettingLimit = "limit"
	// SettingRotateSecret is no setting but what gives an endpoint a new
	// signing secret (RotateSecret; CLI: postbox endpoints rotate-secret
	// --grace 0), which a message names when an endpoint needs one first.
	SettingRotateSecret = "rotate_secret"
)

// Names turns a setting's canonical name into the name its front end
// gives it in messages: the command line "--allow-private", the API and
// the apply file "allow_private".
type Names func(setting string) string

// Config configures an Admin. Only Store is required.
type Config struct {
	// Store holds the endpoints: a store's driver, such as
	// (*postgres.Store).Driver(). Required.
	Store store.Endpoints
	// Keyring seals and opens the endpoints' secrets. Without one, what
	// needs no secret still works (Find, List, Get, SetState, Delete, and
	// Update of settings that are not secret and need no sink check);
	// the rest returns endpoint.ErrNoKeyring.
	Keyring *keyring.Keyring
	// Kinds are the sinks other than webhooks an endpoint's URL may name
	// (nats.URL, amqp.URL, kafka.URL: postbox relay's list); nil: webhooks
	// only. The same list as the relay's endpoint.SupervisorConfig.Kinds.
	Kinds []sink.URLKind
	// Names names the settings in messages (nil: their canonical names).
	Names Names
	// Resolver resolves a webhook's host for the SSRF check at
	// registration (nil: net.DefaultResolver).
	Resolver *net.Resolver
	// Client returns the HTTP client of Test's request to a webhook
	// endpoint (nil: a client behind the SSRF guard that allows private
	// addresses only to an endpoint with AllowPrivate, as the relay's).
	Client func(e store.Endpoint, timeout time.Duration) (*http.Client, error)
	// Now is the clock of rotations' grace periods (time.Now when nil).
	Now func() time.Time
	// PrivateEndpoints lets an endpoint be given allow_private (reach
	// loopback, private and link-local addresses). False: Check, Create
	// and Update refuse allow_private true (a FieldError on
	// SettingAllowPrivate) — what a console whose users are not the
	// operator wants. The command line sets it: its user is the operator.
	PrivateEndpoints bool
	// CheckBrokerHosts runs the SSRF check at registration on a broker's
	// URL too (every host of its host list), as on a webhook's: a broker
	// at a private address then needs allow_private. False: a broker's
	// address is the operator's (as postbox relay --sink's), unchecked.
	CheckBrokerHosts bool
	// AllowCIDRs are prefixes the SSRF check at registration lets
	// endpoints reach whatever range they are in (guard.Config.Allow): the
	// relay's --allow-cidr, so that both agree. Test's default client's
	// guard allows them too.
	AllowCIDRs []netip.Prefix
}

// Admin manages the endpoints of one store.
type Admin struct {
	cfg Config
}

// New checks cfg and returns its Admin.
func New(cfg Config) (*Admin, error) {
	if cfg.Store == nil {
		return nil, errors.New("admin: Config.Store is nil")
	}
	return &Admin{cfg: cfg}, nil
}

// name is how messages name setting (Config.Names).
func (a *Admin) name(setting string) string {
	if a.cfg.Names == nil {
		return setting
	}
	return a.cfg.Names(setting)
}

// refuse is the FieldError of setting: format and args, in which the
// settings named are a.name's.
func (a *Admin) refuse(setting, format string, args ...any) *FieldError {
	return &FieldError{Setting: setting, Message: fmt.Sprintf(format, args...)}
}

// now is the clock (Config.Now).
func (a *Admin) now() time.Time {
	if a.cfg.Now == nil {
		return time.Now()
	}
	return a.cfg.Now()
}

// HasKeyring reports whether the Admin has a keyring (Config.Keyring):
// without one, Create, RotateSecret, Test of a sealed endpoint and
// Update of its credentials return endpoint.ErrNoKeyring. A nil Admin has
// none.
func (a *Admin) HasKeyring() bool { return a != nil && a.cfg.Keyring != nil }

// keyring returns the keyring, or endpoint.ErrNoKeyring.
func (a *Admin) keyring() (*keyring.Keyring, error) {
	if a.cfg.Keyring == nil {
		return nil, endpoint.ErrNoKeyring
	}
	return a.cfg.Keyring, nil
}

// Settings are an endpoint's settings that are not secret: what Create
// takes, what the apply file and the API's bodies hold, what View shows.
type Settings struct {
	// Name is for people; Find, the command line and the apply file take
	// it instead of the id.
	Name string `json:"name" yaml:"name"`
	// URL is a webhook's (https://, http://) or a broker's (nats://,
	// amqp://, kafka://, as postbox relay --sink takes it). User
	// information in it is moved into the sealed credentials.
	URL string `json:"url" yaml:"url"`
	// Types are globs on the event type; empty: every event.
	Types []string `json:"types" yaml:"types,omitempty"`
	// Filter is a CEL expression (package endpoint/filter); "": none.
	Filter string `json:"filter" yaml:"filter,omitempty"`
	// Envelope is "raw" (or ""), "standard", "cloudevents" or
	// "cloudevents-binary"; CESource the CloudEvents source of the last
	// two ("": envelope.SourceDefault).
	Envelope string `json:"envelope" yaml:"envelope,omitempty"`
	CESource string `json:"ce_source" yaml:"ce_source,omitempty"`
	// Signature is a webhook's signature profile (signature.ParseProfile):
	// "" for the relay's --signature.
	Signature string `json:"signature" yaml:"signature,omitempty"`
	// RatePerSecond bounds the deliveries started per second (0: none).
	RatePerSecond float64 `json:"rate_per_second" yaml:"rate_per_second,omitempty"`
	// Concurrency bounds the deliveries in flight (0 on Create:
	// ConcurrencyDefault).
	Concurrency  int  `json:"concurrency" yaml:"concurrency,omitempty"`
	Shadow       bool `json:"shadow" yaml:"shadow,omitempty"`
	AllowPrivate bool `json:"allow_private" yaml:"allow_private,omitempty"`
}

// View is an endpoint as the command line's --json, the API and the
// console show it: its settings, and of its secrets only what names them
// (fingerprints, the kinds of its authentication, the key that sealed
// them).
type View struct {
	ID uuid.UUID `json:"id"`
	Settings
	// State is store.EndpointEnabled, EndpointDisabled or
	// EndpointAutoDisabled.
	State string `json:"state"`
	// Auth are the kinds of the endpoint's sealed credentials ("basic",
	// "bearer", "oauth2", "mtls", "headers").
	Auth []string `json:"auth"`
	// Sealed is false while the endpoint's secrets are in clear (written
	// before they were sealed); SecretsKey is the id of the key that
	// sealed them.
	Sealed     bool   `json:"sealed"`
	SecretsKey string `json:"secrets_key"`
	// SecretFingerprint names the signing secret ("" for a broker's
	// endpoint); PreviousSecretFingerprint the previous one while it still
	// signs, until PreviousSecretUntil.
	SecretFingerprint         string     `json:"secret_fingerprint"`
	PreviousSecretFingerprint string     `json:"previous_secret_fingerprint,omitempty"`
	PreviousSecretUntil       *time.Time `json:"previous_secret_until,omitempty"`
	// FailingSince is when the endpoint's current run of failures began;
	// BreakerOpenUntil when its breaker lets the next probe through.
	FailingSince     *time.Time `json:"failing_since,omitempty"`
	BreakerOpenUntil *time.Time `json:"breaker_open_until,omitempty"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	// Deliveries are its deliveries by status (Get; nil from List).
	Deliveries *store.DeliveryCounts `json:"deliveries,omitempty"`
}

// Created is what Create did.
type Created struct {
	Endpoint View
	// Secret is the signing secret Create generated (a webhook added
	// without one): shown once, never stored in clear. "" when one was
	// given, and for a broker's endpoint.
	Secret string
	// Warnings are what was accepted but deserves a word (a host that does
	// not resolve now).
	Warnings []string
}

// Change is what Update changes: each non-nil field replaces the
// endpoint's setting; Credentials' parts replace theirs when set.
type Change struct {
	Name, URL, Filter, Envelope, CESource, Signature *string
	Types                                            *[]string
	RatePerSecond                                    *float64
	Concurrency                                      *int
	Shadow, AllowPrivate                             *bool
	Credentials                                      CredentialChange
	// Secret, when not nil, becomes the signing secret (a new whsec_ when
	// "", returned once in Updated.Secret), in the same write as the
	// other credentials, checked against the signature profile the
	// endpoint has after the change; the current one keeps signing for
	// SecretGrace (not negative), as RotateSecret's. The same secret
	// given again changes nothing.
	Secret      *string
	SecretGrace time.Duration
}

// CredentialChange replaces parts of an endpoint's sealed credentials
// (its signing secret changes with RotateSecret).
type CredentialChange struct {
	// SetHeaders replaces every static header with Headers (none: removes
	// them).
	SetHeaders bool
	Headers    map[string]string
	// SetAuth replaces the authentication with Basic, Bearer or OAuth2
	// (at most one; none: removes it, with a broker URL's user and
	// password).
	SetAuth bool
	Basic   *endpoint.BasicAuth
	Bearer  string
	OAuth2  *endpoint.OAuth2
	// SetTLS replaces the client certificate and CA with TLS (nil:
	// removes them).
	SetTLS bool
	TLS    *endpoint.ClientTLS
}

// Updated is what Update did.
type Updated struct {
	Endpoint View
	// Changed are the canonical names of the settings that changed (those
	// given with a value other than the endpoint's).
	Changed  []string
	Warnings []string
	// Secret is the signing secret Update generated (Change.Secret ""):
	// shown once. "" when none was generated.
	Secret string
}

// Rotated is what RotateSecret did.
type Rotated struct {
	// Secret is the new signing secret when RotateSecret generated it
	// (shown once); "" when one was given.
	Secret      string
	Fingerprint string
	// Key is the id of the key that sealed it.
	Key string
	// PreviousUntil is when the previous secret stops signing.
	PreviousUntil time.Time
}

// Tested is what Test did.
type Tested struct {
	EventID  uuid.UUID
	Duration time.Duration
}

// TestError is a test event that did not get through: its sink did not
// open (Opened false) or it refused the event. Its text names the
// endpoint's URL redacted, never a secret.
type TestError struct {
	EventID  uuid.UUID
	Duration time.Duration
	// URL is the endpoint's, redacted (sink.Redact).
	URL    string
	Opened bool
	Err    error
}

func (e *TestError) Error() string {
	if !e.Opened {
		return fmt.Sprintf("test event to %s: the endpoint's sink does not open after %v: %v", e.URL, e.Duration, e.Err)
	}
	return fmt.Sprintf("test event %s to %s failed after %v: %v", e.EventID, e.URL, e.Duration, e.Err)
}

// Unwrap returns the sink's error.
func (e *TestError) Unwrap() error { return e.Err }
