package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/postbox-go/postbox/cmd/postbox/internal/dburl"
	"github.com/postbox-go/postbox/keyring"
	"github.com/postbox-go/postbox/postboxtest/netfault"
	"github.com/postbox-go/postbox/store"
	"github.com/postbox-go/postbox/store/postgres"
)

// RandomFailuresDefault is the share of the requests to each endpoint that
// fail at random in endpoints mode, besides the scheduled faults.
const RandomFailuresDefault = 0.2

// destination is where the relays deliver: the single --webhook-url, or
// one webhook endpoint in endpoints mode. Each has its own consumer (with
// its own inbox, since every endpoint receives every event) behind its own
// fault proxy.
type destination struct {
	// index numbers the destination in the applied table.
	index int
	// name is the endpoint's name; empty for the single URL.
	name string
	// id is the endpoint's id in the store; uuid.Nil for the single URL.
	id       uuid.UUID
	consumer *consumer
	proxy    *netfault.Proxy
	// inbox is the store of the consumer's inbox: the run's for the
	// single URL, a schema of the endpoint's own in endpoints mode.
	inbox *postgres.Store
	// closeInbox closes inbox when it is the endpoint's own.
	closeInbox func()
	// log holds the consumer's warnings and errors (JSON): why it
	// answered with an error.
	log *os.File
}

// endpointsMode reports whether the run delivers to endpoints.
func (r *run) endpointsMode() bool { return r.cfg.Endpoints > 0 }

// startDestinations starts the consumer and the proxy of every destination
// (one for the single URL, Config.Endpoints in endpoints mode, each with
// an inbox schema of its own) and, in endpoints mode, registers each one
// with `postbox endpoints add`. It returns the secret of the single URL.
func (r *run) startDestinations(ctx context.Context) (string, error) {
	if !r.endpointsMode() {
		d := &destination{inbox: r.store}
		r.destinations = append(r.destinations, d)
		logger, err := d.openLog(r.logDir)
		if err != nil {
			return "", err
		}
		secret := rand.Text() + rand.Text()
		if d.consumer, err = startConsumer(r.store, r.tables, 0, secret, slowAnswer, 0, logger); err != nil {
			return "", err
		}
		if d.proxy, err = netfault.NewProxy(d.consumer.addr); err != nil {
			return "", err
		}
		return secret, nil
	}
	r.secretsKey = keyring.GenerateKey()
	var err error
	if r.addPrivate, err = r.hasFlag(ctx, "--allow-private", "endpoints", "add"); err != nil {
		return "", err
	}
	for i := range r.cfg.Endpoints {
		d := &destination{index: i, name: "chaos-endpoint-" + strconv.Itoa(i)}
		r.destinations = append(r.destinations, d)
		logger, err := d.openLog(r.logDir)
		if err != nil {
			return "", err
		}
		s, err := dburl.Open(ctx, r.cfg.DB, dburl.Options{Schema: r.inboxSchema(i), ApplicationName: "postbox chaos"})
		if err != nil {
			return "", fmt.Errorf("chaos: --db: %w", err)
		}
		pg, ok := s.Postgres()
		if !ok {
			s.Close()
			return "", errors.New("chaos: --db: want a postgres:// URL")
		}
		d.inbox, d.closeInbox = pg, s.Close
		if _, err := d.inbox.Migrate(ctx); err != nil {
			return "", fmt.Errorf("chaos: migrate the inbox of %s: %w", d.name, err)
		}
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
		if d.consumer, err = startConsumer(d.inbox, r.tables, i, secret, slowAnswer, r.cfg.RandomFailures, logger); err != nil {
			return "", err
		}
		if d.proxy, err = netfault.NewProxy(d.consumer.addr); err != nil {
			return "", err
		}
		if err := r.addEndpoint(ctx, d.name, "http://"+d.proxy.Addr()+"/webhook", secret); err != nil {
			return "", err
		}
	}
	all, err := r.store.EndpointList(ctx)
	if err != nil {
		return "", fmt.Errorf("chaos: list the endpoints: %w", err)
	}
	for _, d := range r.destinations {
		for _, e := range all {
			if e.Name == d.name {
				d.id = e.ID
			}
		}
		if d.id == uuid.Nil {
			return "", fmt.Errorf("chaos: endpoint %s is not in the store after `postbox endpoints add`", d.name)
		}
	}
	return "", nil
}

// closeDestinations stops every consumer and proxy and closes the
// endpoints' inbox stores.
func (r *run) closeDestinations() {
	for _, d := range r.destinations {
		if d.proxy != nil {
			d.proxy.Close()
		}
		if d.consumer != nil {
			d.consumer.close()
		}
		if d.closeInbox != nil {
			d.closeInbox()
		}
		if d.log != nil {
			_ = d.log.Close()
		}
	}
}

// openLog creates the consumer's log in dir, consumer-<index>.log, and
// returns its logger: warnings and errors, JSON.
func (d *destination) openLog(dir string) (*slog.Logger, error) {
	f, err := os.Create(filepath.Join(dir, "consumer-"+strconv.Itoa(d.index)+".log"))
	if err != nil {
		return nil, err
	}
	d.log = f
	return slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn})), nil
}

// inboxSchema is the schema of endpoint i's inbox.
func (r *run) inboxSchema(i int) string { return r.store.Schema() + "_e" + strconv.Itoa(i) }

// dropInboxSchemas drops the endpoints' inbox schemas.
func (r *run) dropInboxSchemas(ctx context.Context) {
	for i := range r.cfg.Endpoints {
		_, _ = r.store.Pool().Exec(ctx, "drop schema if exists "+pgx.Identifier{r.inboxSchema(i)}.Sanitize()+" cascade")
	}
}

// addEndpoint registers an endpoint with `postbox endpoints add`, its
// secret and the run's secrets key given by the environment (not the
// process list), with --allow-private when the binary has it.
func (r *run) addEndpoint(ctx context.Context, name, url, secret string) error {
	args := []string{"endpoints", "add", "--db", r.cfg.DB, "--schema", r.store.Schema(), "--name", name, "--url", url}
	if r.addPrivate {
		args = append(args, "--allow-private")
	}
	cmd := exec.CommandContext(ctx, r.cfg.Executable, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "POSTBOX_SECRET=" + secret, keyring.EnvVar + "=" + r.secretsKey}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chaos: `postbox endpoints add --name %s --url %s`: %v: %s", name, url, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// hasFlag reports whether the help of the postbox subcommand lists flag.
func (r *run) hasFlag(ctx context.Context, flag string, subcommand ...string) (bool, error) {
	out, err := exec.CommandContext(ctx, r.cfg.Executable, append(subcommand, "--help")...).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "usage") {
		return false, fmt.Errorf("chaos: `postbox %s --help`: %v: %s", strings.Join(subcommand, " "), err, bytes.TrimSpace(out))
	}
	re := regexp.MustCompile(`(?m)^\s+-{1,2}` + regexp.QuoteMeta(strings.TrimLeft(flag, "-")) + `(\s|$)`)
	return re.Match(out), nil
}

// relayDestinationArgs are the relays' flags that say where they deliver:
// the single URL (its secret goes by the environment), or endpoints mode,
// with the relay's allowance of private addresses when `postbox endpoints
// add` had none to give.
func (r *run) relayDestinationArgs() []string {
	switch {
	case !r.endpointsMode():
		return []string{"--webhook-url", "http://" + r.destinations[0].proxy.Addr() + "/webhook"}
	case r.addPrivate:
		return []string{"--endpoints"}
	}
	return []string{"--endpoints", "--allow-private-endpoints"}
}

// endpointCounts are the deliveries of each endpoint by status (nil in
// single-URL mode).
func (r *run) endpointCounts(ctx context.Context) ([]store.DeliveryCounts, error) {
	if !r.endpointsMode() {
		return nil, nil
	}
	out := make([]store.DeliveryCounts, len(r.destinations))
	for i, d := range r.destinations {
		c, err := r.store.DeliveryCounts(ctx, d.id)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}
