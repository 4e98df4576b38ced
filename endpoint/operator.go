package endpoint

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox"
	"github.com/postbox-go/postbox/sink"
	"github.com/postbox-go/postbox/store"
)

// Operator events are postbox's news about its own endpoints and dead
// letters: the supervisor writes them into an outbox
// (SupervisorConfig.OperatorEvents), the one the relay in endpoints mode
// drains, so that they reach the endpoints subscribed to them (a chat's
// or an on-call service's webhook) as every event does: signed, retried,
// logged. Their payload is an OperatorEvent in JSON.
const (
	// EventEndpointFailing: every attempt to an endpoint has failed for
	// OperatorEventsConfig.FailingAfter (written once per run of
	// failures, not at the first failure).
	EventEndpointFailing = "postbox.endpoint.failing"
	// EventEndpointRecovered: an endpoint that had failed for
	// FailingAfter at least (an EventEndpointFailing was due) answers
	// again.
	EventEndpointRecovered = "postbox.endpoint.recovered"
	// EventEndpointDisabled: an endpoint was disabled
	// (store.EndpointAutoDisabled) for failing SupervisorConfig.DisableAfter.
	EventEndpointDisabled = "postbox.endpoint.disabled"
	// EventDeadLettersGrew: a dead-letter group (the failed events of the
	// outbox, or the failed deliveries of one endpoint, that share an
	// error fingerprint, as store.DeadLetters.FailedGroups groups them)
	// reached another multiple of OperatorEventsConfig.DeadLetters.
	EventDeadLettersGrew = "postbox.deadletters.grew"

	// OperatorEventPrefix begins the type of every operator event. The
	// fan-out sends an event whose type begins with it only to the
	// endpoints whose types name it with a glob that begins with it too
	// ("postbox.endpoint.*", "postbox.*"): never to an endpoint without
	// types nor to "*" (see Matches), and never an event about an
	// endpoint to that endpoint.
	OperatorEventPrefix = "postbox."

	// AggregateEndpoint is the AggregateType of the postbox.endpoint.*
	// events; their AggregateID is the endpoint's id.
	AggregateEndpoint = "postbox.endpoint"
	// AggregateDeadLetters is the AggregateType of
	// postbox.deadletters.grew; its AggregateID is "outbox/GROUP" for a
	// group of the outbox, "ENDPOINT-ID/GROUP" for an endpoint's (GROUP:
	// store.FailureGroup.ID).
	AggregateDeadLetters = "postbox.deadletters"
)

// Defaults of the OperatorEventsConfig fields left zero.
const (
	FailingAfterDefault = 5 * time.Minute
	DeadLettersDefault  = 100
	CheckEveryDefault   = time.Minute
)

// OperatorEventsConfig configures the operator events of a Supervisor
// (SupervisorConfig.OperatorEvents). Only Outbox is required; a zero field
// takes its default, a negative one is refused (but DeadLetters).
//
// Each event is written once per transition, whichever of several relays
// running the same endpoints sees it: its id (a UUIDv5) and its DedupKey
// are derived from what it is about (the endpoint, the transition and the
// start of the run of failures; the group and the multiple it reached),
// so that the outbox refuses the copies (postbox.ErrDuplicate). The key
// stays refused for the relay's dedup window once the event is delivered
// (relay.Config.DedupWindow, 24 hours by default). Shadow endpoints never
// alert: no event is written about them.
type OperatorEventsConfig struct {
	// Outbox receives the events (Enqueue) and holds the dead letters
	// whose groups are checked (FailedGroups): the outbox the relay in
	// endpoints mode drains into the FanOut. Required.
	Outbox store.Outbox
	// FailingAfter: an endpoint whose attempts have all failed for this
	// long gets an EventEndpointFailing (FailingAfterDefault), and one
	// that answers again after failing for this long an
	// EventEndpointRecovered.
	FailingAfter time.Duration
	// DeadLetters: a dead-letter group gets an EventDeadLettersGrew each
	// time its count reaches another multiple of it (DeadLettersDefault;
	// negative: no such events). The groups a relay finds when it starts
	// are the base: their growth from then on is reported. A group is
	// counted among the most recent 100 × DeadLetters dead letters of its
	// outbox or endpoint (at least 1,000, at most
	// store.FailedGroupsScanDefault).
	DeadLetters int
	// CheckEvery is how often the dead-letter groups are checked (one
	// store.DeadLetters.FailedGroups for the outbox and one for each
	// enabled endpoint), and events whose write failed written again
	// (CheckEveryDefault).
	CheckEvery time.Duration
}

// withDefaults fills the zero fields of c and validates the rest, with an
// error that names the field.
func (c OperatorEventsConfig) withDefaults() (OperatorEventsConfig, error) {
	if c.Outbox == nil {
		return c, errors.New("endpoint: SupervisorConfig.OperatorEvents.Outbox is required: the outbox the events are written into")
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"FailingAfter", &c.FailingAfter, FailingAfterDefault},
		{"CheckEvery", &c.CheckEvery, CheckEveryDefault},
	} {
		switch {
		case *d.v == 0:
			*d.v = d.def
		case *d.v < 0:
			return c, fmt.Errorf("endpoint: SupervisorConfig.OperatorEvents.%s %v is negative", d.name, *d.v)
		}
	}
	if c.DeadLetters == 0 {
		c.DeadLetters = DeadLettersDefault
	}
	return c, nil
}

// String describes the events c writes and their thresholds, the
// defaults of its zero fields applied, for a start line.
func (c OperatorEventsConfig) String() string {
	grew := fmt.Sprintf("%s each %d dead letters of a group (checked every %v)", EventDeadLettersGrew,
		cmp.Or(c.DeadLetters, DeadLettersDefault), cmp.Or(c.CheckEvery, CheckEveryDefault))
	if c.DeadLetters < 0 {
		grew = EventDeadLettersGrew + " off"
	}
	return fmt.Sprintf("%s after %v of failures, %s, %s; %s", EventEndpointFailing, cmp.Or(c.FailingAfter, FailingAfterDefault),
		EventEndpointRecovered, EventEndpointDisabled, grew)
}

// OperatorEvent is the payload of an operator event (JSON). The fields
// that do not apply to an event's type are left out.
type OperatorEvent struct {
	// Type is the event's type (EventEndpointFailing, ...).
	Type string `json:"type"`
	// Text is a one-line summary for people, such as a chat shows.
	Text string `json:"text"`
	// At is when the relay saw the transition, or found the group grown.
	At time.Time `json:"at"`
	// Endpoint is the endpoint the event is about; absent for a
	// dead-letter group of the outbox.
	Endpoint *OperatorEndpoint `json:"endpoint,omitempty"`
	// State is the endpoint's state: "enabled", or "auto_disabled" in an
	// EventEndpointDisabled.
	State string `json:"state,omitempty"`
	// FailingSince is when the endpoint's run of failures began
	// (store.Endpoint.FailingSince); absent in EventDeadLettersGrew.
	FailingSince *time.Time `json:"failing_since,omitempty"`
	// LastError is the error of the last failed attempt
	// (EventEndpointFailing, EventEndpointDisabled) or the group's latest
	// (EventDeadLettersGrew): its text cleaned (store.CleanErrorText),
	// without the endpoint URL's secrets, at most 1 KiB.
	LastError string `json:"last_error,omitempty"`
	// Deliveries counts the endpoint's deliveries when the event was
	// written.
	Deliveries *OperatorDeliveries `json:"deliveries,omitempty"`
	// Group is the dead-letter group of an EventDeadLettersGrew.
	Group *OperatorGroup `json:"group,omitempty"`
	// ConsolePath is the console's page about it, a path to append to
	// the console's address: "/endpoints/ID", or "/failed" for the
	// outbox's dead letters.
	ConsolePath string `json:"console_path"`
}

// OperatorEndpoint is the endpoint an operator event is about.
type OperatorEndpoint struct {
	ID   uuid.UUID `json:"id"`
	Name string    `json:"name"`
	// URL is the endpoint's URL as postbox status shows it (DescribeURL):
	// no password, and no path or query, where a receiver's token may be
	// (a chat service's incoming-webhook URL).
	URL string `json:"url"`
}

// OperatorDeliveries counts one endpoint's deliveries by status
// (store.DeliveryCounts).
type OperatorDeliveries struct {
	Pending    int64 `json:"pending"`
	Processing int64 `json:"processing"`
	Failed     int64 `json:"failed"`
}

// OperatorGroup is a dead-letter group (store.FailureGroup) of the outbox
// or of an endpoint.
type OperatorGroup struct {
	// Of is "outbox" or "endpoint": whose dead letters they are.
	Of string `json:"of"`
	// ID names the group (store.FailureGroup.ID): postbox failed retry
	// --group ID.
	ID string `json:"id"`
	// Fingerprint is what the group's errors have in common
	// (store.ErrorFingerprint).
	Fingerprint string `json:"fingerprint"`
	// Count is how many dead letters the group holds; Threshold is
	// OperatorEventsConfig.DeadLetters, of which Count reached another
	// multiple.
	Count     int `json:"count"`
	Threshold int `json:"threshold"`
	// FirstSeen and LastSeen are the earliest and latest failure times in
	// the group.
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
}

// OperatorEventCounts counts the operator events a supervisor wrote, by
// type (not those another relay had written first).
type OperatorEventCounts struct {
	Failing, Recovered, Disabled, DeadLettersGrew int64
}

// IsOperatorEvent reports whether eventType is an operator event's (or
// any type postbox keeps to itself): it begins with OperatorEventPrefix.
func IsOperatorEvent(eventType string) bool {
	return strings.HasPrefix(eventType, OperatorEventPrefix)
}

// operatorSubject returns the endpoint an operator event is about
// (uuid.Nil for another event, or one about the outbox): the fan-out
// never sends it to that endpoint.
func operatorSubject(ev postbox.Event) uuid.UUID {
	if !IsOperatorEvent(ev.EventType) {
		return uuid.Nil
	}
	var id string
	switch ev.AggregateType {
	case AggregateEndpoint:
		id = ev.AggregateID
	case AggregateDeadLetters:
		id, _, _ = strings.Cut(ev.AggregateID, "/")
	default:
		return uuid.Nil
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return uuid.Nil
	}
	return u
}

// operatorNamespace is the UUIDv5 namespace of operator events' ids.
var operatorNamespace = uuid.MustParse("b304469a-73a2-4870-905f-89d0ee805e07")

// Bounds of the operator events' writing.
const (
	// operatorErrorMax bounds OperatorEvent.LastError, in bytes.
	operatorErrorMax = 1024
	// operatorUnwrittenMax bounds the events waiting to be written (the
	// outbox unreachable): the oldest are dropped, and logged.
	operatorUnwrittenMax = 1000
	// operatorFlushTimeout bounds the last write of the events waiting
	// when the supervisor stops.
	operatorFlushTimeout = 5 * time.Second
)

// transition is a change of an endpoint's health, reported by its lane.
type transition struct {
	typ       string
	e         store.Endpoint
	since, at time.Time
	lastErr   string
}

// groupSeen is what a check found of a dead-letter group.
type groupSeen struct {
	// reached is the multiple of DeadLetters its count reached; lastSeen
	// its latest failure.
	reached  int
	lastSeen time.Time
}

// operatorEvents writes one supervisor's operator events: the endpoints'
// transitions their lanes report (queue), written by run, and the growth
// of the dead-letter groups run checks every CheckEvery.
type operatorEvents struct {
	cfg   OperatorEventsConfig
	store store.Endpoints
	kinds []sink.URLKind
	log   *slog.Logger
	wake  chan struct{}

	mu     sync.Mutex
	queued []transition

	// What follows is run's own. unwritten are the events whose write
	// failed (the outbox unreachable), written again at the next wake-up
	// or check.
	unwritten []postbox.Event
	// groups are the dead-letter groups found at the last check, by
	// "outbox/GROUP" or "ENDPOINT-ID/GROUP"; checked is set once they were
	// checked (the first check's counts are the base).
	groups  map[string]groupSeen
	checked bool

	failing, recovered, disabled, grew atomic.Int64
}

func newOperatorEvents(cfg SupervisorConfig) *operatorEvents {
	if cfg.OperatorEvents == nil {
		return nil
	}
	return &operatorEvents{cfg: *cfg.OperatorEvents, store: cfg.Store, kinds: cfg.Kinds, log: cfg.Logger,
		wake: make(chan struct{}, 1), groups: map[string]groupSeen{}}
}

// describe says what o writes, for the supervisor's start line.
func (o *operatorEvents) describe() string {
	if o == nil {
		return DescribeOperatorEvents(nil)
	}
	return DescribeOperatorEvents(&o.cfg)
}

// DescribeOperatorEvents says what the operator events configured by c
// are, for a start line: "off" when c is nil, else "on: " and c.String().
func DescribeOperatorEvents(c *OperatorEventsConfig) string {
	if c == nil {
		return "off"
	}
	return "on: " + c.String()
}

// counts returns the events written so far, by type.
func (o *operatorEvents) counts() OperatorEventCounts {
	if o == nil {
		return OperatorEventCounts{}
	}
	return OperatorEventCounts{Failing: o.failing.Load(), Recovered: o.recovered.Load(), Disabled: o.disabled.Load(), DeadLettersGrew: o.grew.Load()}
}

// queue has t written; run writes it.
func (o *operatorEvents) queue(t transition) {
	o.mu.Lock()
	if len(o.queued) >= operatorUnwrittenMax {
		o.log.Error("operator event dropped: too many wait to be written", "event_type", o.queued[0].typ, "endpoint", o.queued[0].e.ID)
		o.queued = o.queued[1:]
	}
	o.queued = append(o.queued, t)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run writes the events queued as they come, and checks the dead-letter
// groups every CheckEvery, until ctx ends; then it writes what is left,
// within operatorFlushTimeout. A write under way when ctx ends is not cut
// short (each is bounded by healthCallTimeout): cut, it could not tell
// whether the event was written.
func (o *operatorEvents) run(ctx context.Context) {
	writes := context.WithoutCancel(ctx)
	tick := time.NewTicker(o.cfg.CheckEvery)
	defer tick.Stop()
	o.checkDeadLetters(ctx, writes)
	for {
		select {
		case <-ctx.Done():
			last, cancel := context.WithTimeout(writes, operatorFlushTimeout)
			o.flush(last)
			cancel()
			if n := len(o.unwritten); n > 0 {
				o.log.Error("operator events not written: the outbox could not be reached before the relay stopped", "events", n)
			}
			return
		case <-o.wake:
			o.flush(writes)
		case <-tick.C:
			o.flush(writes)
			o.checkDeadLetters(ctx, writes)
		}
	}
}

// flush builds the events of the transitions queued and writes them, with
// those whose write failed before.
func (o *operatorEvents) flush(ctx context.Context) {
	o.mu.Lock()
	queued := o.queued
	o.queued = nil
	o.mu.Unlock()
	for _, t := range queued {
		o.keep(o.endpointEvent(ctx, t))
	}
	o.write(ctx)
}

// keep adds ev to the events to write, dropping the oldest beyond
// operatorUnwrittenMax.
func (o *operatorEvents) keep(ev postbox.Event) {
	if len(o.unwritten) >= operatorUnwrittenMax {
		o.log.Error("operator event dropped: too many wait to be written", "event_type", o.unwritten[0].EventType, "aggregate_id", o.unwritten[0].AggregateID)
		o.unwritten = o.unwritten[1:]
	}
	o.unwritten = append(o.unwritten, ev)
}

// write writes the events waiting, one at a time, until one fails: that
// one and those after it are kept for the next time (the outbox is
// likely unreachable: one write bounded by healthCallTimeout is all a
// flush waits for it). One already written (by another relay, or by this
// one before a restart) counts as written.
func (o *operatorEvents) write(ctx context.Context) {
	for len(o.unwritten) > 0 && ctx.Err() == nil {
		ev := o.unwritten[0]
		callCtx, cancel := context.WithTimeout(ctx, healthCallTimeout)
		err := o.cfg.Outbox.Enqueue(callCtx, ev)
		cancel()
		switch {
		case err == nil:
			o.count(ev.EventType).Add(1)
			o.log.Info("operator event written", "event_type", ev.EventType, "event_id", ev.ID, "aggregate_id", ev.AggregateID)
		case errors.Is(err, postbox.ErrDuplicate):
			o.log.Debug("operator event already written (by another relay)", "event_type", ev.EventType, "event_id", ev.ID, "aggregate_id", ev.AggregateID)
		default:
			if ctx.Err() == nil {
				o.log.Warn("writing operator events failed; they are written again at the next check", "events", len(o.unwritten), "error", err)
			}
			return
		}
		o.unwritten = o.unwritten[1:]
	}
}

// count is the counter of events of eventType.
func (o *operatorEvents) count(eventType string) *atomic.Int64 {
	switch eventType {
	case EventEndpointFailing:
		return &o.failing
	case EventEndpointRecovered:
		return &o.recovered
	case EventEndpointDisabled:
		return &o.disabled
	}
	return &o.grew
}

// endpointEvent is the event of t: its id and dedup key derived from its
// type, its endpoint and the start of the run of failures, so that every
// relay that sees the transition writes the same event.
func (o *operatorEvents) endpointEvent(ctx context.Context, t transition) postbox.Event {
	since := t.since.UTC()
	p := OperatorEvent{Type: t.typ, At: t.at.UTC(), Endpoint: o.operatorEndpoint(t.e), State: store.EndpointEnabled,
		FailingSince: &since, LastError: o.cleanError(t.e.URL, t.lastErr), Deliveries: o.deliveries(ctx, t.e.ID),
		ConsolePath: "/endpoints/" + t.e.ID.String()}
	name := endpointLabel(t.e)
	switch t.typ {
	case EventEndpointFailing:
		p.Text = fmt.Sprintf("postbox: endpoint %s has failed every attempt for %v (since %s); its deliveries wait and are retried",
			name, t.at.Sub(t.since).Round(time.Second), since.Format(time.RFC3339))
	case EventEndpointRecovered:
		p.Text = fmt.Sprintf("postbox: endpoint %s answers again, after failing for %v", name, t.at.Sub(t.since).Round(time.Second))
	case EventEndpointDisabled:
		p.State = store.EndpointAutoDisabled
		p.Text = fmt.Sprintf("postbox: endpoint %s disabled after failing every attempt for %v; its deliveries wait: postbox endpoints enable %s delivers them",
			name, t.at.Sub(t.since).Round(time.Second), t.e.ID)
	}
	key := fmt.Sprintf("%s/%s/%d", t.typ, t.e.ID, t.since.UnixMicro())
	return operatorEvent(key, AggregateEndpoint, t.e.ID.String(), p)
}

// checkDeadLetters reads the dead-letter groups of the outbox and of every
// enabled endpoint but shadow ones (which have none), and writes an event
// for each group whose count reached a higher multiple of DeadLetters
// than at the last check. The groups found at the first check are the
// base; those found later, unknown before, grew from nothing, and so did
// a group whose dead letters are all newer than the latest one the last
// check found (retried or purged meanwhile, then grown again).
//
// It reads within ctx, and writes within writes.
func (o *operatorEvents) checkDeadLetters(ctx, writes context.Context) {
	if o.cfg.DeadLetters < 0 {
		return
	}
	callCtx, cancel := context.WithTimeout(ctx, supervisorCallTimeout)
	all, err := o.store.EndpointList(callCtx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			o.log.Warn("reading the endpoints for their dead-letter groups failed; they are checked again later", "error", err)
		}
		return
	}
	places := []*store.Endpoint{nil} // nil: the outbox
	for _, e := range all {
		if e.State == store.EndpointEnabled && !e.Shadow {
			places = append(places, &e)
		}
	}
	seen := map[string]bool{}
	written := len(o.unwritten)
	for _, e := range places {
		place, filter := "outbox", store.FailedFilter{}
		if e != nil {
			place, filter.Endpoint = e.ID.String(), e.ID
		}
		callCtx, cancel := context.WithTimeout(ctx, supervisorCallTimeout)
		groups, err := o.cfg.Outbox.FailedGroups(callCtx, store.FailedGroupsParams{FailedFilter: filter, Scan: o.scan()})
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			o.log.Warn("reading dead-letter groups failed; they are checked again later", "of", place, "error", err)
			for k := range o.groups {
				if strings.HasPrefix(k, place+"/") {
					seen[k] = true // kept as they were
				}
			}
			continue
		}
		for _, g := range groups.Groups {
			k := place + "/" + g.ID
			seen[k] = true
			last, known := o.groups[k]
			if known && g.FirstSeen.After(last.lastSeen) {
				last.reached = 0 // none of those counted before is left
			}
			reached := g.Count / o.cfg.DeadLetters
			o.groups[k] = groupSeen{reached: reached, lastSeen: g.LastSeen}
			if !known && !o.checked || reached <= last.reached {
				continue
			}
			o.keep(o.groupEvent(ctx, e, g, groups.Complete, reached))
		}
	}
	for k := range o.groups {
		if !seen[k] {
			delete(o.groups, k) // retried or purged: it starts again from nothing
		}
	}
	o.log.Debug("dead-letter groups checked", "places", len(places), "groups", len(o.groups), "grew", len(o.unwritten)-written, "base", !o.checked)
	o.checked = true
	o.write(writes)
}

// scan is FailedGroupsParams.Scan: 100 times DeadLetters, at least 1,000,
// at most store.FailedGroupsScanDefault.
func (o *operatorEvents) scan() int {
	return min(max(100*o.cfg.DeadLetters, 1000), store.FailedGroupsScanDefault)
}

// groupEvent is the event of g, a group of e's dead letters (of the
// outbox's when e is nil) whose count reached reached times DeadLetters.
// Its id and dedup key are derived from the group, when it was first seen
// (a group retried or purged, then grown again, is news again) and
// reached, so that every relay that finds it writes the same event.
func (o *operatorEvents) groupEvent(ctx context.Context, e *store.Endpoint, g store.FailureGroup, complete bool, reached int) postbox.Event {
	p := OperatorEvent{Type: EventDeadLettersGrew, At: time.Now().UTC(), ConsolePath: "/failed",
		Group: &OperatorGroup{Of: "outbox", ID: g.ID, Fingerprint: g.Fingerprint, Count: g.Count, Threshold: o.cfg.DeadLetters,
			FirstSeen: g.FirstSeen.UTC(), LastSeen: g.LastSeen.UTC()}}
	place, rawURL := "outbox", ""
	p.Text = fmt.Sprintf("postbox: %d dead letters in the outbox failed with %q", g.Count, g.Fingerprint)
	if e != nil {
		place, rawURL = e.ID.String(), e.URL
		p.Group.Of, p.Endpoint, p.State = "endpoint", o.operatorEndpoint(*e), e.State
		p.Deliveries, p.ConsolePath = o.deliveries(ctx, e.ID), "/endpoints/"+place
		p.Text = fmt.Sprintf("postbox: %d dead letters of endpoint %s failed with %q", g.Count, endpointLabel(*e), g.Fingerprint)
	}
	p.LastError = o.cleanError(rawURL, g.Example)
	// A group's first failure is known only when every dead letter was
	// read (FailedGroups.Complete): otherwise it moves as failures come.
	first := "partial"
	if complete {
		first = strconv.FormatInt(g.FirstSeen.UnixMicro(), 10)
	}
	key := fmt.Sprintf("%s/%s/%s/%s/%d", EventDeadLettersGrew, place, g.ID, first, reached)
	return operatorEvent(key, AggregateDeadLetters, place+"/"+g.ID, p)
}

// deliveries counts endpoint id's deliveries; nil when they cannot be
// counted now (the event is written without them).
func (o *operatorEvents) deliveries(ctx context.Context, id uuid.UUID) *OperatorDeliveries {
	callCtx, cancel := context.WithTimeout(ctx, healthCallTimeout)
	defer cancel()
	c, err := o.store.DeliveryCounts(callCtx, id)
	if err != nil {
		return nil
	}
	return &OperatorDeliveries{Pending: c.Pending, Processing: c.Processing, Failed: c.Failed}
}

// cleanError is an error text for an operator event: without the secrets
// of rawURL (an endpoint's URL, "" for none; see scrub), cleaned and cut
// to operatorErrorMax bytes.
func (o *operatorEvents) cleanError(rawURL, text string) string {
	if text == "" {
		return ""
	}
	if rawURL != "" {
		text = scrub(errors.New(text), withWebhook(o.kinds), rawURL).Error()
	}
	return store.ErrorText(text, operatorErrorMax)
}

// operatorEndpoint is e as an operator event shows it.
func (o *operatorEvents) operatorEndpoint(e store.Endpoint) *OperatorEndpoint {
	return &OperatorEndpoint{ID: e.ID, Name: e.Name, URL: DescribeURL(o.kinds, e.URL)}
}

// endpointLabel names e in an event's text: its name quoted, or its id.
func endpointLabel(e store.Endpoint) string {
	if e.Name != "" {
		return strconv.Quote(e.Name)
	}
	return e.ID.String()
}

// operatorEvent is the event of payload p, its id and dedup key derived
// from key.
func operatorEvent(key, aggregateType, aggregateID string, p OperatorEvent) postbox.Event {
	body, err := json.Marshal(p)
	if err != nil {
		panic("endpoint: an operator event does not encode: " + err.Error()) // its fields are all encodable
	}
	return postbox.Event{ID: uuid.NewSHA1(operatorNamespace, []byte(key)), AggregateType: aggregateType, AggregateID: aggregateID,
		EventType: p.Type, Payload: body, DedupKey: key}
}
