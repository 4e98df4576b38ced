package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// endpointsCommands are the subcommands of "postbox endpoints".
var endpointsCommands = map[string]command{
	"apply":         {summary: "make the endpoints match a file (-f endpoints.yaml): create, update and, with --prune, remove endpoints; prints the changes first and makes them only with --yes (--dry-run: only prints); secrets are referenced (env:NAME, file:PATH), never written into the file", setup: setupEndpointsApply},
	"add":           {summary: "add an endpoint, a webhook (https://) or a broker's (nats://, amqp://, kafka://, as --sink), with its headers, authentication, client certificate, filter, envelope and signature profile: its secrets are sealed with the secrets key; prints its id and, for a webhook, its secret when generated (once)", setup: setupEndpointsAdd},
	"list":          {summary: "list the endpoints: settings, kinds of authentication, the key that sealed their secrets, secrets as fingerprints (no key needed)", setup: setupEndpointsList},
	"show":          {summary: "show one endpoint and its deliveries by status", setup: setupEndpointsShow, args: "ID|NAME"},
	"enable":        {summary: "enable an endpoint: its waiting deliveries go at once", setup: endpointStateCommand(store.EndpointEnabled), args: "ID|NAME"},
	"disable":       {summary: "disable an endpoint: no deliveries are made nor written for it", setup: endpointStateCommand(store.EndpointDisabled), args: "ID|NAME"},
	"remove":        {summary: "remove an endpoint with its deliveries and attempts", setup: setupEndpointsRemove, args: "ID|NAME"},
	"rotate-secret": {summary: "give an endpoint a new secret; the old one keeps signing for --grace", setup: setupEndpointsRotate, args: "ID|NAME"},
	"rekey":         {summary: "seal every endpoint's secrets with the first secrets key: those still in clear, and those sealed by an older key (after a key rotation); prints the counts and each endpoint it could not", setup: setupEndpointsRekey},
	"retry":         {summary: "send an endpoint's failed deliveries (its dead letters) back to the queue, as never attempted: the same as postbox failed retry --endpoint ID|NAME --all", setup: setupEndpointsRetry, args: "ID|NAME"},
	"update":        {summary: "change an endpoint's URL, name, types, filter, envelope, signature, rate, concurrency, shadow or private allowance, and its headers, authentication or client certificate (sealed again): only the flags given", setup: setupEndpointsUpdate, args: "ID|NAME"},
	"test":          {summary: "send a test event (postbox.test) to an endpoint now, through its sink (webhook or broker), and say how it went", setup: setupEndpointsTest, args: "ID|NAME"},
	"attempts":      {summary: "list an endpoint's latest delivery attempts", setup: setupEndpointsAttempts, args: "ID|NAME"},
}

// endpointsStore opens --db and returns its endpoints, once the schema is
// migrated.
func endpointsStore(ctx context.Context, db *dbFlags, command string, readOnly bool) (store.Endpoints, func(), error) {
	s, err := db.open(ctx, "endpoints "+command, readOnly)
	if err != nil {
		return nil, nil, err
	}
	if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
		s.Close()
		return nil, nil, err
	}
	return s.Endpoints, s.Close, nil
}

// endpointArg reads the one positional argument: an endpoint's id or
// name.
func endpointArg(fs *flag.FlagSet) (string, error) {
	switch {
	case fs.NArg() != 1:
		return "", fmt.Errorf("%w: give one endpoint, by id or name", errUsage)
	case fs.Arg(0) == "":
		return "", fmt.Errorf("%w: \"\" is not an endpoint id nor a name", errUsage)
	}
	return fs.Arg(0), nil
}

// notFound turns store.ErrEndpointNotFound into one clear line; other
// errors, and nil, are returned as they are.
func notFound(id uuid.UUID, err error) error {
	if errors.Is(err, store.ErrEndpointNotFound) {
		return fmt.Errorf("no endpoint %s (postbox endpoints list shows them)", id)
	}
	return err
}

// secretOrNew returns the secret of --secret given (spec, read with r:
// as is, @FILE or env:NAME), checked against the signature profile
// (signature.ParseProfile's spec, "" the standard one), or a new one;
// generated says which, so the command prints a new secret once.
func secretOrNew(v secretValue, profileSpec string, r *secretReader) (secret string, generated bool, err error) {
	if !v.set {
		secret, err := signature.GenerateSecret()
		return secret, err == nil, err
	}
	given, err := r.read("secret", v.spec, envName("secret"))
	if err != nil {
		return "", false, err
	}
	profile, err := signature.ParseProfile(profileSpec)
	if err != nil {
		return "", false, fmt.Errorf("%w: --signature: %v", errUsage, err)
	}
	if _, err := signature.NewProfileSigner(profile, given); err != nil {
		return "", false, fmt.Errorf("%w: --secret: %v", errUsage, err)
	}
	return given, false, nil
}

// endpointCommand is a subcommand that acts on one endpoint, given by id or
// name: run gets the store, opened read-only or not, and the endpoint as
// stored. check, when not nil, checks the subcommand's flags before
// anything is opened.
func endpointCommand(command string, readOnly bool, fs *flag.FlagSet, check func() error, run func(ctx context.Context, s store.Endpoints, e store.Endpoint) error) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	return func(ctx context.Context) error {
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		arg, err := endpointArg(fs)
		if err != nil {
			return err
		}
		s, closeDB, err := endpointsStore(ctx, &db, command, readOnly)
		if err != nil {
			return err
		}
		defer closeDB()
		e, err := findEndpoint(ctx, s, arg)
		if err != nil {
			return err
		}
		return notFound(e.ID, run(ctx, s, e))
	}
}

// rateFlag is --rate: deliveries per second, written R or R/s.
type rateFlag float64

func (r *rateFlag) String() string { return strconv.FormatFloat(float64(*r), 'g', -1, 64) + "/s" }

func (r *rateFlag) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "/s"), 64)
	if err != nil || v < 0 {
		return fmt.Errorf("want deliveries per second, such as 50/s (0: no limit)")
	}
	*r = rateFlag(v)
	return nil
}

// secretHelp is the help of --secret.
const secretHelp = "a webhook's signing secret whsec_<base64> (HMAC, v1), or an ed25519 secret key whsk_<base64> (v1a, see postbox keys generate; the endpoint verifies with its whpk_), " + secretFormsHelp

func setupEndpointsAdd(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var f endpointFields
	f.register(fs, false)
	var cf credentialFlags
	cf.register(fs, false)
	var secret secretValue
	fs.Var(&secret, "secret", secretHelp+" (default: a new whsec_, printed once); a broker's endpoint has none")
	var key secretsKeyFlag
	key.register(fs, "needed to seal the endpoint's secrets")
	return func(ctx context.Context) error {
		if err := required("url", f.url); err != nil {
			return err
		}
		given := func(name string) bool { return isFlagSet(fs, name) }
		e := store.Endpoint{Name: f.name, URL: f.url, Types: store.SplitTypes(f.types), RatePerSecond: float64(f.rate),
			Concurrency: f.concurrency, Shadow: f.shadow, AllowPrivate: f.allowPrivate, Filter: f.filter}
		if err := checkEndpointURL(e.URL); err != nil {
			return err // before a secret is generated
		}
		var err error
		if e.Signature, err = signatureSetting(f.signature); err != nil {
			return err
		}
		if e.Envelope, err = f.envelopeSetting("", given); err != nil {
			return err
		}
		var secrets secretReader
		ch, err := cf.read(fs, &secrets)
		if err != nil {
			return err
		}
		k, err := key.load("endpoints add")
		if err != nil {
			return err
		}
		var c endpoint.Credentials
		generated := false
		switch {
		case isWebhook(e.URL):
			if c.Secret, generated, err = secretOrNew(secret, e.Signature, &secrets); err != nil {
				return err
			}
			if ch.basic != nil && hasUserInfo(e.URL) {
				return fmt.Errorf("%w: --basic and a --url with user information are both Basic authentication: give one", errUsage)
			}
		case secret.set:
			return fmt.Errorf("%w: --secret: a broker's endpoint signs nothing (only webhooks, http:// and https://, have a secret)", errUsage)
		}
		ch.apply(&c)
		secrets.urlPassword(e.URL)
		if err := moveURLCredentials(&e, &c); err != nil {
			return err
		}
		if err := checkCredentialsFor(e.URL, c, false); err != nil {
			return err
		}
		warning, err := checkEndpointFields(ctx, e, true, given)
		if err != nil {
			return err
		}
		if err := endpoint.Seal(k, &e, c); err != nil {
			return err
		}
		if isWebhook(e.URL) {
			if err := checkWebhookSink(ctx, k, e); err != nil {
				return err
			}
		}
		s, closeDB, err := endpointsStore(ctx, &db, "add", false)
		if err != nil {
			return err
		}
		defer closeDB()
		if e, err = s.EndpointCreate(ctx, e); err != nil {
			return err
		}
		fmt.Printf("endpoint %s added, its credentials sealed by key %s\n", e.ID, e.Sealed.Key)
		if generated {
			fmt.Printf("secret %s\n(shown once: give it to the receiver, it verifies the signatures with it)\n", c.Secret)
		}
		warn(warning)
		warn(secrets.warning())
		return nil
	}
}

// checkEndpointURL refuses what is neither an absolute http or https URL
// nor a URL of one of endpointKinds that its kind takes (connecting
// nowhere: endpoint.CheckURL), naming the schemes endpoints may have.
func checkEndpointURL(raw string) error {
	if err := endpoint.CheckURL(endpointKinds, raw); err != nil {
		var refused *sink.OptionError
		if errors.As(err, &refused) {
			err = refused.Err
		}
		return fmt.Errorf("%w: --url: %v", errUsage, err)
	}
	return nil
}

// isWebhook reports whether an endpoint's URL is a webhook's (http or
// https), as opposed to a broker's.
func isWebhook(rawURL string) bool {
	k, _, err := endpoint.LookupKind(endpointKinds, rawURL)
	return err == nil && k.Name == webhook.URL.Name
}

// endpointJSON is one endpoint as list --json and show --json print it:
// no secret, only what names them (fingerprints, the kinds of its
// authentication, the id of the key that sealed them).
type endpointJSON struct {
	ID            uuid.UUID `json:"id"`
	Name          string    `json:"name"`
	URL           string    `json:"url"`
	Types         []string  `json:"types"`
	Filter        string    `json:"filter"`
	Envelope      string    `json:"envelope"`
	Signature     string    `json:"signature"`
	State         string    `json:"state"`
	Shadow        bool      `json:"shadow"`
	RatePerSecond float64   `json:"rate_per_second"`
	Concurrency   int       `json:"concurrency"`
	AllowPrivate  bool      `json:"allow_private"`
	// Auth are the kinds of the endpoint's sealed credentials ("basic",
	// "bearer", "oauth2", "mtls", "headers").
	Auth []string `json:"auth"`
	// SecretsKey is the id of the key that sealed the endpoint's secrets;
	// "" while they are in clear (Sealed false).
	SecretsKey          string                `json:"secrets_key"`
	Sealed              bool                  `json:"sealed"`
	Secret              string                `json:"secret_fingerprint"`
	PreviousSecret      string                `json:"previous_secret_fingerprint,omitempty"`
	PreviousSecretUntil *time.Time            `json:"previous_secret_until,omitempty"`
	FailingSince        *time.Time            `json:"failing_since,omitempty"`
	CreatedAt           time.Time             `json:"created_at"`
	Deliveries          *store.DeliveryCounts `json:"deliveries,omitempty"`
}

func toJSON(e store.Endpoint) endpointJSON {
	j := endpointJSON{ID: e.ID, Name: e.Name, URL: sink.Redact(e.URL), Types: e.Types, Filter: e.Filter, Envelope: envelopeText(e.Envelope),
		Signature: e.Signature, State: e.State, Shadow: e.Shadow, RatePerSecond: e.RatePerSecond, Concurrency: e.Concurrency,
		AllowPrivate: e.AllowPrivate, Auth: []string{}, CreatedAt: e.CreatedAt}
	var current, previous string
	if e.Sealed.Data != nil {
		j.Sealed, j.SecretsKey = true, e.Sealed.Key
		if e.Sealed.Auth != "" {
			j.Auth = strings.Split(e.Sealed.Auth, "+")
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
	j.Secret = current
	if previous != "" && time.Now().Before(e.PreviousSecretUntil) {
		j.PreviousSecret, j.PreviousSecretUntil = previous, &e.PreviousSecretUntil
	}
	if !e.FailingSince.IsZero() {
		j.FailingSince = &e.FailingSince
	}
	if j.Types == nil {
		j.Types = []string{}
	}
	return j
}

// envelopeText is an endpoint's Envelope setting as list and show print
// it: "raw" for none.
func envelopeText(spec string) string {
	if spec == "" {
		return "raw"
	}
	return spec
}

func setupEndpointsList(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	return func(ctx context.Context) error {
		s, closeDB, err := endpointsStore(ctx, &db, "list", true)
		if err != nil {
			return err
		}
		defer closeDB()
		all, err := s.EndpointList(ctx)
		if err != nil {
			return err
		}
		out := make([]endpointJSON, len(all))
		for i, e := range all {
			out[i] = toJSON(e)
		}
		if *asJSON {
			return writeJSON(os.Stdout, out)
		}
		if len(out) == 0 {
			fmt.Println("no endpoints (postbox endpoints add --url ... adds one)")
			return nil
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tNAME\tSTATE\tURL\tTYPES\tFILTER\tRATE\tCONC\tENVELOPE\tSIGNATURE\tAUTH\tSEALED\tSECRET")
		for _, e := range out {
			state := e.State
			if e.Shadow {
				state += ",shadow"
			}
			if e.AllowPrivate {
				state += ",private"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", e.ID, printable.String(e.Name), printable.String(state), printable.String(e.URL), typesText(e.Types),
				orDash(oneLine(e.Filter, 40)), rateText(e.RatePerSecond), e.Concurrency, printable.String(e.Envelope), orDash(printable.String(e.Signature)),
				authText(e), keyColumn(e), secretText(e.Secret))
		}
		return w.Flush()
	}
}

func typesText(types []string) string {
	if len(types) == 0 {
		return "*"
	}
	return printable.String(strings.Join(types, ","))
}

func rateText(r float64) string {
	if r == 0 {
		return "-"
	}
	return strconv.FormatFloat(r, 'g', -1, 64) + "/s"
}

func setupEndpointsShow(fs *flag.FlagSet) func(context.Context) error {
	asJSON := fs.Bool("json", false, "print JSON")
	return endpointCommand("show", true, fs, nil, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		counts, err := s.DeliveryCounts(ctx, e.ID)
		if err != nil {
			return err
		}
		j := toJSON(e)
		j.Deliveries = &counts
		if *asJSON {
			return writeJSON(os.Stdout, j)
		}
		printEndpoint(os.Stdout, j)
		return nil
	})
}

func printEndpoint(w io.Writer, e endpointJSON) {
	fmt.Fprintf(w, "id           %s\nname         %s\nurl          %s\ntypes        %s\nfilter       %s\nstate        %s\n",
		e.ID, printable.String(e.Name), printable.String(e.URL), typesText(e.Types), filterText(e.Filter), printable.String(e.State))
	fmt.Fprintf(w, "shadow       %v\nrate         %s\nconcurrency  %d\nprivate      %s\nenvelope     %s\nsignature    %s\n",
		e.Shadow, rateText(e.RatePerSecond), e.Concurrency, privateText(e.AllowPrivate), printable.String(e.Envelope), signatureText(e.Signature))
	auth := authText(e)
	if !isWebhook(e.URL) {
		auth += " (a broker's endpoint: the user and password its URL was given with, if any, are sealed)"
	}
	fmt.Fprintf(w, "auth         %s\nsecrets      %s\nsecret       %s\n", auth, sealedText(e), secretText(e.Secret))
	if e.PreviousSecretUntil != nil {
		fmt.Fprintf(w, "old secret   %s, signs until %s\n", printable.String(e.PreviousSecret), e.PreviousSecretUntil.Format(time.RFC3339))
	}
	if e.FailingSince != nil {
		fmt.Fprintf(w, "failing      since %s (%s)\n", e.FailingSince.Format(time.RFC3339), age(*e.FailingSince))
	}
	fmt.Fprintf(w, "created      %s\n", e.CreatedAt.Format(time.RFC3339))
	if c := e.Deliveries; c != nil {
		fmt.Fprintf(w, "deliveries   %d pending, %d processing, %d done, %d failed, %d dropped\n",
			c.Pending, c.Processing, c.Done, c.Failed, c.Dropped)
	}
}

// secretText is an endpoint's secret fingerprint as list and show print
// it: "-" for a broker's endpoint, which has none.
func secretText(fingerprint string) string {
	if fingerprint == "" {
		return "-"
	}
	return printable.String(fingerprint)
}

// orDash is s, or "-" when it is empty.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// filterText is an endpoint's filter as show prints it, on one line.
func filterText(expr string) string {
	if expr == "" {
		return "- (every event its types match)"
	}
	return wholeLine(expr)
}

// signatureText is an endpoint's signature profile as show prints it.
func signatureText(spec string) string {
	if spec == "" {
		return "the relay's (--signature)"
	}
	return printable.String(spec)
}

// authText is the kinds of an endpoint's credentials: "none" for a
// webhook without any, "-" for a broker's, whose URL's user and password,
// if any, are sealed (and only the key shows them).
func authText(e endpointJSON) string {
	switch {
	case len(e.Auth) > 0:
		return printable.String(strings.Join(e.Auth, "+"))
	case isWebhook(e.URL):
		return "none"
	}
	return "-"
}

// sealedText says how an endpoint's secrets are kept: sealed by which key,
// or in clear (written before secrets were sealed).
func sealedText(e endpointJSON) string {
	if !e.Sealed {
		return "in clear (run postbox endpoints rekey)"
	}
	return "sealed by key " + printable.String(e.SecretsKey)
}

// keyColumn is the SEALED column of list: the id of the key that sealed
// an endpoint's secrets, or "in clear".
func keyColumn(e endpointJSON) string {
	if !e.Sealed {
		return "in clear"
	}
	return printable.String(e.SecretsKey)
}

// privateText says whether an endpoint may reach private addresses.
func privateText(allowed bool) string {
	if allowed {
		return "allowed (--allow-private): deliveries may reach loopback, private and link-local addresses"
	}
	return "refused (the SSRF guard's default; --allow-private allows them)"
}

// endpointStateCommand is enable or disable.
func endpointStateCommand(state string) func(fs *flag.FlagSet) func(context.Context) error {
	return func(fs *flag.FlagSet) func(context.Context) error {
		return endpointCommand(state, false, fs, nil, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
			if err := s.EndpointSetState(ctx, e.ID, state); err != nil {
				return err
			}
			fmt.Printf("endpoint %s %s\n", e.ID, state)
			return nil
		})
	}
}

func setupEndpointsRemove(fs *flag.FlagSet) func(context.Context) error {
	dryRun := fs.Bool("dry-run", false, "remove nothing: say which endpoint and how many deliveries would go")
	return endpointCommand("remove", false, fs, nil, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		if *dryRun {
			return previewRemove(ctx, os.Stdout, s, e)
		}
		if err := s.EndpointDelete(ctx, e.ID); err != nil {
			return err
		}
		fmt.Printf("endpoint %s removed, with its deliveries and attempts\n", e.ID)
		return nil
	})
}

// previewRemove is remove --dry-run: the endpoint and what would be
// removed with it.
func previewRemove(ctx context.Context, w io.Writer, s store.Endpoints, e store.Endpoint) error {
	c, err := s.DeliveryCounts(ctx, e.ID)
	if err != nil {
		return err
	}
	total := c.Pending + c.Processing + c.Done + c.Failed + c.Dropped
	j := toJSON(e)
	fmt.Fprintf(w, "would remove endpoint %s (name %s, %s), with its %d deliveries (%d pending, %d processing, %d done, %d failed, %d dropped) and their attempts (--dry-run: nothing removed)\n",
		j.ID, printable.String(j.Name), printable.String(j.URL), total, c.Pending, c.Processing, c.Done, c.Failed, c.Dropped)
	return nil
}

func setupEndpointsRetry(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	return func(ctx context.Context) error {
		arg, err := endpointArg(fs)
		if err != nil {
			return err
		}
		s, err := db.open(ctx, "endpoints retry", false)
		if err != nil {
			return err
		}
		defer s.Close()
		if err := s.Outbox.CheckSchema(ctx, store.SchemaParams{}); err != nil {
			return err
		}
		e, err := findEndpoint(ctx, s.Endpoints, arg)
		if err != nil {
			return err
		}
		return retryFailed(ctx, s.Outbox, store.FailedSelection{All: true, FailedFilter: store.FailedFilter{Endpoint: e.ID}}, "failed deliveries")
	}
}

func setupEndpointsRotate(fs *flag.FlagSet) func(context.Context) error {
	var secret secretValue
	fs.Var(&secret, "secret", "the new secret, whsec_<base64> or whsk_<base64>, "+secretFormsHelp+" (default: a new whsec_, printed once)")
	grace := fs.Duration("grace", 24*time.Hour, "how long the old secret keeps signing beside the new one")
	var key secretsKeyFlag
	key.register(fs, "needed to open and seal the endpoint's secrets")
	var k *keyring.Keyring
	check := func() (err error) {
		if err := notNegative(fs, "grace"); err != nil {
			return err
		}
		k, err = key.load("endpoints rotate-secret")
		return err
	}
	return endpointCommand("rotate-secret", false, fs, check, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		var secrets secretReader
		newSecret, generated, err := secretOrNew(secret, e.Signature, &secrets)
		if err != nil {
			return err
		}
		until := time.Now().Add(*grace)
		if err := endpoint.Rotate(ctx, s, k, e.ID, newSecret, until); err != nil {
			return err
		}
		fmt.Printf("endpoint %s: new secret %s, sealed by key %s; the old one signs too until %s\n", e.ID, endpoint.Fingerprint(newSecret), k.PrimaryID(), until.Format(time.RFC3339))
		if generated {
			fmt.Printf("secret %s\n(shown once)\n", newSecret)
		}
		warn(secrets.warning())
		return nil
	})
}

func setupEndpointsTest(fs *flag.FlagSet) func(context.Context) error {
	var g guardFlags
	g.register(fs)
	timeout := fs.Duration("timeout", webhook.TimeoutDefault, "timeout of the request, or of the broker's connection and acknowledgement")
	var key secretsKeyFlag
	key.register(fs, "needed to open the endpoint's secrets")
	var k *keyring.Keyring
	check := func() (err error) {
		if err := positive(fs, "timeout"); err != nil {
			return err
		}
		k, err = key.load("endpoints test")
		return err
	}
	return endpointCommand("test", true, fs, check, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		client, err := g.endpointClient(e, *timeout)
		if err != nil {
			return err
		}
		start := time.Now()
		cfg := endpoint.SinkConfig{Webhook: webhook.Config{Timeout: *timeout}, Client: func(store.Endpoint) *http.Client { return client },
			Kinds: endpointKinds, Logger: slog.New(slog.DiscardHandler), Keyring: k}
		own, err := endpoint.OpenSink(ctx, cfg, e, start)
		if err != nil {
			return fmt.Errorf("test event to %s: the endpoint's sink does not open after %v: %w", sink.Redact(e.URL), time.Since(start).Round(time.Millisecond), err)
		}
		if c, ok := own.(io.Closer); ok {
			defer c.Close()
		}
		ev := postbox.Event{ID: postbox.NewID(), EventType: "postbox.test", AggregateType: "endpoint",
			AggregateID: e.ID.String(), Payload: []byte(`{"test":true}`)}
		if err := own.Publish(ctx, &sink.Message{Event: ev, Attempt: 1}); err != nil {
			return fmt.Errorf("test event %s to %s failed after %v: %w", ev.ID, sink.Redact(e.URL), time.Since(start).Round(time.Millisecond), err)
		}
		fmt.Printf("test event %s delivered to %s in %v\n", ev.ID, printable.String(sink.Redact(e.URL)), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

func setupEndpointsAttempts(fs *flag.FlagSet) func(context.Context) error {
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 50, "most attempts listed, the most recent first")
	check := func() error { return positive(fs, "limit") }
	return endpointCommand("attempts", true, fs, check, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		attempts, err := s.AttemptList(ctx, e.ID, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
			if attempts == nil {
				attempts = []store.Attempt{}
			}
			return writeJSON(os.Stdout, attempts)
		}
		if len(attempts) == 0 {
			fmt.Println("no attempts logged")
			return nil
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		// The error is the last column, whole: what it says (such as the
		// SSRF guard's refusal and the flag that allows the address) is
		// what an operator reads the attempts for.
		fmt.Fprintln(w, "AT\tEVENT\tTYPE\tATTEMPT\tSTATUS\tDURATION\tERROR")
		for _, a := range attempts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%v\t%s\n", a.At.Format(time.RFC3339), a.EventID, oneLine(a.EventType, 100), a.Attempt,
				a.StatusCode, a.Duration.Round(time.Millisecond), wholeLine(a.Error))
		}
		return w.Flush()
	})
}
