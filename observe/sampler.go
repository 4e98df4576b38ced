package observe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postbox-go/postbox/store"
)

// Defaults of SamplerConfig.
const (
	SampleEveryDefault = 15 * time.Second
	// SampleCountLimitDefault is where each count of a sample stops (see
	// store.Inspector.StatsUpTo): the gauges read at most this many, and a
	// sample reads at most this many rows of each index.
	SampleCountLimitDefault = 1_000_000
)

// SamplerConfig configures an OutboxSampler. The zero value means every
// default.
type SamplerConfig struct {
	// Every is how often the outbox is sampled (one StatsUpTo query). Default
	// SampleEveryDefault.
	Every time.Duration
	// Timeout bounds each sample; at most Every. Default
	// Every: a count of a large outbox may take seconds (about 0.3 s a
	// million pending rows on a small server), and a sample that times out
	// makes /healthz answer 503.
	Timeout time.Duration
	// CountLimit is where each count stops; a gauge at CountLimit means
	// at least that many. Default SampleCountLimitDefault.
	CountLimit int64
}

// OutboxSampler reads the outbox's counts (store.Inspector.StatsUpTo) in the
// background, once per SamplerConfig.Every and under its Timeout, into the
// gauges postbox_outbox_events{status} and
// postbox_outbox_oldest_pending_age_seconds. A scrape reads the last
// sample and never queries the database. Create it with
// Prometheus.NewOutboxSampler and start it with Run.
type OutboxSampler struct {
	in  store.Inspector
	cfg SamplerConfig

	events     *prometheus.GaugeVec
	oldest     prometheus.Gauge
	errorCount prometheus.Counter
	lastOK     prometheus.Gauge

	mu      sync.Mutex
	sampled time.Time // when the last sample succeeded
	lastErr error     // the last sample's error
}

// NewOutboxSampler registers the outbox gauges on p's registry and returns
// the sampler that fills them from in. Run starts it.
func (p *Prometheus) NewOutboxSampler(in store.Inspector, cfg SamplerConfig) (*OutboxSampler, error) {
	if in == nil {
		return nil, errors.New("observe: NewOutboxSampler: nil Inspector")
	}
	if cfg.Every == 0 {
		cfg.Every = SampleEveryDefault
	}
	if cfg.Every < 0 {
		return nil, fmt.Errorf("observe: SamplerConfig.Every %v is negative", cfg.Every)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = cfg.Every
	}
	switch {
	case cfg.CountLimit == 0:
		cfg.CountLimit = SampleCountLimitDefault
	case cfg.CountLimit < 0:
		return nil, fmt.Errorf("observe: SamplerConfig.CountLimit %d is negative", cfg.CountLimit)
	}
	if cfg.Timeout < 0 || cfg.Timeout > cfg.Every {
		return nil, fmt.Errorf("observe: SamplerConfig.Timeout %v: want between 0 and Every (%v)", cfg.Timeout, cfg.Every)
	}
	s := &OutboxSampler{
		in: in, cfg: cfg,
		events: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "postbox", Name: "outbox_events",
			Help: "Events in the outbox by status (pending, processing, failed), as last sampled."}, []string{"status"}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "postbox", Name: "outbox_oldest_pending_age_seconds",
			Help: "Age of the oldest event waiting to be claimed, as last sampled; 0 when none waits."}),
		errorCount: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "postbox", Name: "outbox_sample_errors_total",
			Help: "Samples of the outbox that failed or timed out."}),
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "postbox", Name: "outbox_last_sample_timestamp_seconds",
			Help: "When the last sample of the outbox succeeded, in unix seconds."}),
		lastErr: errors.New("the outbox has not been sampled yet"),
	}
	for _, c := range []prometheus.Collector{s.events, s.oldest, s.errorCount, s.lastOK} {
		if err := p.reg.Register(c); err != nil {
			return nil, fmt.Errorf("observe: register: %w", err)
		}
	}
	return s, nil
}

// Run samples the outbox at once, then every Every, until ctx ends.
func (s *OutboxSampler) Run(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Every)
	defer tick.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sample reads the outbox's counts once, under the timeout, into the
// gauges, and returns the store's error. Run calls it; a test may too.
func (s *OutboxSampler) Sample(ctx context.Context) error {
	callCtx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	st, err := s.in.StatsUpTo(callCtx, s.cfg.CountLimit)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lastErr = err
		s.errorCount.Inc()
		return err
	}
	s.events.WithLabelValues(store.StatusPending).Set(float64(st.Pending))
	s.events.WithLabelValues(store.StatusProcessing).Set(float64(st.Processing))
	s.events.WithLabelValues(store.StatusFailed).Set(float64(st.Failed))
	s.oldest.Set(st.OldestPendingAge.Seconds())
	s.lastOK.Set(float64(now.UnixNano()) / 1e9)
	s.sampled, s.lastErr = now, nil
	return nil
}

// Answered returns nil when a sample succeeded within the last period
// (Every plus Timeout: the next sample is due and may take that long), and
// otherwise an error that says why the database did not answer.
func (s *OutboxSampler) Answered() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sampled.IsZero() && time.Since(s.sampled) <= s.cfg.Every+s.cfg.Timeout {
		return nil
	}
	why := s.lastErr
	if why == nil {
		why = errors.New("the outbox is not being sampled")
	}
	if s.sampled.IsZero() {
		return fmt.Errorf("database: %w", why)
	}
	return fmt.Errorf("database: no answer since %s: %w", s.sampled.UTC().Format(time.RFC3339), why)
}
