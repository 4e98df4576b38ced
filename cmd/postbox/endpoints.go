package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/endpoint"
	"github.com/postbox-go/postbox/internal/dburl"
	"github.com/postbox-go/postbox/internal/printable"
	"github.com/postbox-go/postbox/signature"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// endpointsCommands are the subcommands of "postbox endpoints".
var endpointsCommands = map[string]command{
	"add":           {summary: "add a webhook endpoint: prints its id and, when generated, its secret (once)", setup: setupEndpointsAdd},
	"list":          {summary: "list the endpoints (secrets as fingerprints)", setup: setupEndpointsList},
	"show":          {summary: "show one endpoint and its deliveries by status", setup: setupEndpointsShow, args: "ID"},
	"enable":        {summary: "enable an endpoint: its waiting deliveries go at once", setup: endpointStateCommand(store.EndpointEnabled), args: "ID"},
	"disable":       {summary: "disable an endpoint: no deliveries are made nor written for it", setup: endpointStateCommand(store.EndpointDisabled), args: "ID"},
	"remove":        {summary: "remove an endpoint with its deliveries and attempts", setup: setupEndpointsRemove, args: "ID"},
	"rotate-secret": {summary: "give an endpoint a new secret; the old one keeps signing for --grace", setup: setupEndpointsRotate, args: "ID"},
	"retry":         {summary: "send an endpoint's failed deliveries (its dead letters) back to the queue, as never attempted", setup: setupEndpointsRetry, args: "ID"},
	"test":          {summary: "send a test event (postbox.test) to an endpoint now, and print its answer", setup: setupEndpointsTest, args: "ID"},
	"attempts":      {summary: "list an endpoint's latest delivery attempts", setup: setupEndpointsAttempts, args: "ID"},
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
	return endpointsOf(s), s.Close, nil
}

// endpointsOf is the endpoints store of an opened database.
func endpointsOf(s *dburl.Store) store.Endpoints {
	if s.Postgres != nil {
		return s.Postgres
	}
	return s.SQLite
}

// endpointArg reads the one positional argument, an endpoint id.
func endpointArg(fs *flag.FlagSet) (uuid.UUID, error) {
	if fs.NArg() != 1 {
		return uuid.Nil, fmt.Errorf("%w: give one endpoint id", errUsage)
	}
	id, err := uuid.Parse(fs.Arg(0))
	if err != nil {
		return uuid.Nil, fmt.Errorf("%w: %q is not an endpoint id (a UUID)", errUsage, fs.Arg(0))
	}
	return id, nil
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

// endpointCommand is a subcommand that acts on one endpoint, given by id:
// run gets the store, opened read-only or not, and the id. check, when not
// nil, checks the subcommand's flags before anything is opened.
func endpointCommand(command string, readOnly bool, fs *flag.FlagSet, check func() error, run func(ctx context.Context, s store.Endpoints, id uuid.UUID) error) func(context.Context) error {
	var db dbFlags
	db.register(fs)
	return func(ctx context.Context) error {
		if check != nil {
			if err := check(); err != nil {
				return err
			}
		}
		id, err := endpointArg(fs)
		if err != nil {
			return err
		}
		s, closeDB, err := endpointsStore(ctx, &db, command, readOnly)
		if err != nil {
			return err
		}
		defer closeDB()
		return notFound(id, run(ctx, s, id))
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
	var rate rateFlag
	fs.Var(&rate, "rate", "most deliveries started per second, R/s (0/s: no limit)")
	var (
		rawURL      = fs.String("url", "", "the endpoint's URL (http or https)")
		name        = fs.String("name", "", "a name for people")
		types       = fs.String("types", "", "comma-separated globs on the event type, such as 'order.*,payment.succeeded' (empty: every event)")
		secret      = fs.String("secret", "", "signing secret whsec_<base64> (HMAC, v1), or an ed25519 secret key whsk_<base64> (v1a, see postbox keys generate; the endpoint verifies with its whpk_) (default: a new whsec_, printed once)")
		concurrency = fs.Int("concurrency", 8, "most deliveries in flight to the endpoint at once")
		shadow      = fs.Bool("shadow", false, "a shadow endpoint: receives a copy; its failures are dropped, never dead letters")
	)
	return func(ctx context.Context) error {
		if err := required("url", *rawURL); err != nil {
			return err
		}
		if err := checkEndpointURL(*rawURL); err != nil {
			return err
		}
		filter := store.SplitTypes(*types)
		if err := endpoint.ValidateTypes(filter); err != nil {
			return fmt.Errorf("%w: --types: %v", errUsage, err)
		}
		if *concurrency < 1 {
			return fmt.Errorf("%w: --concurrency %d: at least 1", errUsage, *concurrency)
		}
		key, generated, err := secretOrNew(*secret)
		if err != nil {
			return err
		}
		s, closeDB, err := endpointsStore(ctx, &db, "add", false)
		if err != nil {
			return err
		}
		defer closeDB()
		e, err := s.EndpointCreate(ctx, store.Endpoint{Name: *name, URL: *rawURL, Types: filter, Secret: key,
			RatePerSecond: float64(rate), Concurrency: *concurrency, Shadow: *shadow})
		if err != nil {
			return err
		}
		fmt.Printf("endpoint %s added\n", e.ID)
		if generated {
			fmt.Printf("secret %s\n(shown once: give it to the receiver, it verifies the signatures with it)\n", key)
		}
		return nil
	}
}

// checkEndpointURL refuses what is not an absolute http or https URL.
func checkEndpointURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: --url %q: want an absolute http:// or https:// URL", errUsage, redactSinkURL(raw))
	}
	return nil
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
	Secret              string                `json:"secret_fingerprint"`
	PreviousSecret      string                `json:"previous_secret_fingerprint,omitempty"`
	PreviousSecretUntil *time.Time            `json:"previous_secret_until,omitempty"`
	FailingSince        *time.Time            `json:"failing_since,omitempty"`
	CreatedAt           time.Time             `json:"created_at"`
	Deliveries          *store.DeliveryCounts `json:"deliveries,omitempty"`
}

func toJSON(e store.Endpoint) endpointJSON {
	j := endpointJSON{ID: e.ID, Name: e.Name, URL: redactSinkURL(e.URL), Types: e.Types, State: e.State, Shadow: e.Shadow,
		RatePerSecond: e.RatePerSecond, Concurrency: e.Concurrency, Secret: endpoint.Fingerprint(e.Secret), CreatedAt: e.CreatedAt}
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
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", e.ID, printable.String(e.Name), printable.String(state), printable.String(e.URL), typesText(e.Types),
				rateText(e.RatePerSecond), e.Concurrency, e.Secret)
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
	return endpointCommand("show", true, fs, nil, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
		e, err := s.EndpointGet(ctx, id)
		if err != nil {
			return err
		}
		counts, err := s.DeliveryCounts(ctx, id)
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
	fmt.Fprintf(w, "shadow       %v\nrate         %s\nconcurrency  %d\nsecret       %s\n",
		e.Shadow, rateText(e.RatePerSecond), e.Concurrency, printable.String(e.Secret))
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

// endpointStateCommand is enable or disable.
func endpointStateCommand(state string) func(fs *flag.FlagSet) func(context.Context) error {
	return func(fs *flag.FlagSet) func(context.Context) error {
		return endpointCommand(state, false, fs, nil, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
			if err := s.EndpointSetState(ctx, id, state); err != nil {
				return err
			}
			fmt.Printf("endpoint %s %s\n", id, state)
			return nil
		})
	}
}

func setupEndpointsRemove(fs *flag.FlagSet) func(context.Context) error {
	dryRun := fs.Bool("dry-run", false, "remove nothing: say which endpoint and how many deliveries would go")
	return endpointCommand("remove", false, fs, nil, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
		if *dryRun {
			return previewRemove(ctx, os.Stdout, s, id)
		}
		if err := s.EndpointDelete(ctx, id); err != nil {
			return err
		}
		fmt.Printf("endpoint %s removed, with its deliveries and attempts\n", id)
		return nil
	})
}

// previewRemove is remove --dry-run: the endpoint and what would be
// removed with it.
func previewRemove(ctx context.Context, w io.Writer, s store.Endpoints, id uuid.UUID) error {
	e, err := s.EndpointGet(ctx, id)
	if err != nil {
		return err
	}
	c, err := s.DeliveryCounts(ctx, id)
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
	return endpointCommand("retry", false, fs, nil, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
		if _, err := s.EndpointGet(ctx, id); err != nil {
			return err
		}
		total := 0
		for {
			n, err := s.DeliveryRetryFailed(ctx, id, store.FailedBatchMax)
			total += n
			if err != nil {
				return fmt.Errorf("%d failed deliveries sent back, then: %w", total, err)
			}
			if n < store.FailedBatchMax {
				break
			}
		}
		fmt.Printf("endpoint %s: %d failed deliveries sent back to the queue\n", id, total)
		return nil
	})
}

func setupEndpointsRotate(fs *flag.FlagSet) func(context.Context) error {
	secret := fs.String("secret", "", "the new secret, whsec_<base64> or whsk_<base64> (default: a new whsec_, printed once)")
	grace := fs.Duration("grace", 24*time.Hour, "how long the old secret keeps signing beside the new one")
	check := func() error { return notNegative(fs, "grace") }
	return endpointCommand("rotate-secret", false, fs, check, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
		key, generated, err := secretOrNew(*secret)
		if err != nil {
			return err
		}
		until := time.Now().Add(*grace)
		if err := s.EndpointRotateSecret(ctx, id, key, until); err != nil {
			return err
		}
		fmt.Printf("endpoint %s: new secret %s; the old one signs too until %s\n", id, endpoint.Fingerprint(key), until.Format(time.RFC3339))
		if generated {
			fmt.Printf("secret %s\n(shown once)\n", key)
		}
		return nil
	})
}

func setupEndpointsTest(fs *flag.FlagSet) func(context.Context) error {
	var g guardFlags
	g.register(fs)
	timeout := fs.Duration("timeout", webhook.TimeoutDefault, "timeout of the request")
	check := func() error { return positive(fs, "timeout") }
	return endpointCommand("test", true, fs, check, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
		e, err := s.EndpointGet(ctx, id)
		if err != nil {
			return err
		}
		client, _, err := g.client(*timeout)
		if err != nil {
			return err
		}
		wh, err := webhook.New(webhook.Config{URL: e.URL, Secrets: e.Secrets(time.Now()), Timeout: *timeout, Client: client})
		if err != nil {
			return err
		}
		ev := postbox.Event{ID: postbox.NewID(), EventType: "postbox.test", AggregateType: "endpoint",
			AggregateID: e.ID.String(), Payload: []byte(`{"test":true}`)}
		start := time.Now()
		if err := wh.Publish(ctx, &sink.Message{Event: ev, Attempt: 1}); err != nil {
			return fmt.Errorf("test event %s to %s failed after %v: %w", ev.ID, redactSinkURL(e.URL), time.Since(start).Round(time.Millisecond), err)
		}
		fmt.Printf("test event %s delivered to %s in %v\n", ev.ID, printable.String(redactSinkURL(e.URL)), time.Since(start).Round(time.Millisecond))
		return nil
	})
}

func setupEndpointsAttempts(fs *flag.FlagSet) func(context.Context) error {
	asJSON := fs.Bool("json", false, "print JSON")
	limit := fs.Int("limit", 50, "most attempts listed, the most recent first")
	check := func() error { return positive(fs, "limit") }
	return endpointCommand("attempts", true, fs, check, func(ctx context.Context, s store.Endpoints, id uuid.UUID) error {
		if _, err := s.EndpointGet(ctx, id); err != nil {
			return err
		}
		attempts, err := s.AttemptList(ctx, id, *limit)
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
		fmt.Fprintln(w, "AT\tEVENT\tTYPE\tATTEMPT\tSTATUS\tDURATION\tERROR")
		for _, a := range attempts {
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%v\t%s\n", a.At.Format(time.RFC3339), a.EventID, oneLine(a.EventType, 100), a.Attempt,
				a.StatusCode, a.Duration.Round(time.Millisecond), oneLine(a.Error, 100))
		}
		return w.Flush()
	})
}
