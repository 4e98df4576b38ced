package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

// childStartTimeout bounds how long a child may take to get ready.
const childStartTimeout = 30 * time.Second

// defaultChildCommand re-executes this program as "postbox bench".
func defaultChildCommand(ctx context.Context) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: finding this program to start relay processes: %w", err)
	}
	return exec.CommandContext(ctx, exe, "bench"), nil
}

// childProc is a relay child process seen from the benchmark.
type childProc struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	published atomic.Int64
	ready     chan struct{}
	exited    chan struct{} // its output ended

	mu    sync.Mutex
	final childReport
	err   string
}

// startChild starts a relay child on cfg; its errors go to logs.
func (e *env) startChild(ctx context.Context, cfg childConfig, logs io.Writer) (*childProc, error) {
	cmd, err := e.cfg.ChildCommand(ctx)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(cmd.Environ(), ChildEnv+"=relay")
	cmd.Stderr = logs
	c := &childProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start relay process: %w", err)
	}
	go c.read(stdout)
	line, _ := json.Marshal(cfg)
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		c.abort()
		return nil, fmt.Errorf("bench: configure relay process: %w", err)
	}
	return c, nil
}

// read follows the child's reports until its output ends.
func (c *childProc) read(stdout io.Reader) {
	defer close(c.exited)
	sc := bufio.NewScanner(stdout)
	readyOnce := sync.OnceFunc(func() { close(c.ready) })
	for sc.Scan() {
		var r childReport
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			continue
		}
		c.published.Store(r.Published)
		c.mu.Lock()
		if r.Error != "" {
			c.err = r.Error
		}
		if r.Done {
			c.final = r
		}
		c.mu.Unlock()
		if r.Ready {
			readyOnce()
		}
	}
}

// waitReady waits until the child is ready to run its relay.
func (c *childProc) waitReady(ctx context.Context) error {
	select {
	case <-c.ready:
		return nil
	case <-c.exited:
		return fmt.Errorf("bench: relay process exited before it was ready: %s", c.errorText())
	case <-time.After(childStartTimeout):
		return errors.New("bench: relay process not ready after 30s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// start lets the child's relay run.
func (c *childProc) start() error {
	_, err := io.WriteString(c.stdin, "go\n")
	return err
}

// stop ends the child's relay and returns its last report.
func (c *childProc) stop() (childReport, error) {
	_ = c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(childStartTimeout):
		c.kill()
		<-c.exited
	}
	werr := c.cmd.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.err != "":
		return c.final, errors.New("bench: relay process: " + c.err)
	case !c.final.Done:
		return c.final, fmt.Errorf("bench: relay process ended without its report: %v", werr)
	}
	return c.final, nil
}

// abort kills the child and waits for it to exit.
func (c *childProc) abort() {
	c.kill()
	<-c.exited
	_ = c.cmd.Wait()
}

func (c *childProc) kill() {
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
}

func (c *childProc) errorText() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == "" {
		return "no error reported"
	}
	return c.err
}

// childDrain drains sc's backlog of n events with instances relay child
// processes configured by cfg and returns how the drain went, from their
// start, and each child's peak resident memory in KiB.
func (e *env) childDrain(ctx context.Context, p *progress, what string, sc scratch, cfg childConfig, instances, n int) (drained, []int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	kids := make([]*childProc, 0, instances)
	defer func() {
		for _, k := range kids {
			k.abort()
		}
	}()
	for range instances {
		k, err := e.startChild(ctx, cfg, p)
		if err != nil {
			return drained{}, nil, err
		}
		kids = append(kids, k)
	}
	for _, k := range kids {
		if err := k.waitReady(ctx); err != nil {
			return drained{}, nil, err
		}
	}
	start := time.Now()
	for _, k := range kids {
		if err := k.start(); err != nil {
			return drained{}, nil, fmt.Errorf("bench: start relay: %w", err)
		}
	}
	published := func() int64 {
		var sum int64
		for _, k := range kids {
			sum += k.published.Load()
		}
		return sum
	}
	d, err := waitDrained(ctx, p, what, sc.outbox(), published, n, start)
	if err != nil {
		return drained{}, nil, err
	}
	rss := make([]int64, 0, len(kids))
	for _, k := range kids {
		final, err := k.stop()
		if err != nil {
			return drained{}, nil, err
		}
		rss = append(rss, final.PeakRSSKiB)
	}
	kids = nil
	return d, rss, nil
}
