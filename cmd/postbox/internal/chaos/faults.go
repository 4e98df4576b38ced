package chaos

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/postbox-go/postbox/postboxtest/httpfault"
	"github.com/postbox-go/postbox/postboxtest/netfault"
)

// Fault kinds, as --faults names them.
const (
	FaultKill             = "kill"
	FaultPause            = "pause"
	FaultTerminate        = "pg-terminate"
	FaultDBLatency        = "db-latency"
	FaultDBReset          = "db-reset"
	FaultDBBlackHole      = "db-blackhole"
	FaultDBHalfOpen       = "db-halfopen"
	FaultSinkLatency      = "sink-latency"
	FaultSinkReset        = "sink-reset"
	FaultSinkBlackHole    = "sink-blackhole"
	FaultSinkHalfOpen     = "sink-halfopen"
	FaultHTTP5xx          = "http-5xx"
	FaultHTTPTimeout      = "http-timeout"
	FaultHandlerFailure   = "handler-fail"
	FaultSinkRefused      = "sink-refused"
	FaultSinkUnresponsive = "sink-unresponsive"
	FaultDBRestart        = "db-restart"
	// FaultPartitionDrop drops partitions of a partitioned outbox as soon
	// as their range ends, their unfinished events moved to the DEFAULT
	// partition, while the relays deliver them (see injectPartitionDrop).
	FaultPartitionDrop = "partition-drop"
	// FaultSourceOutage makes the database of one source (the victim, alone
	// in its database) unreachable for the fault, while the relays go on
	// with the other sources (runs over many sources: Config.Sources).
	FaultSourceOutage = "source-outage"
)

// aliases are other names of fault kinds that --faults takes.
var aliases = map[string]string{
	// FaultRelayKill names kill as runs over many sources see it: a relay
	// process, with every source it drains, killed.
	FaultRelayKill: FaultKill,
}

// FaultRelayKill is another name of FaultKill.
const FaultRelayKill = "relay-kill"

// Injected latencies: the database's well under the relays' store call
// timeouts, the consumer's under their --timeout.
const (
	dbLatency   = 50 * time.Millisecond
	sinkLatency = 300 * time.Millisecond
	// faultShare is the share of requests an HTTP fault hits.
	faultShare = 0.5
	// terminateEvery is how often pg-terminate kills the relays'
	// connections while it lasts.
	terminateEvery = 300 * time.Millisecond
)

// faultKind is one kind of fault: inject starts it and returns what ends
// it.
type faultKind struct {
	name   string
	about  string
	inject func(ctx context.Context, r *run, n int) (end func() error, err error)
}

// settles are what runs before the window of a fault kind begins: each
// waits for a state the fault's check needs, and says what it waited for.
var settles = map[string]func(ctx context.Context, r *run) string{
	FaultSourceOutage: settleOthers,
}

// kinds are every fault kind, in schedule order. db-restart is only
// injected when a restart command is given, source-outage only in a run
// over many sources.
var kinds = []faultKind{
	// First: its check (the other sources keep delivering) is cleanest on
	// a run without the backlog of another fault (see settleOthers).
	{FaultSourceOutage, "one source's database refusing connections (ALLOW_CONNECTIONS false, its sessions terminated) while the other sources go on", injectSourceOutage},
	{FaultKill, "a relay killed with SIGKILL, then started again", injectKill},
	{FaultPause, "a relay stopped with SIGSTOP for longer than the lease, then SIGCONT", injectPause},
	{FaultTerminate, "pg_terminate_backend of every relay connection, again and again", injectTerminate},
	{FaultDBLatency, fmt.Sprintf("%v added each way between the relays and PostgreSQL", dbLatency), proxyFault(func(r *run) *netfault.Proxy { return r.dbProxy }, latencyOn(dbLatency))},
	{FaultDBReset, "relay-PostgreSQL connections reset in mid-statement", proxyFault(func(r *run) *netfault.Proxy { return r.dbProxy }, resetsOn)},
	{FaultDBBlackHole, "a black hole between the relays and PostgreSQL", proxyFault(func(r *run) *netfault.Proxy { return r.dbProxy }, blackHoleOn)},
	{FaultDBHalfOpen, "every relay-PostgreSQL connection left half-open", proxyFault(func(r *run) *netfault.Proxy { return r.dbProxy }, halfOpen)},
	{FaultSinkLatency, fmt.Sprintf("%v added each way between the relays and the consumer", sinkLatency), sinkFault(latencyOn(sinkLatency))},
	{FaultSinkReset, "relay-consumer connections reset in mid-request", sinkFault(resetsOn)},
	{FaultSinkBlackHole, "a black hole between the relays and the consumer", sinkFault(blackHoleOn)},
	{FaultSinkHalfOpen, "every relay-consumer connection left half-open", sinkFault(halfOpen)},
	{FaultHTTP5xx, "half the requests answered 503", httpFault(httpfault.ServerError)},
	{FaultHTTPTimeout, "half the requests applied, then answered after the relays' timeout", httpFault(httpfault.SlowAfter)},
	{FaultHandlerFailure, "half the requests fail in the handler after the inbox insert (rolled back)", httpFault(httpfault.HandlerFailure)},
	{FaultSinkRefused, "the consumer down: connections refused", sinkFault(refusing)},
	{FaultSinkUnresponsive, "the consumer up but answering nothing: every request times out", consumerFault(httpfault.Unresponsive, 1)},
	{FaultPartitionDrop, fmt.Sprintf("partitions dropped as their range ends (every %v), their events in flight moved to the DEFAULT partition; %v added each way to the consumer", partitionDropEvery, sinkLatency), injectPartitionDrop},
	{FaultDBRestart, "the database server crashed and restarted (--allow-restart)", injectRestart},
}

// FaultNames lists every fault kind, in schedule order.
func FaultNames() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.name
	}
	return names
}

// ParseFaults reads a --faults list of a run over one source: see
// ParseFaultsWith.
func ParseFaults(list string, allowRestart, partitioned bool) ([]string, error) {
	return ParseFaultsWith(list, FaultOptions{AllowRestart: allowRestart, Partitioned: partitioned})
}

// FaultOptions are what a run allows besides the faults that every run
// has.
type FaultOptions struct {
	// AllowRestart: a restart command was given (db-restart).
	AllowRestart bool
	// Partitioned: the outbox is partitioned (partition-drop in all).
	Partitioned bool
	// Sources: the run is over many sources (source-outage).
	Sources bool
}

// ParseFaultsWith reads a --faults list: "all", or kind names (or their
// aliases, such as relay-kill) separated by commas. "all" includes
// db-restart only with AllowRestart, partition-drop only when Partitioned
// (the outbox partitioned for every fault), and source-outage only with
// Sources; named, partition-drop makes the outbox partitioned
// (Config.Partitioned), and source-outage without Sources is refused.
func ParseFaultsWith(list string, o FaultOptions) ([]string, error) {
	if strings.TrimSpace(list) == "all" {
		names := FaultNames()
		names = slices.DeleteFunc(names, func(n string) bool {
			return (n == FaultDBRestart && !o.AllowRestart) || (n == FaultPartitionDrop && !o.Partitioned) ||
				(n == FaultSourceOutage && !o.Sources)
		})
		return names, nil
	}
	var out []string
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if canonical, ok := aliases[name]; ok {
			name = canonical
		}
		switch {
		case name == "":
			continue
		case !slices.Contains(FaultNames(), name):
			return nil, fmt.Errorf("--faults: unknown fault %q (want all, or some of %s; %s is kill)", name, strings.Join(FaultNames(), ", "), FaultRelayKill)
		case name == FaultDBRestart && !o.AllowRestart:
			return nil, errors.New("--faults: db-restart needs --allow-restart CMD, the command that restarts the server")
		case name == FaultSourceOutage && !o.Sources:
			return nil, errors.New("--faults: source-outage needs --sources N (at least 2): it cuts one source's database off while the relays drain the others")
		case !slices.Contains(out, name):
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--faults: no fault named")
	}
	return out, nil
}

func kindNamed(name string) faultKind {
	for _, k := range kinds {
		if k.name == name {
			return k
		}
	}
	panic("chaos: unknown fault " + name) // ParseFaults checked the names
}

// noEnd ends a fault that ends by itself.
func noEnd() error { return nil }

// injectKill kills relay n (round robin) with SIGKILL; the end starts it
// again.
func injectKill(_ context.Context, r *run, n int) (func() error, error) {
	p := r.relays[n%len(r.relays)]
	p.kill()
	return p.start, nil
}

// injectPause stops relay n with SIGSTOP; the end, SIGCONT. Its slot lasts
// longer than the lease (see activeFor).
func injectPause(_ context.Context, r *run, n int) (func() error, error) {
	p := r.relays[n%len(r.relays)]
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return nil, err
	}
	return func() error { return p.signal(syscall.SIGCONT) }, nil
}

// injectTerminate terminates the relays' connections (found by their
// application_name) at once and every terminateEvery until the end.
func injectTerminate(ctx context.Context, r *run, _ int) (func() error, error) {
	terminate := func() error {
		callCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := r.store.Pool().Exec(callCtx,
			`select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1`, r.applicationName)
		return err
	}
	if err := terminate(); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(terminateEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = terminate()
			}
		}
	})
	return func() error { close(stop); wg.Wait(); return nil }, nil
}

// proxyFault injects a fault of the proxy that which returns; on starts it
// and returns what ends it.
func proxyFault(which func(*run) *netfault.Proxy, on func(*netfault.Proxy) (func() error, error)) func(context.Context, *run, int) (func() error, error) {
	return func(_ context.Context, r *run, _ int) (func() error, error) { return on(which(r)) }
}

func latencyOn(d time.Duration) func(*netfault.Proxy) (func() error, error) {
	return func(p *netfault.Proxy) (func() error, error) {
		p.SetLatency(d)
		return func() error { p.SetLatency(0); return nil }, nil
	}
}

func resetsOn(p *netfault.Proxy) (func() error, error) {
	p.SetResets(true)
	return func() error { p.SetResets(false); return nil }, nil
}

func blackHoleOn(p *netfault.Proxy) (func() error, error) {
	p.SetBlackHole(true)
	return func() error { p.SetBlackHole(false); return nil }, nil
}

func halfOpen(p *netfault.Proxy) (func() error, error) {
	p.HalfOpen()
	return noEnd, nil
}

func refusing(p *netfault.Proxy) (func() error, error) {
	if err := p.SetRefusing(true); err != nil {
		return nil, err
	}
	return func() error { return p.SetRefusing(false) }, nil
}

// sinkFault injects a fault into the proxy of every destination (every
// endpoint in endpoints mode); on starts it on one proxy and returns what
// ends it there.
func sinkFault(on func(*netfault.Proxy) (func() error, error)) func(context.Context, *run, int) (func() error, error) {
	return func(_ context.Context, r *run, _ int) (func() error, error) {
		var ends []func() error
		endAll := func() error {
			var errs []error
			for _, end := range ends {
				errs = append(errs, end())
			}
			return errors.Join(errs...)
		}
		for _, d := range r.destinations {
			end, err := on(d.proxy)
			if err != nil {
				return nil, errors.Join(err, endAll())
			}
			ends = append(ends, end)
		}
		return endAll, nil
	}
}

// consumerFault puts an HTTP fault of every destination's consumer in force
// on share of its requests.
func consumerFault(f httpfault.Fault, share float64) func(context.Context, *run, int) (func() error, error) {
	return func(_ context.Context, r *run, _ int) (func() error, error) {
		for _, d := range r.destinations {
			d.consumer.inject(f, share)
		}
		return func() error {
			for _, d := range r.destinations {
				d.consumer.inject(httpfault.None, 0)
			}
			return nil
		}, nil
	}
}

// httpFault puts an HTTP fault of the consumers in force on faultShare of
// the requests.
func httpFault(f httpfault.Fault) func(context.Context, *run, int) (func() error, error) {
	return consumerFault(f, faultShare)
}

// injectRestart runs the restart command (through sh -c); the fault ends
// once the database answers again.
func injectRestart(ctx context.Context, r *run, _ int) (func() error, error) {
	cmdCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cmdCtx, "sh", "-c", r.cfg.AllowRestart).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("--allow-restart %q: %v: %s", r.cfg.AllowRestart, err, strings.TrimSpace(string(out)))
	}
	return func() error { return r.waitForDatabase(ctx) }, nil
}

// waitForDatabase waits until the database answers, for a minute at most.
func (r *run) waitForDatabase(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.store.Pool().Ping(callCtx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
