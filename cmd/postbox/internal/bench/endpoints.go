package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/postbox-go/postbox/store"
)

// Goals of the endpoints scenario.
const (
	// endpointsSpeedGoal: the deliveries/s of `postbox relay --endpoints`
	// to endpointsCount healthy endpoints reach this share of the
	// single-URL path's events/s to the same kind of receiver.
	endpointsSpeedGoal = 0.8
	// endpointsIsolationGoal: the endpointsHealthy endpoints beside a
	// refusing and a slow one reach this share of their rate beside
	// healthy ones.
	endpointsIsolationGoal = 0.9
)

const (
	// endpointsCount is how many endpoints each phase registers.
	endpointsCount = 10
	// endpointsHealthy is how many of them stay healthy in both
	// isolation phases.
	endpointsHealthy = 8
	// endpointsSlowAnswer is how long the slow endpoint of the isolation
	// phase takes to answer.
	endpointsSlowAnswer = 2 * time.Second
)

// runEndpoints measures `postbox relay --endpoints` as a child process,
// its endpoints registered with `postbox endpoints add`, on loopback:
//
//   - speed: endpointsCount healthy endpoints (each answering as the
//     webhook scenario's receiver does), a backlog of
//     WebhookEvents/endpointsCount events, every event to every endpoint:
//     as many requests as the webhook scenario's drain. The deliveries/s
//     are compared with the webhook scenario's events/s of the same run,
//     or, when it did not run, with a single-URL `postbox relay` draining
//     as many events just before.
//   - isolation: the rate of endpointsHealthy endpoints beside 2 more
//     healthy ones, then beside one refusing connections and one answering
//     after endpointsSlowAnswer.
func runEndpoints(ctx context.Context, e *env, p *progress) error {
	n := max(e.cfg.WebhookEvents/endpointsCount, 100)
	reference, refName, err := singleURLReference(ctx, e, p, n*endpointsCount)
	if err != nil {
		return err
	}
	speed, err := endpointsPhase(ctx, e, p, "endpoints_speed", n, endpointsCount, phaseSpeed)
	if err != nil {
		return err
	}
	e.rep.add(ScenarioEndpoints, "endpoints.deliveries", fmt.Sprintf("`postbox relay --endpoints`: %d healthy endpoints, every event to each, endpoints' defaults", endpointsCount), speed.rate, UnitDeliveriesPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.ratio_webhook", "endpoints' deliveries/s / "+refName, speed.rate/reference, UnitRatio, atLeast(endpointsSpeedGoal))
	// What each delivery costs, to set beside the webhook scenario's
	// CPU per event: a noisy machine blurs it less than a rate.
	perDelivery := func(d time.Duration) float64 {
		return float64(d) / float64(time.Microsecond) / float64(speed.deliveries)
	}
	if speed.relayCPU > 0 {
		e.rep.add(ScenarioEndpoints, "endpoints.cpu_relay", "CPU per delivery, `postbox relay --endpoints` process", perDelivery(speed.relayCPU), UnitMicros, nil)
	}
	if speed.serverCPU > 0 {
		e.rep.add(ScenarioEndpoints, "endpoints.server_cpu", "CPU per delivery, the relay's server processes", perDelivery(speed.serverCPU), UnitMicros, nil)
	}

	m := max(e.cfg.WebhookEvents/(2*endpointsCount), 100)
	healthy, err := endpointsPhase(ctx, e, p, "endpoints_healthy", m, endpointsHealthy, phaseHealthy)
	if err != nil {
		return err
	}
	faulty, err := endpointsPhase(ctx, e, p, "endpoints_faulty", m, endpointsHealthy, phaseFaulty)
	if err != nil {
		return err
	}
	e.rep.add(ScenarioEndpoints, "endpoints.healthy", "`postbox relay --endpoints`: 8 endpoints' deliveries, beside 2 more healthy ones", healthy.rate, UnitDeliveriesPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.faulty", "`postbox relay --endpoints`: 8 endpoints' deliveries, beside one refusing and one answering after 2 s", faulty.rate, UnitDeliveriesPerSec, nil)
	e.rep.add(ScenarioEndpoints, "endpoints.isolation", "isolation: the 8 healthy endpoints' rate beside faulty ones / beside healthy ones",
		faulty.rate/healthy.rate, UnitRatio, atLeast(endpointsIsolationGoal))
	return nil
}

// singleURLReference is the single-URL path's events/s that the endpoints'
// speed is compared with, and what it is: the webhook scenario's measure
// when it ran in this run, or else a drain of n events by a `postbox
// relay` with its defaults to a receiver like the endpoints'.
func singleURLReference(ctx context.Context, e *env, p *progress, n int) (float64, string, error) {
	if m, ok := e.rep.Measure("webhook.events"); ok && m.Value > 0 {
		p.printf("the single-URL reference: the webhook scenario's %.0f events/s", m.Value)
		return m.Value, "the webhook scenario's events/s (single URL, same run)", nil
	}
	rec, err := startReceiver(e.cfg.ReceiverLatency)
	if err != nil {
		return 0, "", err
	}
	defer rec.close()
	sc, err := e.filled(ctx, p, "endpoints_reference", n)
	if err != nil {
		return 0, "", err
	}
	defer e.release(ctx, sc)
	d, err := e.processDrain(ctx, p, "`postbox relay` (single URL)", sc, rec, 0, 1, n)
	if err != nil {
		return 0, "", err
	}
	v := rate(n, d.elapsed)
	p.printf("the single-URL reference: `postbox relay` delivered %d signed webhooks in %s: %.0f events/s", n, d.elapsed.Round(time.Millisecond), v)
	return v, "a single-URL `postbox relay`'s events/s, just before (the webhook scenario did not run)", nil
}

// endpointsPhaseKind is which endpoints a phase registers.
type endpointsPhaseKind int

const (
	// phaseSpeed: endpointsCount healthy endpoints, answering after
	// Config.ReceiverLatency; all measured.
	phaseSpeed endpointsPhaseKind = iota
	// phaseHealthy: endpointsCount healthy endpoints answering at once;
	// the first endpointsHealthy measured.
	phaseHealthy
	// phaseFaulty: endpointsHealthy healthy ones, measured, one refusing
	// connections and one answering after endpointsSlowAnswer.
	phaseFaulty
)

// phaseResult is how a phase of the endpoints scenario went.
type phaseResult struct {
	// rate is the measured endpoints' deliveries/s.
	rate float64
	// deliveries is how many the measured endpoints received.
	deliveries int
	// relayCPU is the CPU time of the relay process, and serverCPU that
	// of its PostgreSQL server processes (0 elsewhere), from its start
	// until the measured deliveries were done.
	relayCPU, serverCPU time.Duration
}

// endpointsPhase fills a backlog of n events, registers endpointsCount
// endpoints with `postbox endpoints add`, starts `postbox relay
// --endpoints` and returns the deliveries/s of the first measured ones:
// their deliveries over the time from the relay's start until every one
// of them arrived and was recorded done (the fan-out included).
func endpointsPhase(ctx context.Context, e *env, p *progress, label string, n, measured int, kind endpointsPhaseKind) (res phaseResult, err error) {
	sc, err := e.filled(ctx, p, label, n)
	if err != nil {
		return phaseResult{}, err
	}
	defer e.release(ctx, sc)
	s, ok := sc.outbox().(store.Endpoints)
	if !ok {
		return phaseResult{}, fmt.Errorf("bench: the %s store has no endpoints", e.b.kind())
	}
	relayAllows, err := e.allowPrivate(ctx)
	if err != nil {
		return phaseResult{}, err
	}
	var recs []*receiver
	defer func() {
		for _, r := range recs {
			r.close()
		}
	}()
	names := make([]string, endpointsCount)
	for i := range endpointsCount {
		url, delay := "", time.Duration(0)
		switch {
		case kind == phaseSpeed:
			delay = e.cfg.ReceiverLatency
		case kind == phaseFaulty && i == endpointsHealthy:
			if url, err = refusingURL(); err != nil {
				return phaseResult{}, err
			}
		case kind == phaseFaulty && i == endpointsHealthy+1:
			delay = endpointsSlowAnswer
		}
		if url == "" {
			rec, err := startReceiver(delay)
			if err != nil {
				return phaseResult{}, err
			}
			recs = append(recs, rec)
			url = rec.url
		}
		names[i] = label + "-" + strconv.Itoa(i)
		if err := e.addEndpoint(ctx, sc, names[i], url); err != nil {
			return phaseResult{}, err
		}
	}
	ids, err := endpointIDs(ctx, s, names[:measured])
	if err != nil {
		return phaseResult{}, err
	}
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	args := append(sc.relayFlags(), "--endpoints")
	if relayAllows {
		args = append(args, allowPrivateEndpointsFlag)
	}
	p.printf("%s: `postbox relay %s`, %d endpoints, %d events each", label, strings.Join(args[len(sc.relayFlags()):], " "), endpointsCount, n)
	server := e.processServerCPU(ctx)
	start := time.Now()
	rp, err := e.startRelayProcess(ctx, p, append(args, "--log-level", "warn"), cancel)
	if err != nil {
		return phaseResult{}, err
	}
	defer func() { _, _ = rp.stop() }()
	took, err := waitDelivered(ctx, p, label, s, ids, recs[:measured], n, start)
	if err != nil {
		return phaseResult{}, err
	}
	// Every CPU time is read before the process stops: the server
	// processes of its connections exit with it.
	res = phaseResult{deliveries: measured * n, serverCPU: server()}
	res.relayCPU, _ = cpuTime(strconv.Itoa(rp.pid)) // 0 where /proc is missing
	if _, err := rp.stop(); err != nil {
		return phaseResult{}, err
	}
	res.rate = rate(res.deliveries, took)
	p.printf("%s: %d endpoints received %d events each in %s: %.0f deliveries/s", label, measured, n, took.Round(time.Millisecond), res.rate)
	return res, nil
}

// waitDelivered waits until each of recs received the n events, then
// until the endpoints ids (the same, in order) have no delivery pending or
// processing, and returns the time from start to then. A delivery that
// failed fails it; so does no progress for stallTimeout.
func waitDelivered(ctx context.Context, p *progress, what string, s store.Endpoints, ids []uuid.UUID, recs []*receiver, n int, start time.Time) (time.Duration, error) {
	var (
		th         throttle
		last       = int64(-1)
		lastChange = time.Now()
		want       = int64(len(recs) * n)
	)
	for {
		var got int64
		for _, r := range recs {
			got += r.distinct()
		}
		now := time.Now()
		if got >= want {
			break
		}
		if got != last {
			last, lastChange = got, now
		} else if now.Sub(lastChange) > stallTimeout {
			return 0, fmt.Errorf("%s: stalled at %d of %d deliveries", what, got, want)
		}
		if th.due() {
			p.printf("  %s: %d/%d delivered (%.0f/s)", what, got, want, float64(got)/now.Sub(start).Seconds())
		}
		if !sleep(ctx, pollInterval) {
			return 0, context.Cause(ctx)
		}
	}
	deadline := time.Now().Add(stallTimeout)
	for {
		at := time.Now()
		var open, failed int64
		for _, id := range ids {
			c, err := s.DeliveryCounts(ctx, id)
			if err != nil {
				return 0, err
			}
			open, failed = open+c.Pending+c.Processing, failed+c.Failed
		}
		if failed > 0 {
			return 0, fmt.Errorf("%s: %d deliveries to healthy endpoints failed", what, failed)
		}
		if open == 0 {
			return at.Sub(start), nil
		}
		if at.After(deadline) {
			return 0, fmt.Errorf("%s: all delivered, but %d deliveries still pending or processing", what, open)
		}
		if !sleep(ctx, pollInterval) {
			return 0, context.Cause(ctx)
		}
	}
}

// The flags that let deliveries reach loopback: the relay's, for every
// endpoint, and `postbox endpoints add`'s, for the endpoint added.
const (
	allowPrivateEndpointsFlag = "--allow-private-endpoints"
	allowPrivateFlag          = "--allow-private"
)

// allowPrivate finds how the postbox binary lets endpoints on loopback
// through its SSRF guard, from the flags its help lists: `postbox endpoints
// add --allow-private` when it has it (e.addPrivate is set, and
// addEndpoint gives it), or else `postbox relay --allow-private-endpoints`
// (it returns true: the relay needs it). The answer is found once per run.
func (e *env) allowPrivate(ctx context.Context) (relayAllows bool, err error) {
	if e.private == nil {
		addHelp, err := e.help(ctx, "endpoints", "add")
		if err != nil {
			return false, err
		}
		relayHelp, err := e.help(ctx, "relay")
		if err != nil {
			return false, err
		}
		pv := privateFlags{add: hasFlag(addHelp, allowPrivateFlag), relay: hasFlag(relayHelp, allowPrivateEndpointsFlag)}
		if !pv.add && !pv.relay {
			return false, fmt.Errorf("bench: neither `postbox endpoints add %s` nor `postbox relay %s` exists: no way to let endpoints on loopback through the SSRF guard", allowPrivateFlag, allowPrivateEndpointsFlag)
		}
		e.private = &pv
	}
	return !e.private.add, nil
}

// privateFlags are the allow-private flags the postbox binary has.
type privateFlags struct{ add, relay bool }

// help is the help text of a postbox subcommand (--help).
func (e *env) help(ctx context.Context, subcommand ...string) (string, error) {
	cmd := e.cfg.Command(ctx, append(subcommand, "--help")...)
	cmd.Env = relayEnv(cmd.Environ())
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "usage") {
		return "", fmt.Errorf("bench: `postbox %s --help`: %v: %s", strings.Join(subcommand, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// hasFlag reports whether the help text of a command lists flag.
func hasFlag(help, flag string) bool {
	return regexp.MustCompile(`(?m)^\s+-{1,2}` + regexp.QuoteMeta(strings.TrimLeft(flag, "-")) + `(\s|$)`).MatchString(help)
}

// addEndpoint registers a webhook endpoint named name at url in sc with
// `postbox endpoints add` (its defaults, a secret it generates), and
// --allow-private when the binary has it.
func (e *env) addEndpoint(ctx context.Context, sc scratch, name, url string) error {
	args := append([]string{"endpoints", "add"}, sc.relayFlags()...)
	args = append(args, "--name", name, "--url", url)
	if e.private != nil && e.private.add {
		args = append(args, allowPrivateFlag)
	}
	cmd := e.cfg.Command(ctx, args...)
	cmd.Env = e.childEnv(cmd.Environ())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr // stdout holds the generated secret: never shown
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: `postbox endpoints add --name %s --url %s`: %v: %s", name, url, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return nil
}

// endpointIDs are the ids of the endpoints named names, in order.
func endpointIDs(ctx context.Context, s store.Endpoints, names []string) ([]uuid.UUID, error) {
	all, err := s.EndpointList(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(names))
	for i, name := range names {
		for _, ep := range all {
			if ep.Name == name {
				ids[i] = ep.ID
			}
		}
		if ids[i] == uuid.Nil {
			return nil, fmt.Errorf("bench: endpoint %s is not in the store after `postbox endpoints add`", name)
		}
	}
	return ids, nil
}

// refusingURL is an http URL on loopback where nothing listens.
func refusingURL() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", errors.Join(errors.New("bench: free a port"), err)
	}
	return "http://" + addr + "/", nil
}
