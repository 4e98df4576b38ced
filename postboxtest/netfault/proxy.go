package netfault

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds the proxy's connection to its target.
const proxyDialTimeout = 5 * time.Second

// Proxy is a TCP proxy on 127.0.0.1 in front of one target (PostgreSQL, the
// consumer) that injects network faults into the connections through it:
// added latency, resets in the middle of a stream, a black hole that holds
// every byte for a while, half-open connections, and refused connections.
// It is safe for concurrent use.
type Proxy struct {
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener
	links   map[*link]struct{}
	latency time.Duration
	// holding is open while the black hole is on, and closed when it ends.
	holding   chan struct{}
	resetting bool
	refusing  bool
	closed    bool
	wg        sync.WaitGroup
}

// link is one client connection and its connection to the target.
type link struct {
	client, server net.Conn
	// resetAfter is how many client bytes go through before the link is
	// reset, while the proxy resets connections.
	resetAfter int
	// halfOpen: the target's side is gone, and the client's side stays
	// open and silent.
	halfOpen bool
	done     chan struct{}
	once     sync.Once
}

// NewProxy starts a proxy to target (host:port) on a free port of
// 127.0.0.1.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), ln: ln, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept(ln)
	return p, nil
}

// Addr is the proxy's address, host:port.
func (p *Proxy) Addr() string { return p.addr }

// SetLatency delays every chunk of data, either way, by d (0: none).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// SetBlackHole turns the black hole on or off. While it is on, no byte goes
// through, either way, on any connection, old or new (connections are still
// accepted): a network partition. When it ends, the bytes held go through,
// as TCP retransmits them once a partition heals, unless a side gave up.
func (p *Proxy) SetBlackHole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && p.holding == nil:
		p.holding = make(chan struct{})
	case !on && p.holding != nil:
		close(p.holding)
		p.holding = nil
	}
}

// SetResets turns resets on or off. While they are on, every connection,
// open or new, is reset (RST, both sides) after a random number of bytes
// from the client (up to 8 KiB): connections die in the middle of a
// request or a statement.
func (p *Proxy) SetResets(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resetting = on
}

// HalfOpen turns every connection open now into a half-open one: the
// target's side is closed, and the client's side stays open, but nothing
// reaches the client any more and what it sends vanishes, as when the peer's
// host disappeared. Only the client's own timeouts end it.
func (p *Proxy) HalfOpen() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		if !l.halfOpen {
			l.halfOpen = true
			_ = l.server.Close()
		}
	}
}

// SetRefusing turns refusals on or off. While they are on, the proxy does
// not listen, so connecting is refused, and every open connection is reset:
// the target is down. Turning them off listens on the same address again.
func (p *Proxy) SetRefusing(on bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || on == p.refusing {
		return nil
	}
	if on {
		p.refusing = true
		_ = p.ln.Close()
		for l := range p.links {
			l.reset()
		}
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	p.refusing, p.ln = false, ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		_ = p.ln.Close()
		for l := range p.links {
			l.close()
		}
		if p.holding != nil {
			close(p.holding)
			p.holding = nil
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server, resetAfter: rand.IntN(8 << 10), done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.refusing {
		p.mu.Unlock()
		l.reset()
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Go(func() { p.pipe(l, true) })
	pipes.Go(func() { p.pipe(l, false) })
	pipes.Wait()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// pipe copies one direction of l (up: from the client to the target) with
// the faults in force, until either side fails or the link is closed.
func (p *Proxy) pipe(l *link, up bool) {
	src, dst := l.server, l.client
	if up {
		src, dst = l.client, l.server
	}
	buf := make([]byte, 32<<10)
	sent := 0
	for {
		n, err := src.Read(buf)
		if n > 0 {
			halfOpen, ok := p.await(l)
			if !ok {
				return
			}
			if halfOpen {
				// The client's bytes vanish; its side stays open until
				// it closes it.
				continue
			}
			if up && p.resets() && sent+n > l.resetAfter {
				l.reset()
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil && !p.isHalfOpen(l) {
				l.close()
				return
			}
			sent += n
		}
		if err != nil {
			// A half-open link ends only when its client goes.
			if !p.isHalfOpen(l) || up {
				l.close()
			}
			return
		}
	}
}

// await waits out the black hole and the latency before a chunk goes
// through. It reports whether the link is half-open, and false when the
// link was closed meanwhile.
func (p *Proxy) await(l *link) (halfOpen, ok bool) {
	p.mu.Lock()
	holding, latency := p.holding, p.latency
	p.mu.Unlock()
	if holding != nil {
		select {
		case <-holding:
		case <-l.done:
			return false, false
		}
	}
	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-l.done:
			return false, false
		}
	}
	return p.isHalfOpen(l), true
}

func (p *Proxy) resets() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resetting
}

func (p *Proxy) isHalfOpen(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return l.halfOpen
}

// close closes both sides of the link.
func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// reset closes both sides of the link with a TCP reset.
func (l *link) reset() {
	for _, c := range []net.Conn{l.client, l.server} {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	l.close()
}
