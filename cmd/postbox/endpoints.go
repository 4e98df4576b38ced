package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/postbox-go/postbox/endpoint/admin"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/sink"
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

// endpointFlagNames are the flags that give admin's settings, as its
// messages name them (admin.Config.Names).
var endpointFlagNames = map[string]string{
	admin.SettingName:          "--name",
	admin.SettingURL:           "--url",
	admin.SettingTypes:         "--types",
	admin.SettingFilter:        "--filter",
	admin.SettingEnvelope:      "--envelope",
	admin.SettingCESource:      "--ce-source",
	admin.SettingSignature:     "--signature",
	admin.SettingRate:          "--rate",
	admin.SettingConcurrency:   "--concurrency",
	admin.SettingShadow:        "--shadow",
	admin.SettingAllowPrivate:  "--allow-private",
	admin.SettingSecret:        "--secret",
	admin.SettingGrace:         "--grace",
	admin.SettingHeaders:       "--header",
	admin.SettingRemoveHeaders: "--clear-headers",
	admin.SettingAuth:          "the authentication",
	admin.SettingRemoveAuth:    "--auth none",
	admin.SettingBasic:         "--basic",
	admin.SettingBearer:        "--bearer",
	admin.SettingOAuth2:        "--oauth2-*",
	admin.SettingOAuth2URL:     "--oauth2-token-url",
	admin.SettingOAuth2ID:      "--oauth2-client-id",
	admin.SettingOAuth2Secret:  "--oauth2-client-secret",
	admin.SettingOAuth2Scopes:  "--oauth2-scope",
	admin.SettingOAuth2Params:  "--oauth2-param",
	admin.SettingTLS:           "--tls-*",
	admin.SettingTLSCert:       "--tls-cert",
	admin.SettingTLSKey:        "--tls-key",
	admin.SettingTLSCA:         "--tls-ca",
	admin.SettingRemoveTLS:     "--no-tls",
	admin.SettingLimit:         "--limit",
	admin.SettingRotateSecret:  "postbox endpoints rotate-secret --grace 0",
}

// endpointFlagName names a setting of admin's messages by its flag.
func endpointFlagName(setting string) string {
	if f, ok := endpointFlagNames[setting]; ok {
		return f
	}
	return setting
}

// newEndpointAdmin is the Admin of the endpoints commands: cfg (its Store,
// and the Keyring and Client of the commands that need them), with the
// kinds of endpoints postbox relay delivers to and messages that name the
// flags. Its user is the operator, in their shell: an endpoint may be
// given --allow-private, and a broker's address is not checked (as
// postbox relay --sink's is not); no prefix is allowed beside (the SSRF
// check at registration is the relay's without --allow-cidr).
func newEndpointAdmin(cfg admin.Config) (*admin.Admin, error) {
	cfg.Kinds, cfg.Names = endpointKinds, endpointFlagName
	cfg.PrivateEndpoints, cfg.CheckBrokerHosts, cfg.AllowCIDRs = true, false, nil
	return admin.New(cfg)
}

// endpointError is err of admin as the endpoints commands return it: a
// refused setting is a usage error; an endpoint not found, or a name
// several have, says where to look.
func endpointError(err error) error {
	var refused *admin.FieldError
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("%w: %w", errUsage, err)
	case errors.Is(err, admin.ErrNotFound), errors.Is(err, admin.ErrAmbiguous):
		return fmt.Errorf("%w (postbox endpoints list shows them)", err)
	}
	return err
}

// findEndpoint returns the endpoint arg names: its id, or its name when
// arg is no id and exactly one endpoint has it (admin.Admin.Find).
func findEndpoint(ctx context.Context, s store.Endpoints, arg string) (store.Endpoint, error) {
	a, err := newEndpointAdmin(admin.Config{Store: s})
	if err != nil {
		return store.Endpoint{}, err
	}
	e, err := a.Find(ctx, arg)
	return e, endpointError(err)
}

// endpointCommand is a subcommand that acts on one endpoint, given by id or
// name: run gets the Admin of the store, opened read-only or not, and the
// endpoint as stored. check, when not nil, checks the subcommand's flags
// before anything is opened, and sets what the Admin needs beside the
// store (its Keyring, its Client).
func endpointCommand(command string, readOnly bool, fs *flag.FlagSet, check func(cfg *admin.Config) error, run func(ctx context.Context, a *admin.Admin, e store.Endpoint) error) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	return func(ctx context.Context) error {
		var cfg admin.Config
		if check != nil {
			if err := check(&cfg); err != nil {
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
		cfg.Store = s
		a, err := newEndpointAdmin(cfg)
		if err != nil {
			return err
		}
		e, err := a.Find(ctx, arg)
		if err != nil {
			return endpointError(err)
		}
		return endpointError(run(ctx, a, e))
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
		if f.concurrency < 1 { // 0 is no default here: admin would take it for 8
			return fmt.Errorf("%w: --concurrency %d: at least 1", errUsage, f.concurrency)
		}
		settings := admin.Settings{Name: f.name, URL: f.url, Types: store.SplitTypes(f.types), Filter: f.filter, Envelope: f.envelope, CESource: f.ceSource,
			Signature: f.signature, RatePerSecond: float64(f.rate), Concurrency: f.concurrency, Shadow: f.shadow, AllowPrivate: f.allowPrivate}
		var secrets secretReader
		ch, err := cf.read(fs, &secrets)
		if err != nil {
			return err
		}
		c := ch.credentials()
		if secret.set {
			if c.Secret, err = secrets.read("secret", secret.spec, envName("secret")); err != nil {
				return err
			}
			if c.Secret == "" {
				return fmt.Errorf("%w: --secret: the secret is empty (without --secret, a new one is made)", errUsage)
			}
		}
		secrets.urlPassword(f.url)
		k, err := key.load("endpoints add")
		if err != nil {
			return err
		}
		s, closeDB, err := endpointsStore(ctx, &db, "add", false)
		if err != nil {
			return err
		}
		defer closeDB()
		a, err := newEndpointAdmin(admin.Config{Store: s, Keyring: k})
		if err != nil {
			return err
		}
		created, err := a.Create(ctx, settings, c)
		if err != nil {
			return endpointError(err)
		}
		fmt.Printf("endpoint %s added, its credentials sealed by key %s\n", created.Endpoint.ID, created.Endpoint.SecretsKey)
		if created.Secret != "" {
			fmt.Printf("secret %s\n(shown once: give it to the receiver, it verifies the signatures with it)\n", created.Secret)
		}
		warnAll(created.Warnings)
		warn(secrets.warning())
		return nil
	}
}

// envelopeText is an endpoint's envelope as list and show print it: its
// kind, and its CloudEvents source when it is not the default.
func envelopeText(v admin.View) string {
	if v.CESource == "" {
		return v.Envelope
	}
	return v.Envelope + ";source=" + v.CESource
}

func setupEndpointsList(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	asJSON := fs.Bool("json", false, "print JSON: each endpoint as the console's API shows it")
	return func(ctx context.Context) error {
		s, closeDB, err := endpointsStore(ctx, &db, "list", true)
		if err != nil {
			return err
		}
		defer closeDB()
		a, err := newEndpointAdmin(admin.Config{Store: s})
		if err != nil {
			return err
		}
		out, err := a.List(ctx)
		if err != nil {
			return err
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
				orDash(oneLine(e.Filter, 40)), rateText(e.RatePerSecond), e.Concurrency, printable.String(envelopeText(e)), orDash(printable.String(e.Signature)),
				authText(a, e), keyColumn(e), secretText(e.SecretFingerprint))
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
	asJSON := fs.Bool("json", false, "print JSON: the endpoint as the console's API shows it, with its deliveries by status")
	return endpointCommand("show", true, fs, nil, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
		v, err := a.Get(ctx, e.ID)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(os.Stdout, v)
		}
		printEndpoint(os.Stdout, a, v)
		return nil
	})
}

func printEndpoint(w io.Writer, a *admin.Admin, e admin.View) {
	fmt.Fprintf(w, "id           %s\nname         %s\nurl          %s\ntypes        %s\nfilter       %s\nstate        %s\n",
		e.ID, printable.String(e.Name), printable.String(e.URL), typesText(e.Types), filterText(e.Filter), printable.String(e.State))
	fmt.Fprintf(w, "shadow       %v\nrate         %s\nconcurrency  %d\nprivate      %s\nenvelope     %s\nsignature    %s\n",
		e.Shadow, rateText(e.RatePerSecond), e.Concurrency, privateText(e.AllowPrivate), printable.String(envelopeText(e)), signatureText(e.Signature))
	auth := authText(a, e)
	if !a.IsWebhook(e.URL) {
		auth += " (a broker's endpoint: the user and password its URL was given with, if any, are sealed)"
	}
	fmt.Fprintf(w, "auth         %s\nsecrets      %s\nsecret       %s\n", auth, sealedText(e), secretText(e.SecretFingerprint))
	if e.PreviousSecretUntil != nil {
		fmt.Fprintf(w, "old secret   %s, signs until %s\n", printable.String(e.PreviousSecretFingerprint), e.PreviousSecretUntil.Format(time.RFC3339))
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
func authText(a *admin.Admin, e admin.View) string {
	switch {
	case len(e.Auth) > 0:
		return printable.String(strings.Join(e.Auth, "+"))
	case a.IsWebhook(e.URL):
		return "none"
	}
	return "-"
}

// sealedText says how an endpoint's secrets are kept: sealed by which key,
// or in clear (written before secrets were sealed).
func sealedText(e admin.View) string {
	if !e.Sealed {
		return "in clear (run postbox endpoints rekey)"
	}
	return "sealed by key " + printable.String(e.SecretsKey)
}

// keyColumn is the SEALED column of list: the id of the key that sealed
// an endpoint's secrets, or "in clear".
func keyColumn(e admin.View) string {
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
		return endpointCommand(state, false, fs, nil, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
			if err := a.SetState(ctx, e.ID, state); err != nil {
				return err
			}
			fmt.Printf("endpoint %s %s\n", e.ID, state)
			return nil
		})
	}
}

func setupEndpointsRemove(fs *flag.FlagSet) func(context.Context) error {
	dryRun := fs.Bool("dry-run", false, "remove nothing: say which endpoint and how many deliveries would go")
	return endpointCommand("remove", false, fs, nil, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
		if *dryRun {
			return previewRemove(ctx, os.Stdout, a, e)
		}
		if err := a.Delete(ctx, e.ID); err != nil {
			return err
		}
		fmt.Printf("endpoint %s removed, with its deliveries and attempts\n", e.ID)
		return nil
	})
}

// previewRemove is remove --dry-run: the endpoint and what would be
// removed with it.
func previewRemove(ctx context.Context, w io.Writer, a *admin.Admin, e store.Endpoint) error {
	v, err := a.Get(ctx, e.ID)
	if err != nil {
		return err
	}
	c := v.Deliveries
	total := c.Pending + c.Processing + c.Done + c.Failed + c.Dropped
	fmt.Fprintf(w, "would remove endpoint %s (name %s, %s), with its %d deliveries (%d pending, %d processing, %d done, %d failed, %d dropped) and their attempts (--dry-run: nothing removed)\n",
		v.ID, printable.String(v.Name), printable.String(v.URL), total, c.Pending, c.Processing, c.Done, c.Failed, c.Dropped)
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
	grace := fs.Duration("grace", admin.GraceDefault, "how long the old secret keeps signing beside the new one")
	var key secretsKeyFlag
	key.register(fs, "needed to open and seal the endpoint's secrets")
	check := func(cfg *admin.Config) (err error) {
		if err := notNegative(fs, "grace"); err != nil {
			return err
		}
		cfg.Keyring, err = key.load("endpoints rotate-secret")
		return err
	}
	return endpointCommand("rotate-secret", false, fs, check, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
		var secrets secretReader
		newSecret := ""
		if secret.set {
			var err error
			if newSecret, err = secrets.read("secret", secret.spec, envName("secret")); err != nil {
				return err
			}
			if newSecret == "" {
				return fmt.Errorf("%w: --secret: the secret is empty (without --secret, a new one is made)", errUsage)
			}
		}
		r, err := a.RotateSecret(ctx, e.ID, newSecret, *grace)
		if err != nil {
			return err
		}
		fmt.Printf("endpoint %s: new secret %s, sealed by key %s; the old one signs too until %s\n", e.ID, r.Fingerprint, r.Key, r.PreviousUntil.Format(time.RFC3339))
		if r.Secret != "" {
			fmt.Printf("secret %s\n(shown once)\n", r.Secret)
		}
		warn(secrets.warning())
		return nil
	})
}

func setupEndpointsTest(fs *flag.FlagSet) func(context.Context) error {
	var g guardFlags
	g.register(fs)
	timeout := fs.Duration("timeout", admin.TestTimeoutDefault, "timeout of the request, or of the broker's connection and acknowledgement")
	var key secretsKeyFlag
	key.register(fs, "needed to open the endpoint's secrets")
	check := func(cfg *admin.Config) (err error) {
		if err := positive(fs, "timeout"); err != nil {
			return err
		}
		cfg.Client = g.endpointClient
		cfg.Keyring, err = key.load("endpoints test")
		return err
	}
	return endpointCommand("test", true, fs, check, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
		tested, err := a.Test(ctx, e.ID, *timeout)
		if err != nil {
			return err
		}
		fmt.Printf("test event %s delivered to %s in %v\n", tested.EventID, printable.String(sink.Redact(e.URL)), tested.Duration.Round(time.Millisecond))
		return nil
	})
}

func setupEndpointsAttempts(fs *flag.FlagSet) func(context.Context) error {
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 50, "most attempts listed, the most recent first")
	check := func(*admin.Config) error { return positive(fs, "limit") }
	return endpointCommand("attempts", true, fs, check, func(ctx context.Context, a *admin.Admin, e store.Endpoint) error {
		attempts, err := a.Attempts(ctx, e.ID, *limit)
		if err != nil {
			return err
		}
		if *asJSON {
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
