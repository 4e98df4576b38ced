// Package observe exports what the relay and the inbox do as Prometheus
// metrics, through the hooks they offer (relay.Config.Observer,
// inbox.WithObserver), so that the core packages carry no Prometheus
// dependency. Everything registers on a registry the caller gives; nothing
// touches the global one.
//
//	reg := prometheus.NewRegistry()
//	m, err := observe.NewPrometheus(reg, observe.Options{})
//	r, err := relay.New(relay.Config{Store: s.Driver(), Sink: sk, Observer: m.Relay()})
//	ib := inbox.New(s.Driver(), inbox.WithObserver(m.Inbox()))
//
// In endpoints mode, each endpoint's lane reports to m.Endpoint(name), so
// that its delivery series carry endpoint=name, and the outbox relay, whose
// attempts write each event's deliveries, to m.FanOut(): the fan-out is
// counted apart from the deliveries.
//
// The outbox's own state (events by status, the age of the oldest pending
// one) comes from the store, not from the hooks: an OutboxSampler reads
// store.Inspector.StatsUpTo (counts that stop at a limit, a bounded cost
// however large the outbox) in the background, at most once per period and
// under a timeout, and the gauges show its last sample; a scrape never
// queries the database. Handler serves GET /metrics and GET /healthz, as
// `postbox relay --metrics-addr` does.
//
// The metrics, all prefixed postbox_:
//
//	deliveries_total{endpoint,event_type,outcome}  counter: attempts by outcome (delivered, retry, failed, released)
//	delivery_duration_seconds{endpoint}       histogram: the sink's Publish call
//	event_lag_seconds{endpoint}               histogram: created_at to delivered
//	fanout_events_total{event_type,outcome}   counter: the fan-out's attempts (endpoints mode), by outcome
//	fanout_duration_seconds                   histogram: the fan-out's write of deliveries
//	claims_total, claim_errors_total          counters: claim statements (every relay: outbox, fan-out, lanes) that succeeded, failed
//	claimed_events_total                      counter: events claimed
//	claim_duration_seconds                    histogram: claim statements
//	lease_renewals_total                      counter: lease renewal statements that succeeded
//	lease_renewal_errors_total                counter: lease renewal statements that failed
//	leases_lost_total                         counter: events whose lease another relay took before they were sent
//	reclaimed_events_total                    counter: events of expired leases returned to the queue
//	relay_sink_up{endpoint}                   gauge: 0 while a relay finds the sink unreachable (an outage), else 1
//	relay_sink_probes_total{endpoint}         counter: events sent alone to test an unreachable sink
//	inbox_events_total{event_type,outcome}    counter: Process calls by outcome (processed, duplicate, failed, rejected)
//	inbox_handler_duration_seconds            histogram: the inbox handler, inside its transaction
//	outbox_events{status}                     gauge (sampled): pending, processing, failed
//	outbox_oldest_pending_age_seconds         gauge (sampled)
//	outbox_sample_errors_total                counter: samples that failed or timed out
//	outbox_last_sample_timestamp_seconds      gauge: when the last sample succeeded
//
// The endpoint label is the webhook endpoint's name, "" for the single-URL
// relay (and for the fan-out's sink). The event_type label is capped
// (Options.MaxEventTypes, 50 by default, per endpoint): the first types
// seen keep their own series, later ones are counted as "other", so a
// producer inventing types cannot grow the series without bound. The
// endpoint label is capped the same way (Options.MaxEndpoints, 50 by
// default; endpoint "" takes no place under the cap).
package observe
