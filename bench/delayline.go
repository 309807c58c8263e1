package main

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// delayProxy forwards the connections it accepts on loopback to one upstream address and
// holds every chunk it reads, in either direction, for delay from the moment it was read
// before writing it on, in order: a network path with that latency each way and no
// bandwidth limit.
//
// internal/faultproxy delays too, but with time.Sleep, which the Go runtime's timers wake
// at a millisecond's granularity at best (epoll_wait takes milliseconds): 0.5 ms each way
// became about 1.1 ms. Here the writer sleeps in nanosleep(2) on its own thread, which
// the kernel's high-resolution timers wake about 100 µs late, so it sleeps that much
// less and spins the rest (sleepUntil).
type delayProxy struct {
	ln       net.Listener
	upstream string
	delay    time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newDelayProxy(upstream string, delay time.Duration) (*delayProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, upstream: upstream, delay: delay, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr returns the address clients connect to.
func (p *delayProxy) Addr() string { return p.ln.Addr().String() }

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *delayProxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// track adds c to the open connections; false, with c closed, after Close.
func (p *delayProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *delayProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *delayProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			return
		}
		p.wg.Go(func() {
			defer p.untrack(client)
			server, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
			if err != nil || !p.track(server) {
				return
			}
			defer p.untrack(server)
			// Either side ending ends both, as the peer of a broken path would see.
			var pumps sync.WaitGroup
			pumps.Go(func() { p.pump(client, server); _ = server.Close(); _ = client.Close() })
			pumps.Go(func() { p.pump(server, client); _ = server.Close(); _ = client.Close() })
			pumps.Wait()
		})
	}
}

// pump copies from to to, each chunk delay after it was read.
func (p *delayProxy) pump(from, to net.Conn) {
	type chunk struct {
		data []byte
		due  time.Time
	}
	queue := make(chan chunk, 1024)
	var writer sync.WaitGroup
	writer.Go(func() {
		for c := range queue {
			sleepUntil(c.due)
			if _, err := to.Write(c.data); err != nil {
				_ = from.Close()
				for range queue { // drain until the reader stops
				}
				return
			}
		}
	})
	defer writer.Wait()
	defer close(queue)
	buf := make([]byte, 32*1024)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			queue <- chunk{append([]byte(nil), buf[:n]...), time.Now().Add(p.delay)}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = to.Close()
			}
			return
		}
	}
}

// nanosleepLate is about how late nanosleep(2) returns on a quiet machine: the kernel's
// default timer slack (50 µs) and the thread's wake-up. sleepUntil sleeps that much less
// and spins the rest.
const nanosleepLate = 120 * time.Microsecond

// sleepUntil returns at due, or as soon after as the machine lets it: it sleeps in
// nanosleep(2), on the calling goroutine's thread, until shortly before, then yields
// until due.
func sleepUntil(due time.Time) {
	if d := time.Until(due) - nanosleepLate; d > 0 {
		ts := syscall.NsecToTimespec(int64(d))
		for syscall.Nanosleep(&ts, &ts) == syscall.EINTR { // interrupted: sleep what is left
		}
	}
	for time.Now().Before(due) {
		runtime.Gosched()
	}
}
