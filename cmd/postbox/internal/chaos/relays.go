package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// relayStopTimeout is how long a relay may take to stop after SIGTERM
// before it is killed: its deliveries in flight get --shutdown-timeout,
// and closing a database connection whose statement was cancelled may take
// pgx 15 s more (it drains the connection before closing it).
const relayStopTimeout = 30 * time.Second

// relayProcess is one `postbox relay` child process, restarted in place
// after a kill. Its log (warnings and errors, JSON) goes to its own file.
type relayProcess struct {
	index int
	exe   string
	args  []string
	env   []string
	log   *os.File

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	// expected is set while the suite itself ends the process.
	expected bool
	// unexpected lists the exits the suite did not cause.
	unexpected []string
}

// start starts the process (again, after a kill).
func (p *relayProcess) start() error {
	cmd := exec.Command(p.exe, p.args...)
	cmd.Env = p.env
	cmd.Stdout, cmd.Stderr = p.log, p.log
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start relay %d: %w", p.index, err)
	}
	exited := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.exited, p.expected = cmd, exited, false
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		if !p.expected {
			p.unexpected = append(p.unexpected, fmt.Sprintf("relay %d (pid %d) exited by itself: %v; its log: %s",
				p.index, cmd.Process.Pid, exitText(err), p.log.Name()))
		}
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// pid is the running process's id.
func (p *relayProcess) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// signal sends sig to the running process.
func (p *relayProcess) signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(sig)
}

// kill ends the process with SIGKILL and waits for its exit.
func (p *relayProcess) kill() {
	p.mu.Lock()
	p.expected = true
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	exited := p.exited
	p.mu.Unlock()
	<-exited
}

// stop stops the process as a service manager would: SIGCONT (in case it is
// paused), SIGTERM, and SIGQUIT (then SIGKILL) if it has not exited
// relayStopTimeout later.
// It returns an error unless the process stopped cleanly.
func (p *relayProcess) stop() error {
	p.mu.Lock()
	p.expected = true
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("relay %d (pid %d): %w", p.index, cmd.Process.Pid, err)
	}
	select {
	case <-exited:
	case <-time.After(relayStopTimeout):
		// SIGQUIT makes a Go program write every goroutine's stack to
		// its log, showing where it hangs.
		_ = cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		return fmt.Errorf("relay %d (pid %d) still running %s after SIGTERM: stopped with SIGQUIT (its goroutines are in its log: %s)",
			p.index, cmd.Process.Pid, relayStopTimeout, p.log.Name())
	}
	if !cmd.ProcessState.Success() {
		return fmt.Errorf("relay %d (pid %d) stopped with %s; its log: %s", p.index, cmd.Process.Pid, cmd.ProcessState, p.log.Name())
	}
	return nil
}

// exits returns the exits the suite did not cause, and forgets them.
func (p *relayProcess) exits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.unexpected
	p.unexpected = nil
	return out
}

// running reports whether the current process has not exited.
func (p *relayProcess) running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// ProcessSample is a relay process's resident memory and open file
// descriptors at one moment, read from /proc.
type ProcessSample struct {
	Relay  int   `json:"relay"`
	PID    int   `json:"pid"`
	RSSKiB int64 `json:"rss_kib"`
	FDs    int   `json:"open_fds"`
	// Restarted: the relay was restarted (killed by a fault) within the
	// window the sample sums up; the figures are the most of either
	// process.
	Restarted bool `json:"restarted,omitempty"`
}

// sampleProcess reads the resident memory (VmRSS) and the open file
// descriptors of process pid from /proc.
func sampleProcess(relay, pid int) (ProcessSample, error) {
	s := ProcessSample{Relay: relay, PID: pid}
	dir := "/proc/" + strconv.Itoa(pid)
	status, err := os.ReadFile(dir + "/status")
	if err != nil {
		return s, err
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			s.RSSKiB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		return s, err
	}
	s.FDs = len(fds)
	return s, nil
}

// LogCount is how many times the relays logged one message.
type LogCount struct {
	Level   string `json:"level"`
	Message string `json:"msg"`
	Count   int    `json:"count"`
}

// countLogs counts the messages of the relays' JSON logs, most frequent
// first; lines that are not JSON (a panic) count under their own text.
func countLogs(files []string) []LogCount {
	counts := map[LogCount]int{}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			var rec struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				rec.Level, rec.Msg = "TEXT", strings.TrimSpace(line)
			}
			counts[LogCount{Level: rec.Level, Message: rec.Msg}]++
		}
	}
	out := make([]LogCount, 0, len(counts))
	for k, n := range counts {
		k.Count = n
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b LogCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Message, b.Message)
	})
	return out
}

// relaysReadyWithin bounds how long the faults wait for the relays.
const relaysReadyWithin = 15 * time.Second

// awaitRelays waits, before production and the first fault, until the
// relays hold their connections to PostgreSQL (two per relay: its pool's
// and its LISTEN connection), for relaysReadyWithin at most: a fault of
// the database links injected while they still start would hit no
// connection and show nothing.
func (r *run) awaitRelays(ctx context.Context) {
	began := time.Now()
	for time.Since(began) < relaysReadyWithin && ctx.Err() == nil {
		var conns int
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := r.store.Pool().QueryRow(callCtx,
			`select count(*) from pg_stat_activity where application_name = $1`, r.applicationName).Scan(&conns)
		cancel()
		if err == nil && conns >= 2*len(r.relays) {
			r.say("relays connected after %v", time.Since(began).Round(100*time.Millisecond))
			return
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	r.say("relays not all connected after %v; starting anyway", time.Since(began).Round(100*time.Millisecond))
}
