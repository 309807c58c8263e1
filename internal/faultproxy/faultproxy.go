// Package faultproxy is a TCP proxy for fault tests: one proxy sits between one client and
// one server on loopback, and the test switches faults on and off while traffic flows:
// swallow the bytes of one or both directions (the connection stays open, so the client
// sees timeouts, the most dangerous partition), delay them, reset every connection, stop
// accepting new connections or accept them late.
package faultproxy

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

// Direction selects one direction of a connection.
type Direction int

// The two directions, and both.
const (
	Up   Direction = 1 << iota // client to server
	Down                       // server to client
	Both = Up | Down
)

// Stats counts what a proxy did.
type Stats struct {
	Accepted  int   // connections accepted
	Resets    int   // connections closed by Reset
	Forwarded int64 // bytes forwarded
	Swallowed int64 // bytes swallowed by a blackhole
}

// Proxy forwards the connections it accepts to one upstream address. It is safe for
// concurrent use; switches take effect for bytes read after the call.
type Proxy struct {
	ln       net.Listener
	upstream string

	mu          sync.Mutex
	links       map[*link]struct{}
	blackhole   Direction
	stalled     Direction
	unstall     chan struct{}    // closed when the stall ends
	delay       [2]time.Duration // by direction index
	jitter      [2]time.Duration
	acceptDelay time.Duration
	paused      bool
	resume      chan struct{} // closed when accepting resumes
	stats       Stats
	closed      bool
	done        chan struct{} // closed by Close

	wg sync.WaitGroup
}

// New listens on a free loopback port and forwards to upstream ("host:port").
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, upstream: upstream, links: map[*link]struct{}{}, resume: make(chan struct{}), done: make(chan struct{})}
	close(p.resume)
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole swallows the bytes of the given directions from now on (none: heal). The
// connections stay open.
func (p *Proxy) Blackhole(d Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.blackhole = d
}

// Stall holds the bytes of the given directions from now on (none: end the stall), as TCP
// does while the network path is down for a moment: nothing is lost, and everything held
// is forwarded, in order, when the stall ends. Only the chunk read when the stall began is
// held here; the rest waits in the kernel's buffers. The connections stay open.
func (p *Proxy) Stall(d Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.stalled == 0 && d != 0:
		p.unstall = make(chan struct{})
	case p.stalled != 0 && d == 0:
		close(p.unstall)
	}
	p.stalled = d
}

// Delay holds the bytes of the given directions for d plus a uniform jitter in
// [-jitter, +jitter] before forwarding them, keeping their order. Zero d removes it.
func (p *Proxy) Delay(dir Direction, d, jitter time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, bit := range []Direction{Up, Down} {
		if dir&bit != 0 {
			p.delay[i], p.jitter[i] = d, jitter
		}
	}
}

// Reset closes every open connection at once, with a TCP reset where possible.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.stats.Resets += len(links)
	p.mu.Unlock()
	for _, l := range links {
		l.close(true)
	}
}

// PauseAccept stops or resumes accepting new connections. While paused, the kernel still
// completes handshakes up to the listen backlog, so clients connect but nothing answers.
func (p *Proxy) PauseAccept(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case on && !p.paused:
		p.paused = true
		p.resume = make(chan struct{})
	case !on && p.paused:
		p.paused = false
		close(p.resume)
	}
}

// AcceptDelay holds every newly accepted connection for d before it reaches the upstream.
func (p *Proxy) AcceptDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.acceptDelay = d
}

// Heal removes every fault.
func (p *Proxy) Heal() {
	p.Blackhole(0)
	p.Stall(0)
	p.Delay(Both, 0, 0)
	p.AcceptDelay(0)
	p.PauseAccept(false)
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	if p.paused {
		p.paused = false
		close(p.resume)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		p.mu.Lock()
		resume := p.resume
		p.mu.Unlock()
		<-resume
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		// Accepting may have been paused while Accept waited: hold the connection until
		// it resumes, as the kernel's backlog would.
		p.mu.Lock()
		for p.paused && !p.closed {
			resume := p.resume
			p.mu.Unlock()
			<-resume
			p.mu.Lock()
		}
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			return
		}
		p.stats.Accepted++
		wait := p.acceptDelay
		p.mu.Unlock()
		p.wg.Go(func() { p.serve(c, wait) })
	}
}

// link is one proxied connection. Its server side is attached once dialled; a link
// closed before that (a Reset while dialling) closes the server as it is attached.
type link struct {
	client net.Conn
	mu     sync.Mutex
	server net.Conn
	closed bool
}

// attach gives l its server side; false, with server closed, when l was closed first.
func (l *link) attach(server net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		_ = server.Close()
		return false
	}
	l.server = server
	return true
}

func (l *link) close(reset bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	if reset {
		if tc, ok := l.client.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	}
	_ = l.client.Close()
	if l.server != nil {
		_ = l.server.Close()
	}
}

func (p *Proxy) serve(client net.Conn, wait time.Duration) {
	l := &link{client: client}
	p.mu.Lock()
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		l.close(false)
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	if wait > 0 {
		// Hold the connection; what the client sends meanwhile waits in the socket.
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
			return
		}
	}
	server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		_ = server.Close()
		return
	}
	if !l.attach(server) {
		return
	}
	var pumps sync.WaitGroup
	pumps.Go(func() { p.pump(l, client, server, 0); l.close(false) })
	pumps.Go(func() { p.pump(l, server, client, 1); l.close(false) })
	pumps.Wait()
}

// chunk is a piece of the byte stream and when to forward it.
type chunk struct {
	data []byte
	at   time.Time
}

// pump copies one direction (index 0: up, 1: down), applying the switches to every read.
// Delayed chunks go through a queue to a writer goroutine, so that order is kept.
func (p *Proxy) pump(l *link, from, to net.Conn, dir int) {
	queue := make(chan chunk, 1024)
	var writer sync.WaitGroup
	writer.Go(func() {
		for c := range queue {
			if d := time.Until(c.at); d > 0 {
				time.Sleep(d)
			}
			if _, err := to.Write(c.data); err != nil {
				l.close(false)
				for range queue { // drain until the reader stops
				}
				return
			}
		}
	})
	defer writer.Wait()
	defer close(queue)
	bit := Up
	if dir == 1 {
		bit = Down
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled&bit != 0 {
				unstall := p.unstall
				p.mu.Unlock()
				select {
				case <-unstall:
				case <-p.done:
					return
				}
				p.mu.Lock()
			}
			swallow := p.blackhole&bit != 0
			delay, jitter := p.delay[dir], p.jitter[dir]
			if swallow {
				p.stats.Swallowed += int64(n)
			} else {
				p.stats.Forwarded += int64(n)
			}
			p.mu.Unlock()
			if !swallow {
				if jitter > 0 {
					delay += time.Duration(rand.Int64N(int64(2*jitter)+1)) - jitter
				}
				data := append([]byte(nil), buf[:n]...)
				queue <- chunk{data: data, at: time.Now().Add(max(delay, 0))}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				l.close(false)
			}
			return
		}
	}
}
