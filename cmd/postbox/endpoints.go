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
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// endpointsCommands are the subcommands of "postbox endpoints".
var endpointsCommands = map[string]command{
	"add":           {summary: "add an endpoint, a webhook (https://) or a broker's (nats://, amqp://, kafka://, as --sink): prints its id and, for a webhook, its secret when generated (once)", setup: setupEndpointsAdd},
	"list":          {summary: "list the endpoints (secrets as fingerprints)", setup: setupEndpointsList},
	"show":          {summary: "show one endpoint and its deliveries by status", setup: setupEndpointsShow, args: "ID|NAME"},
	"enable":        {summary: "enable an endpoint: its waiting deliveries go at once", setup: endpointStateCommand(store.EndpointEnabled), args: "ID|NAME"},
	"disable":       {summary: "disable an endpoint: no deliveries are made nor written for it", setup: endpointStateCommand(store.EndpointDisabled), args: "ID|NAME"},
	"remove":        {summary: "remove an endpoint with its deliveries and attempts", setup: setupEndpointsRemove, args: "ID|NAME"},
	"rotate-secret": {summary: "give an endpoint a new secret; the old one keeps signing for --grace", setup: setupEndpointsRotate, args: "ID|NAME"},
	"retry":         {summary: "send an endpoint's failed deliveries (its dead letters) back to the queue, as never attempted: the same as postbox failed retry --endpoint ID|NAME --all", setup: setupEndpointsRetry, args: "ID|NAME"},
	"update":        {summary: "change an endpoint's URL, name, types, rate, concurrency, shadow or private allowance: only the flags given", setup: setupEndpointsUpdate, args: "ID|NAME"},
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

// secretOrNew returns the --secret given, checked, or a new one; generated
// says which, so the command prints a new secret once.
func secretOrNew(given string) (secret string, generated bool, err error) {
	if given == "" {
		secret, err := signature.GenerateSecret()
		return secret, err == nil, err
	}
	if _, err := signature.NewSigner(signature.Standard, given); err != nil {
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

func setupEndpointsAdd(fs *flag.FlagSet) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	var f endpointFields
	f.register(fs, 8)
	secret := fs.String("secret", "", "a webhook's signing secret whsec_<base64> (HMAC, v1), or an ed25519 secret key whsk_<base64> (v1a, see postbox keys generate; the endpoint verifies with its whpk_) (default: a new whsec_, printed once); a broker's endpoint has none")
	return func(ctx context.Context) error {
		if err := required("url", f.url); err != nil {
			return err
		}
		e := store.Endpoint{Name: f.name, URL: f.url, Types: store.SplitTypes(f.types), RatePerSecond: float64(f.rate),
			Concurrency: f.concurrency, Shadow: f.shadow, AllowPrivate: f.allowPrivate}
		if err := checkEndpointURL(e.URL); err != nil {
			return err // before a secret is generated
		}
		var (
			key       string
			generated bool
			err       error
		)
		switch {
		case isWebhook(e.URL):
			if key, generated, err = secretOrNew(*secret); err != nil {
				return err
			}
		case *secret != "":
			return fmt.Errorf("%w: --secret: a broker's endpoint signs nothing (only webhooks, http:// and https://, have a secret)", errUsage)
		}
		e.Secret = key
		warning, err := checkEndpointFields(ctx, e, true)
		if err != nil {
			return err
		}
		s, closeDB, err := endpointsStore(ctx, &db, "add", false)
		if err != nil {
			return err
		}
		defer closeDB()
		if e, err = s.EndpointCreate(ctx, e); err != nil {
			return err
		}
		fmt.Printf("endpoint %s added\n", e.ID)
		if generated {
			fmt.Printf("secret %s\n(shown once: give it to the receiver, it verifies the signatures with it)\n", key)
		}
		warn(warning)
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
// no secret, only its fingerprint.
type endpointJSON struct {
	ID                  uuid.UUID             `json:"id"`
	Name                string                `json:"name"`
	URL                 string                `json:"url"`
	Types               []string              `json:"types"`
	State               string                `json:"state"`
	Shadow              bool                  `json:"shadow"`
	RatePerSecond       float64               `json:"rate_per_second"`
	Concurrency         int                   `json:"concurrency"`
	AllowPrivate        bool                  `json:"allow_private"`
	Secret              string                `json:"secret_fingerprint"`
	PreviousSecret      string                `json:"previous_secret_fingerprint,omitempty"`
	PreviousSecretUntil *time.Time            `json:"previous_secret_until,omitempty"`
	FailingSince        *time.Time            `json:"failing_since,omitempty"`
	CreatedAt           time.Time             `json:"created_at"`
	Deliveries          *store.DeliveryCounts `json:"deliveries,omitempty"`
}

func toJSON(e store.Endpoint) endpointJSON {
	j := endpointJSON{ID: e.ID, Name: e.Name, URL: sink.Redact(e.URL), Types: e.Types, State: e.State, Shadow: e.Shadow,
		RatePerSecond: e.RatePerSecond, Concurrency: e.Concurrency, AllowPrivate: e.AllowPrivate, CreatedAt: e.CreatedAt}
	if e.Secret != "" { // a broker's endpoint has none
		j.Secret = endpoint.Fingerprint(e.Secret)
	}
	if e.PreviousSecret != "" && time.Now().Before(e.PreviousSecretUntil) {
		j.PreviousSecret, j.PreviousSecretUntil = endpoint.Fingerprint(e.PreviousSecret), &e.PreviousSecretUntil
	}
	if !e.FailingSince.IsZero() {
		j.FailingSince = &e.FailingSince
	}
	if j.Types == nil {
		j.Types = []string{}
	}
	return j
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
		fmt.Fprintln(w, "ID\tNAME\tSTATE\tURL\tTYPES\tRATE\tCONC\tSECRET")
		for _, e := range out {
			state := e.State
			if e.Shadow {
				state += ",shadow"
			}
			if e.AllowPrivate {
				state += ",private"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, printable.String(e.Name), printable.String(state), printable.String(e.URL), typesText(e.Types),
				rateText(e.RatePerSecond), e.Concurrency, secretText(e.Secret))
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
	fmt.Fprintf(w, "id           %s\nname         %s\nurl          %s\ntypes        %s\nstate        %s\n",
		e.ID, printable.String(e.Name), printable.String(e.URL), typesText(e.Types), printable.String(e.State))
	fmt.Fprintf(w, "shadow       %v\nrate         %s\nconcurrency  %d\nprivate      %s\nsecret       %s\n",
		e.Shadow, rateText(e.RatePerSecond), e.Concurrency, privateText(e.AllowPrivate), secretText(e.Secret))
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
	secret := fs.String("secret", "", "the new secret, whsec_<base64> or whsk_<base64> (default: a new whsec_, printed once)")
	grace := fs.Duration("grace", 24*time.Hour, "how long the old secret keeps signing beside the new one")
	check := func() error { return notNegative(fs, "grace") }
	return endpointCommand("rotate-secret", false, fs, check, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		key, generated, err := secretOrNew(*secret)
		if err != nil {
			return err
		}
		until := time.Now().Add(*grace)
		if err := s.EndpointRotateSecret(ctx, e.ID, key, until); err != nil {
			return err
		}
		fmt.Printf("endpoint %s: new secret %s; the old one signs too until %s\n", e.ID, endpoint.Fingerprint(key), until.Format(time.RFC3339))
		if generated {
			fmt.Printf("secret %s\n(shown once)\n", key)
		}
		return nil
	})
}

func setupEndpointsTest(fs *flag.FlagSet) func(context.Context) error {
	var g guardFlags
	g.register(fs)
	timeout := fs.Duration("timeout", webhook.TimeoutDefault, "timeout of the request, or of the broker's connection and acknowledgement")
	check := func() error { return positive(fs, "timeout") }
	return endpointCommand("test", true, fs, check, func(ctx context.Context, s store.Endpoints, e store.Endpoint) error {
		client, err := g.endpointClient(e, *timeout)
		if err != nil {
			return err
		}
		start := time.Now()
		cfg := endpoint.SinkConfig{Webhook: webhook.Config{Timeout: *timeout}, Client: func(store.Endpoint) *http.Client { return client },
			Kinds: endpointKinds, Logger: slog.New(slog.DiscardHandler)}
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
