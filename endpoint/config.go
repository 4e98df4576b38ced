package endpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/sink/webhook"
	"github.com/postbox-go/postbox/store"
)

// Defaults of the Config fields left zero.
const (
	LeaseDefault            = 2 * time.Minute
	PollIntervalDefault     = time.Second
	BackoffMinDefault       = time.Second
	BackoffMaxDefault       = 10 * time.Minute
	MaxAttemptsDefault      = 25
	RejectedAttemptsDefault = 5
	BreakerFailuresDefault  = 5
	BreakerPauseMinDefault  = 5 * time.Second
	BreakerPauseMaxDefault  = 5 * time.Minute
	DisableAfterDefault     = 5 * 24 * time.Hour
	RetentionDefault        = 7 * 24 * time.Hour
	PurgeEveryDefault       = time.Minute
	PurgeBatchDefault       = 1000
	AttemptsFlushDefault    = 200 * time.Millisecond
	AttemptsBatchDefault    = 500
)

// Config configures a Dispatcher. Only Store is required; a zero field
// takes its default, a negative one is refused.
type Config struct {
	// Store holds the endpoints, their deliveries and the attempts log.
	Store store.Endpoints
	// Client sends the requests (postbox relay gives it the SSRF-guarded
	// dialer). Default: a client of its own, with no guard.
	Client *http.Client
	// Owner names this dispatcher in its leases. Default: host name, pid
	// and a random suffix.
	Owner  string
	Logger *slog.Logger
	// Timeout bounds one request (webhook.TimeoutDefault).
	Timeout time.Duration
	// Lease is how long a claimed delivery stays reserved (LeaseDefault).
	Lease time.Duration
	// PollInterval is how often the dispatcher looks for deliveries due
	// to its idle endpoints, in one query for all (PollIntervalDefault);
	// Wake makes them look at once.
	PollInterval time.Duration
	// RefreshEvery is how often the endpoints are read again
	// (RefreshEveryDefault).
	RefreshEvery time.Duration
	// BackoffMin and BackoffMax bound the exponential backoff between the
	// attempts of one delivery (BackoffMinDefault, BackoffMaxDefault).
	BackoffMin, BackoffMax time.Duration
	// MaxAttempts is the attempts of one delivery before it fails (a
	// shadow endpoint's is dropped) (MaxAttemptsDefault).
	MaxAttempts int
	// RejectedAttempts is the attempts of a delivery the endpoint refuses
	// (3xx, 4xx other than 429 and 410) (RejectedAttemptsDefault).
	RejectedAttempts int
	// BreakerFailures consecutive failed attempts open an endpoint's
	// breaker (BreakerFailuresDefault). Its first pause is BreakerPauseMin,
	// doubled at each failed probe up to BreakerPauseMax.
	BreakerFailures                  int
	BreakerPauseMin, BreakerPauseMax time.Duration
	// DisableAfter: an endpoint whose attempts all failed for this long is
	// disabled automatically (DisableAfterDefault, 5 days).
	DisableAfter time.Duration
	// Retention is how long attempts and delivered rows are kept
	// (RetentionDefault, 7 days); they are deleted every PurgeEvery, at
	// most PurgeBatch rows per statement.
	Retention  time.Duration
	PurgeEvery time.Duration
	PurgeBatch int
	// AttemptsFlush and AttemptsBatch: attempts are written together,
	// every AttemptsFlush or once AttemptsBatch are waiting.
	AttemptsFlush time.Duration
	AttemptsBatch int
}

func (c Config) withDefaults() (Config, error) {
	if c.Store == nil {
		return c, errors.New("endpoint: Config.Store is nil")
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"Timeout", &c.Timeout, webhook.TimeoutDefault}, {"Lease", &c.Lease, LeaseDefault},
		{"PollInterval", &c.PollInterval, PollIntervalDefault}, {"RefreshEvery", &c.RefreshEvery, RefreshEveryDefault},
		{"BackoffMin", &c.BackoffMin, BackoffMinDefault}, {"BackoffMax", &c.BackoffMax, BackoffMaxDefault},
		{"BreakerPauseMin", &c.BreakerPauseMin, BreakerPauseMinDefault}, {"BreakerPauseMax", &c.BreakerPauseMax, BreakerPauseMaxDefault},
		{"DisableAfter", &c.DisableAfter, DisableAfterDefault}, {"Retention", &c.Retention, RetentionDefault},
		{"PurgeEvery", &c.PurgeEvery, PurgeEveryDefault}, {"AttemptsFlush", &c.AttemptsFlush, AttemptsFlushDefault},
	}
	for _, d := range durations {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			return c, fmt.Errorf("endpoint: Config.%s %v must not be negative", d.name, *d.v)
		}
	}
	ints := []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxAttempts", &c.MaxAttempts, MaxAttemptsDefault}, {"RejectedAttempts", &c.RejectedAttempts, RejectedAttemptsDefault},
		{"BreakerFailures", &c.BreakerFailures, BreakerFailuresDefault}, {"PurgeBatch", &c.PurgeBatch, PurgeBatchDefault},
		{"AttemptsBatch", &c.AttemptsBatch, AttemptsBatchDefault},
	}
	for _, n := range ints {
		switch {
		case *n.v == 0:
			*n.v = n.def
		case *n.v < 0:
			return c, fmt.Errorf("endpoint: Config.%s %d must not be negative", n.name, *n.v)
		}
	}
	if c.BackoffMax < c.BackoffMin {
		return c, fmt.Errorf("endpoint: Config.BackoffMax %v is less than BackoffMin %v", c.BackoffMax, c.BackoffMin)
	}
	if c.Lease <= c.Timeout {
		return c, fmt.Errorf("endpoint: Config.Lease %v must be longer than Timeout %v", c.Lease, c.Timeout)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Owner == "" {
		host, _ := os.Hostname()
		c.Owner = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), uuid.NewString()[:8])
	}
	return c, nil
}
