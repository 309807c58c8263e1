package redis

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Backoff of the subscription reader while the server cannot be reached.
const (
	minReceiveBackoff = 10 * time.Millisecond
	maxReceiveBackoff = time.Second
)

// linger is how long a channel stays subscribed after its last listener left (see the
// package doc, Subscriptions).
const linger = time.Second

// hub is a backend's one subscription connection: it carries the channels of all the
// backend's contentions and routes each message to those listening on its channel (see
// the package doc, Subscriptions). No call of a contention waits for it: two goroutines,
// started with the first join and stopped by close, do its I/O.
type hub struct {
	client goredis.UniversalClient
	log    *slog.Logger
	ping   time.Duration

	mu        sync.Mutex
	routes    map[string]map[*contention]struct{} // by channel: who listens; empty while it lingers
	confirmed map[string]bool                     // subscriptions the server confirmed on the current connection
	idle      map[string]time.Time                // subscribed channels nobody listens on, since when
	wakeAt    time.Time                           // when the writer's timer ends the next linger; zero: not set
	ps        *goredis.PubSub                     // nil until the first join
	closed    bool
	cancel    context.CancelFunc // ends the goroutines

	kick chan struct{} // capacity 1: the routes changed, or the connection was replaced
	wg   sync.WaitGroup

	routing []*contention // the reader's: whom the message it routes goes to, reused
}

func newHub(client goredis.UniversalClient, log *slog.Logger, ping time.Duration) *hub {
	return &hub{
		client:    client,
		log:       log,
		ping:      ping,
		routes:    map[string]map[*contention]struct{}{},
		confirmed: map[string]bool{},
		idle:      map[string]time.Time{},
		kick:      make(chan struct{}, 1),
	}
}

// join adds c to the routes of its channels. A contention whose channels are all
// subscribed already resyncs at once; otherwise it does when the server confirms.
func (h *hub) join(c *contention) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if h.addRoutes(c) {
		c.resync()
	}
	if h.ps == nil {
		h.start()
	}
	// The writer subscribes: join and leave only change the routes, so that an
	// acquisition never waits for a dial and Stop never waits for a server that does not
	// answer.
	h.poke()
}

// joinIfLive adds c to the routes of its channels if the server has confirmed all of
// them (they are still subscribed for a contention that left moments ago: see linger),
// and reports whether it did. A contention that joins before its first store call misses
// nothing and need not resync.
func (h *hub) joinIfLive(c *contention) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return false
	}
	chs, n := c.channels()
	for _, ch := range chs[:n] {
		if !h.confirmed[ch] {
			return false
		}
	}
	h.addRoutes(c)
	return true
}

// addRoutes adds c to the routes of its channels and reports whether all of them are
// confirmed. Called with h.mu held.
func (h *hub) addRoutes(c *contention) bool {
	live := true
	chs, n := c.channels()
	if c.routed == nil {
		c.routed = make([]string, 0, n)
	}
	for _, ch := range chs[:n] {
		members := h.routes[ch]
		if members == nil {
			members = map[*contention]struct{}{}
			h.routes[ch] = members
		}
		if _, ok := members[c]; !ok {
			members[c] = struct{}{}
			c.routed = append(c.routed, ch)
		}
		live = live && h.confirmed[ch]
	}
	return live
}

// leave removes c from its routes; the writer unsubscribes the channels nobody has
// listened on for linger.
func (h *hub) leave(c *contention) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	for _, ch := range c.routed {
		members := h.routes[ch]
		delete(members, c)
		if len(members) == 0 {
			// Kept, empty, until the writer unsubscribes the channel: a contention that
			// joins it meanwhile (a Locker's next section) makes no new one.
			h.idle[ch] = now
		}
	}
	c.routed = nil
	// A writer whose timer is set wakes before these channels' linger ends (it ends
	// another's, which began earlier) and sets the timer again for theirs: with Lockers
	// taking turns, waking it at every release would cost a goroutine wake-up each.
	if h.ps != nil && h.wakeAt.IsZero() {
		h.poke()
	}
}

// start creates the PubSub, which does no I/O before its first subscription, and starts
// the goroutines. Called with h.mu held.
func (h *hub) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.ps = h.client.Subscribe(ctx)
	h.wg.Go(func() { h.write(ctx) })
	h.wg.Go(func() { h.read(ctx) })
}

func (h *hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// close closes the connection and waits for the goroutines to return.
func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	cancel, ps := h.cancel, h.ps
	h.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	_ = ps.Close()
	h.wg.Wait()
}

// hearsAll reports whether the server has confirmed every channel of c on the current
// connection: a contention resyncs once, when the last of them is confirmed.
func (h *hub) hearsAll(c *contention) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ch := range c.routed {
		if !h.confirmed[ch] {
			return false
		}
	}
	return true
}

// hears reports whether the server has confirmed the subscription of channel on the
// current connection.
func (h *hub) hears(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.confirmed[channel]
}

// current returns the PubSub in use.
func (h *hub) current() *goredis.PubSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ps
}

// write brings the subscriptions in line with the routes whenever it is poked: it
// subscribes the channels that gained listeners and unsubscribes those that have had none
// for linger. Changes that cancel out before it runs cost nothing.
func (h *hub) write(ctx context.Context) {
	var (
		ps    *goredis.PubSub
		sent  = map[string]bool{} // what was asked of ps
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.kick:
		case <-timer.C:
		}
		h.mu.Lock()
		if h.ps != ps {
			ps = h.ps // a new connection: everything anew
			clear(sent)
			clear(h.idle)
		}
		add, drop, next := h.changes(sent, time.Now())
		h.mu.Unlock()
		if next > 0 {
			timer.Reset(next)
		}
		h.send(ctx, ps, add, drop)
	}
}

// changes returns the channels to subscribe and those to unsubscribe, given those asked of
// the connection (sent, which it updates), and how long until an idle channel's linger
// ends, or a linger when a channel left and joined again (zero: neither), which the
// writer's timer is then set for. Called with h.mu held.
func (h *hub) changes(sent map[string]bool, now time.Time) (add, drop []string, next time.Duration) {
	for ch, members := range h.routes {
		if len(members) == 0 {
			if !sent[ch] {
				delete(h.routes, ch) // left before it was subscribed, or on a replaced connection
			}
			continue
		}
		if _, left := h.idle[ch]; left {
			delete(h.idle, ch)
			// Left and joined again since the writer last ran, as a Locker that takes
			// turns does at every section: the timer stays set (for a linger), so that
			// its next leave need not wake the writer either.
			next = sooner(next, linger)
		}
		if !sent[ch] {
			add = append(add, ch)
			sent[ch] = true
		}
	}
	for ch := range h.idle {
		if !sent[ch] {
			delete(h.idle, ch) // left before it was subscribed: nothing to unsubscribe
		}
	}
	for ch := range sent {
		if len(h.routes[ch]) > 0 {
			continue
		}
		since, ok := h.idle[ch]
		if !ok {
			since = now
			h.idle[ch] = now
		}
		if wait := linger - now.Sub(since); wait > 0 {
			next = sooner(next, wait)
			continue
		}
		drop = append(drop, ch)
		delete(sent, ch)
		delete(h.idle, ch)
		delete(h.routes, ch)
		// From now on the channel is not heard: a contention that joins it again waits
		// for its new confirmation.
		delete(h.confirmed, ch)
	}
	h.wakeAt = time.Time{}
	if next > 0 {
		h.wakeAt = now.Add(next) // the writer sets its timer for it
	}
	return add, drop, next
}

// send asks the connection to subscribe add and unsubscribe drop. go-redis records the
// channels even when the command cannot be sent, and sends the recorded ones again when it
// reconnects: an error needs no retry here.
func (h *hub) send(ctx context.Context, ps *goredis.PubSub, add, drop []string) {
	if len(add) == 0 && len(drop) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, h.ping)
	defer cancel()
	if len(add) > 0 {
		if err := ps.Subscribe(cctx, add...); err != nil && ctx.Err() == nil {
			h.failed("simba/redis: subscribe failed; it is sent again when the connection is back", err)
		}
	}
	if len(drop) > 0 {
		if err := ps.Unsubscribe(cctx, drop...); err != nil && ctx.Err() == nil {
			h.log.Debug("simba/redis: unsubscribe failed", "err", err)
		}
	}
}

// read receives and routes messages until ctx ends. When the connection has been quiet
// for a ping interval it sends a PING; when no answer has come a ping interval later, it
// replaces the connection.
func (h *hub) read(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		pinged  bool
		backoff time.Duration
	)
	for {
		ps := h.current()
		msg, err := ps.ReceiveTimeout(ctx, h.ping)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil:
			pinged, backoff = false, 0
			h.route(msg)
		case isTimeout(err) && !pinged:
			pinged = true
			if err := ps.Ping(ctx); err != nil {
				h.log.Debug("simba/redis: ping on the subscription connection failed", "err", err)
			}
		case isTimeout(err):
			h.log.Warn("simba/redis: the subscription connection did not answer a ping; replacing it")
			h.replace(ps)
			pinged = false
		default:
			// go-redis has closed the connection and dials again at the next receive;
			// every channel must be confirmed anew.
			h.unconfirm()
			if backoff == 0 {
				h.failed("simba/redis: subscription connection lost; reconnecting", err)
			}
			backoff = min(max(2*backoff, minReceiveBackoff), maxReceiveBackoff)
			timer.Reset(backoff)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
	}
}

// failed logs an error of the subscription connection at Warn level with msg, or a
// refusal (see refuses) at Error level, wrapped in ErrRefused: the server will refuse
// the connection until someone changes its configuration or the client's, and waiters
// poll meanwhile (every contender contends on its contend period), without hearing of
// releases. The store calls of the contentions meet most refusals themselves.
func (h *hub) failed(msg string, err error) {
	if !refuses(h.client, err) {
		h.log.Warn(msg, "err", err)
		return
	}
	h.log.Error("simba/redis: the server refused the subscription connection; waiters hear of no release until it is fixed",
		"err", failure(context.Background(), "subscribe: server refused the client", err, ErrRefused))
}

// replace swaps old for a new PubSub, closes old, and has the writer subscribe every
// channel on the new one.
func (h *hub) replace(old *goredis.PubSub) {
	h.mu.Lock()
	if h.closed || h.ps != old {
		h.mu.Unlock()
		return
	}
	h.ps = h.client.Subscribe(context.Background()) // no channels: no I/O yet
	clear(h.confirmed)
	h.mu.Unlock()
	_ = old.Close()
	h.poke()
}

// unconfirm forgets every confirmation: the connection they were made on is gone.
func (h *hub) unconfirm() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.confirmed)
}

// route delivers one message: a confirmed subscription wakes the channel's contentions,
// a message is a hint each contention judges for itself.
func (h *hub) route(msg any) {
	switch m := msg.(type) {
	case *goredis.Subscription:
		switch m.Kind {
		case "subscribe":
			for _, c := range h.members(m.Channel, true) {
				if h.hearsAll(c) {
					c.resync()
				}
			}
			clear(h.routing) // no contention kept from the collector by a stale entry
		case "unsubscribe":
			h.mu.Lock()
			delete(h.confirmed, m.Channel)
			h.mu.Unlock()
		}
	case *goredis.Message:
		msg, ok := parseMessage(m.Payload)
		if !ok {
			h.log.Debug("simba/redis: ignored a message", "channel", m.Channel, "payload", m.Payload)
			return
		}
		for _, c := range h.members(m.Channel, false) {
			c.hint(m.Channel, msg)
		}
		clear(h.routing)
	}
}

// members returns the contentions listening on channel, first recording the channel's
// subscription as confirmed when confirm is set. The list is h.routing, which the next
// call reuses: called by the reader only.
func (h *hub) members(channel string, confirm bool) []*contention {
	h.mu.Lock()
	defer h.mu.Unlock()
	if confirm {
		h.confirmed[channel] = true
	}
	h.routing = h.routing[:0]
	for c := range h.routes[channel] {
		h.routing = append(h.routing, c)
	}
	return h.routing
}

// sooner returns the shorter of two waits, where zero is none.
func sooner(next, wait time.Duration) time.Duration {
	if next == 0 || wait < next {
		return wait
	}
	return next
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
