package observe

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// walSlotReadTimeout bounds the query a scrape of the slot's gauges runs.
const walSlotReadTimeout = 5 * time.Second

// WALSlotState reads a replication slot: the WAL it retains, in bytes, and
// whether a relay streams it; exists is false when there is no such slot.
// The PostgreSQL store's WAL.State gives it.
type WALSlotState func(ctx context.Context) (retainedBytes int64, active, exists bool, err error)

// NewWALSlotCollector returns the gauges of WAL mode's replication slot,
// read at each scrape: postbox_wal_slot_retained_bytes, the WAL the slot
// keeps the server from recycling (it grows while no relay streams the
// slot: alert on it), and postbox_wal_slot_active, 1 while a relay streams
// it. Both carry the slot's name in the slot label; neither is exported
// while the slot does not exist or cannot be read.
func NewWALSlotCollector(slot string, state WALSlotState) prometheus.Collector {
	labels := prometheus.Labels{"slot": slot}
	return &walSlotCollector{
		state: state,
		retained: prometheus.NewDesc("postbox_wal_slot_retained_bytes",
			"WAL retained by the relay's replication slot (WAL mode), in bytes: from the position it last confirmed to the server's current one.",
			nil, labels),
		active: prometheus.NewDesc("postbox_wal_slot_active",
			"1 while a relay streams the replication slot (WAL mode), 0 otherwise.", nil, labels),
	}
}

type walSlotCollector struct {
	state            WALSlotState
	retained, active *prometheus.Desc
}

func (c *walSlotCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.retained
	ch <- c.active
}

func (c *walSlotCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), walSlotReadTimeout)
	defer cancel()
	retained, active, exists, err := c.state(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.retained, err)
		return
	}
	if !exists {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.retained, prometheus.GaugeValue, float64(retained))
	activeValue := 0.0
	if active {
		activeValue = 1
	}
	ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, activeValue)
}
