package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/postbox-go/postbox/keyring"
)

// relayStopTimeout is how long a `postbox relay` process may take to stop
// after SIGTERM (its deliveries in flight get 10 s by default) before it is
// killed.
const relayStopTimeout = 30 * time.Second

// relayProcess is a `postbox relay` child process.
type relayProcess struct {
	cmd *exec.Cmd
	pid int
	// exited is closed once the process has exited; err is then how.
	exited chan struct{}
	err    error
	// stopping is set once the bench stops the process: its exit is
	// expected from then on.
	stopping atomic.Bool

	stopOnce sync.Once
	peakKiB  int64
	stopErr  error
}

// relayArgs are the flags of a `postbox relay` that drains sc as signed
// webhooks to url: the outbox, the endpoint, a new whsec_ secret,
// --concurrency unless it is 0 (the default), and --log-level warn so that
// only its warnings and errors show among the progress lines. Every other
// flag is at its default.
func relayArgs(sc scratch, url string, concurrency int) []string {
	args := append(sc.relayFlags(), "--webhook-url", url, "--webhook-secret", newSecret())
	if concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(concurrency))
	}
	return append(args, "--log-level", "warn")
}

// startRelayProcess starts `postbox relay` with args (Config.Command);
// its log goes to p. If the process exits before stop is called, died is
// called with an error that says so.
func (e *env) startRelayProcess(ctx context.Context, p *progress, args []string, died context.CancelCauseFunc) (*relayProcess, error) {
	return e.startRelayProcessLog(ctx, p, args, died)
}

// startRelayProcessLog is startRelayProcess with the process's log going
// to log.
func (e *env) startRelayProcessLog(ctx context.Context, log io.Writer, args []string, died context.CancelCauseFunc) (*relayProcess, error) {
	cmd := e.cfg.Command(ctx, append([]string{"relay"}, args...)...)
	cmd.Env = e.childEnv(cmd.Environ())
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start `postbox relay`: %w", err)
	}
	rp := &relayProcess{cmd: cmd, pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() {
		rp.err = cmd.Wait()
		close(rp.exited)
		if !rp.stopping.Load() {
			died(fmt.Errorf("`postbox relay` (pid %d) exited before the bench stopped it: %s; its log is above", rp.pid, exitText(rp.err)))
		}
	}()
	return rp, nil
}

// childEnv is the environment of a postbox child that may seal or open
// endpoints' secrets (`postbox relay`, `postbox endpoints add`): env
// without the variables of relayEnv, and the run's secrets key.
func (e *env) childEnv(environ []string) []string {
	return append(relayEnv(environ), keyring.EnvVar+"="+e.secretsKey)
}

// relayEnv is env without the variables that postbox reads its flags from
// (DB_DSN, WEBHOOK_URL, WEBHOOK_SECRET and POSTBOX_*), so that a relay
// process runs with the flags the bench gives and the defaults of the
// others, whatever the bench's own environment holds.
func relayEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "DB_DSN", name == "WEBHOOK_URL", name == "WEBHOOK_SECRET", strings.HasPrefix(name, "POSTBOX_"):
			continue
		}
		out = append(out, kv)
	}
	return out
}

// stop reads the process's peak resident memory (VmHWM; 0 where /proc is
// missing), then stops it as a service manager would: SIGTERM, and SIGKILL
// if it has not exited relayStopTimeout later. It returns the peak in KiB,
// and an error unless the process exited cleanly after SIGTERM. Calling it
// again returns the same.
func (rp *relayProcess) stop() (int64, error) {
	rp.stopOnce.Do(func() {
		rp.stopping.Store(true)
		select {
		case <-rp.exited:
			rp.stopErr = fmt.Errorf("`postbox relay` (pid %d) exited before the bench stopped it: %s", rp.pid, exitText(rp.err))
			return
		default:
		}
		rp.peakKiB = peakRSSKiB(strconv.Itoa(rp.pid))
		if err := rp.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			_ = rp.cmd.Process.Kill()
		}
		select {
		case <-rp.exited:
		case <-time.After(relayStopTimeout):
			_ = rp.cmd.Process.Kill()
			<-rp.exited
			rp.stopErr = fmt.Errorf("`postbox relay` (pid %d) still running %s after SIGTERM: killed", rp.pid, relayStopTimeout)
			return
		}
		if rp.err != nil {
			rp.stopErr = fmt.Errorf("`postbox relay` (pid %d) stopped with %s", rp.pid, exitText(rp.err))
		}
	})
	return rp.peakKiB, rp.stopErr
}

// exitText says how a process exited, from the error of its Wait.
func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// relayExit is err, or the unexpected exit of a relay process that ended
// ctx (started with died cancelling it) while parent went on.
func relayExit(parent, ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && parent.Err() == nil {
		if cause := context.Cause(ctx); !errors.Is(cause, ctx.Err()) {
			return cause
		}
	}
	return err
}

// processDrained is how a drain through `postbox relay` processes went.
type processDrained struct {
	drained
	// peakKiB is each process's peak resident memory.
	peakKiB []int64
	// relayCPU is the CPU time the processes used, from their start to
	// the end of the drain.
	relayCPU time.Duration
	// serverCPU is the CPU time of their PostgreSQL server processes over
	// the same time (0 when the server is not PostgreSQL on this
	// machine).
	serverCPU time.Duration
}

// processDrain drains sc's backlog of n events with instances `postbox
// relay` processes of --concurrency concurrency (0: the default), all
// delivering to rec, each with the flags extra besides relayArgs'. The
// count of published events is the count of distinct event ids rec
// receives from the start on. It returns how the drain went, from the
// start of the processes.
func (e *env) processDrain(ctx context.Context, p *progress, what string, sc scratch, rec *receiver, concurrency, instances, n int, extra ...string) (_ processDrained, err error) {
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() { err = relayExit(parent, ctx, err) }()
	procs := make([]*relayProcess, 0, instances)
	defer func() {
		for _, rp := range procs {
			_, _ = rp.stop()
		}
	}()
	before := rec.distinct()
	published := func() int64 { return rec.distinct() - before }
	server := e.processServerCPU(ctx)
	start := time.Now()
	for range instances {
		rp, err := e.startRelayProcess(ctx, p, append(relayArgs(sc, rec.url, concurrency), extra...), cancel)
		if err != nil {
			return processDrained{}, err
		}
		procs = append(procs, rp)
	}
	d, err := waitDrained(ctx, p, what, sc.outbox(), published, n, start)
	if err != nil {
		return processDrained{}, err
	}
	// Every CPU time is read before any process stops: the server
	// processes of their connections exit with them.
	pd := processDrained{drained: d, serverCPU: server()}
	for _, rp := range procs {
		cpu, _ := cpuTime(strconv.Itoa(rp.pid)) // 0 where /proc is missing
		pd.relayCPU += cpu
	}
	for _, rp := range procs {
		kib, err := rp.stop()
		if err != nil {
			return processDrained{}, err
		}
		pd.peakKiB = append(pd.peakKiB, kib)
	}
	return pd, nil
}
