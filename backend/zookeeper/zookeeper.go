package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Connect opens the ZooKeeper connection a Backend runs on. New calls it once with the
// callback through which the backend sees every event of the connection; Connect must
// pass that callback to zk.Connect with zk.WithEventCallback and return what zk.Connect
// returns. Everything else about the connection (servers, session timeout, dialer,
// authentication, zk's own logger) is the caller's choice:
//
//	func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
//		return zk.Connect(servers, 10*time.Second, zk.WithEventCallback(events),
//			zk.WithDialer(zookeeper.Dialer(5*time.Second)))
//	}
//
// The connection must be a new one: the Backend owns it from then on, reads the event
// channel until it closes, and closes the connection in Close.
type Connect func(events zk.EventCallback) (*zk.Conn, <-chan zk.Event, error)

// ErrNoSession is wrapped by errors of calls that need a ZooKeeper session while the
// backend has none: it is connecting, or its connection was lost and has not come back.
var ErrNoSession = errors.New("simba/zookeeper: no zookeeper session")

// Backend is the ZooKeeper backend: each contender holds an ephemeral sequential node
// under /simba/<mutex> for as long as it contends, and the contender with the lowest node
// owns the mutex (see the package documentation). A Backend runs on one connection, and
// so one session at a time, shared by all the contentions it serves.
//
// A Backend is safe for concurrent use and must not be copied.
type Backend struct {
	conn       *zk.Conn
	connEvents <-chan zk.Event // the connection's event channel, read by Close only
	acl        []zk.ACL
	log        *slog.Logger

	quit      chan struct{} // closed by Close: the keeper returns
	keepWake  chan struct{} // capacity 1: the keeper has work now
	closeOnce sync.Once
	wg        sync.WaitGroup // the keeper, the event drain and every contention's goroutine

	mu          sync.Mutex // never held while calling the connection
	closed      bool
	sawEvent    bool    // the callback has been called at least once
	sess        session // the session as the last event told
	past        map[int64]bool
	contentions map[*contention]struct{}
	interest    map[string]map[*contention]struct{} // node path -> contentions its events concern
	armed       map[watch]struct{}                  // watches this session holds that have not fired
	events      uint64                              // node events on paths of interest seen so far
	queues      map[string]*queue                   // mutex node -> its queue (see queue)
	queueLimit  int                                 // the longest queue watched whole; 0: none
	queueOff    bool                                // the server does not know addWatch
	orphans     map[orphan]struct{}                 // nodes to delete once the session is back
	refusal     error                               // the server refuses every request of the session; see heard

	// What proves the session alive on the ensemble's leader; see alive.
	connectedAt time.Time // when the connection last reported StateConnected
	proof       time.Time // the session cannot expire before proof + its timeout
	beats       []beat    // heartbeats answered on this connection, oldest first
}

// beat is a heartbeat that was answered: when it was sent and when its answer came.
type beat struct{ sent, answered time.Time }

// session is what the backend knows of its ZooKeeper session.
type session struct {
	id      int64         // zero while there is none
	timeout time.Duration // negotiated with the server
	up      bool          // connected, with a session
	epoch   uint64        // bumped whenever up or id changes
}

// watchKind is one of ZooKeeper's two watch tables: data watches (set by exists and
// getData, fired by the node's creation, change or deletion) and child watches (set by
// getChildren, fired by a change of the children or the node's deletion).
type watchKind uint8

const (
	dataWatch watchKind = iota
	childWatch
)

type watch struct {
	path string
	kind watchKind
}

// orphan is a node a contention could not delete when it stopped: by path, or, after a
// create whose reply was lost, by protection prefix under parent.
type orphan struct {
	parent string
	name   string // node name, or protection prefix when prefix is set
	prefix bool
}

var _ simba.Backend = (*Backend)(nil)

// New returns a backend on the connection that connect opens. connect is called once,
// before New returns; the connection then establishes its session in the background, and
// StartContend waits (within its context) until it has one. Options are validated before
// connect is called. Close closes the connection.
func New(connect Connect, opts ...Option) (*Backend, error) {
	if connect == nil {
		return nil, simba.InvalidArgument("connect", nil, "must not be nil")
	}
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if !timeoutReadable {
		return nil, errors.New("simba/zookeeper: this version of go-zookeeper does not keep the negotiated session timeout where the backend reads it")
	}
	b := &Backend{
		acl:         cfg.acl,
		log:         cfg.logger,
		quit:        make(chan struct{}),
		keepWake:    make(chan struct{}, 1),
		past:        make(map[int64]bool),
		contentions: make(map[*contention]struct{}),
		interest:    make(map[string]map[*contention]struct{}),
		armed:       make(map[watch]struct{}),
		orphans:     make(map[orphan]struct{}),
		queues:      make(map[string]*queue),
		queueLimit:  cfg.queueLimit,
	}
	if !rawRequests && b.queueLimit > 0 {
		b.queueLimit = 0
		b.log.Info("simba/zookeeper: this go-zookeeper is not v1.0.4, whose requests the queue watch sends: watching per node")
	}
	conn, events, err := connect(b.event)
	if err != nil {
		if refused(err) { // Connect authenticated (AddAuth), and the server refused it
			err = fmt.Errorf("%w: %w", simba.ErrRefused, err)
		}
		return nil, fmt.Errorf("simba/zookeeper: connect: %w", err)
	}
	if conn == nil {
		return nil, simba.InvalidArgument("connect", "<nil *zk.Conn>", "must return a new connection")
	}
	b.mu.Lock()
	b.conn = conn
	b.sync() // events that came before conn was known
	b.mu.Unlock()
	// The backend hears the connection through the callback; go-zookeeper drops what
	// its full channel cannot take, so nothing reads the channel before Close: a
	// goroutine woken by every event costs more than the events it would drop.
	b.connEvents = events
	b.wg.Go(b.keep)
	return b, nil
}

// Close ends every contention of the backend and closes its connection, which ends the
// session: ZooKeeper deletes the session's nodes at once, so owners are succeeded without
// waiting for the session timeout. Owners stop believing as the connection closes, and
// waiting acquisitions end with an error matching simba.ErrClosed (Participant.Closed).
// Close returns once the backend's goroutines, and the connection's, have finished.
// Later StartContend calls fail with simba.ErrClosed. Close is idempotent.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		var told []func()
		for c := range b.contentions {
			c.suspend() // owners stop believing before the session, and its nodes, end
			c.halt()
			if c.p.Closed != nil {
				told = append(told, c.p.Closed)
			}
		}
		b.mu.Unlock()
		for _, closed := range told {
			closed() // a waiting Locker's acquisition ends
		}
		b.conn.Close()
		if b.connEvents != nil {
			for range b.connEvents { // closed once the connection has shut down
			}
		}
		close(b.quit)
		b.wg.Wait()
	})
	return nil
}

// sessionID returns the ID of the current session; zero without one.
func (b *Backend) sessionID() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess.id
}

// SessionTimeout returns the session timeout that the ZooKeeper server granted the
// current (or last) session: the requested timeout clamped by the server to
// [2, 20] × tickTime by default. Zero before the first session.
func (b *Backend) SessionTimeout() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess.timeout
}

// StartContend starts a participant's contention: it creates the contender's node (a
// retriever creates none), reads who owns the mutex, reports it and returns. Without a
// session it waits for one until ctx ends. See simba.Backend.
func (b *Backend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simba/zookeeper: %w", err)
	}
	c := newContention(b, p)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("simba/zookeeper: %w", simba.ErrClosed)
	}
	b.contentions[c] = struct{}{}
	c.q = b.queueOf(c.parent, c)
	b.wg.Go(c.run) // under b.mu, so never after Close has begun to wait
	b.mu.Unlock()
	c.poke()
	select {
	case <-c.started:
		if c.startErr == nil {
			return c, nil
		}
		c.halt()
		return nil, c.startErr
	case <-ctx.Done():
		c.halt()
		return nil, fmt.Errorf("%w: %w", b.pending(c), ctx.Err())
	}
}

// pending explains why c has not reported yet, in an error with the package's prefix.
func (b *Backend) pending(c *contention) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.sawEvent:
		return fmt.Errorf("%w: the connection has reported no event; does Connect pass zk.WithEventCallback(events) to zk.Connect?", ErrNoSession)
	case !b.sess.up && b.conn.State() == zk.StateConnected && !b.connectedAt.IsZero():
		// Connected and the handshake sent: a server that takes connections and does not
		// answer (one still starting can) holds go-zookeeper ten times two thirds of the
		// session timeout, unless the dialer bounds the wait.
		return fmt.Errorf("%w: the server took the connection %v ago and has not answered the handshake (see zookeeper.Dialer)",
			ErrNoSession, time.Since(b.connectedAt).Round(time.Millisecond))
	case !b.sess.up:
		return fmt.Errorf("%w: connecting", ErrNoSession)
	case c.lastErr != nil:
		return c.lastErr
	}
	return errors.New("simba/zookeeper: no answer from zookeeper yet")
}

// event receives every event of the connection, on the connection's goroutines, in
// order. It must not block: it only updates state, reports loss of ownership at once,
// and wakes the goroutines that have work to do.
func (b *Backend) event(ev zk.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sawEvent = true
	if ev.Type == zk.EventSession {
		if ev.State == zk.StateConnected {
			// Reported before the handshake is sent: its answer proves the session
			// alive on the leader as of now (see alive).
			b.connectedAt = time.Now()
		}
		b.sync()
		return
	}
	b.nodeEvent(ev)
}

// sync brings b.sess in line with the connection's state. Called with b.mu held, from the
// event callback or, once, from New.
//
// The negotiated session timeout is read here, under b.mu: the connection writes it just
// before it reports StateHasSession, and writes it again only after it has reported
// StateConnecting through the callback, which takes b.mu. So the read never races.
func (b *Backend) sync() {
	if b.conn == nil {
		return // New calls sync once it has the connection
	}
	id := b.conn.SessionID()
	// A session with no event reported is not usable: the connection calls the callback
	// at every change of state before it goes on, so a session reached without a call
	// means that Connect did not pass the callback, and the backend would never hear its
	// watches. StartContend then waits, and says so (see pending).
	up := b.conn.State() == zk.StateHasSession && b.sawEvent
	if up == b.sess.up && id == b.sess.id {
		return
	}
	was := b.sess
	b.sess.epoch++
	b.sess.up = up
	b.beats = nil // a new connection, or none
	if id != was.id {
		if was.id != 0 {
			b.past[was.id] = true
			b.log.Info("simba/zookeeper: session ended", "session", fmt.Sprintf("0x%x", was.id))
		}
		b.sess.id = id
		clear(b.armed) // the old session's watches are gone
	}
	if !up {
		if was.up {
			b.log.Info("simba/zookeeper: disconnected; owners stop believing", "session", fmt.Sprintf("0x%x", was.id))
		}
		for c := range b.contentions {
			c.suspend()
		}
		return
	}
	b.sess.timeout = negotiatedTimeout(b.conn)
	b.proof = b.connectedAt
	b.log.Info("simba/zookeeper: connected", "session", fmt.Sprintf("0x%x", id),
		"resumed", id == was.id, "session_timeout", b.sess.timeout)
	// A reconnect may fail to restore watches (go-zookeeper only logs that), so every
	// contention reads again and re-arms what it needs.
	clear(b.armed)
	for c := range b.contentions {
		c.gen++
		c.poke()
	}
	b.wakeKeeper()
}

// nodeEvent handles a watch firing (or being dropped) for ev.Path. Called with b.mu held.
func (b *Backend) nodeEvent(ev zk.Event) {
	b.queueEvent(ev)
	if _, ok := b.interest[ev.Path]; ok {
		b.events++ // see setArmed: a watch being set on this path may have fired
	}
	switch ev.Type {
	case zk.EventNodeCreated, zk.EventNodeDataChanged:
		delete(b.armed, watch{ev.Path, dataWatch})
	case zk.EventNodeChildrenChanged:
		delete(b.armed, watch{ev.Path, childWatch})
	default: // deleted, or no longer watched
		delete(b.armed, watch{ev.Path, dataWatch})
		delete(b.armed, watch{ev.Path, childWatch})
	}
	gone := ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching
	for c := range b.interest[ev.Path] {
		c.gen++
		if ev.Type == zk.EventNodeDeleted && c.view.valid && c.view.before == ev.Path {
			c.ownerGone = ev.Path // see contention.promote
		}
		if gone && c.view.valid && c.view.self && c.view.ownerPath == ev.Path {
			c.suspend() // this contender's node is gone: it owns nothing now
		}
		c.poke()
	}
}

// isArmed reports whether this session holds a watch w that has not fired.
func (b *Backend) isArmed(w watch) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.armed[w]
	return ok
}

// watchFor registers c's interest in path and says whether a watch of kind on it is
// already armed. If not, the caller sets one and then calls armed with seq.
func (b *Backend) watchFor(c *contention, path string, kind watchKind) (armed bool, seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.interest[path]
	if m == nil {
		m = make(map[*contention]struct{})
		b.interest[path] = m
	}
	m[c] = struct{}{}
	c.interest[path] = struct{}{}
	_, armed = b.armed[watch{path, kind}]
	return armed, b.events
}

// setArmed records a watch set by a request that succeeded, unless a node event on a path
// of interest (watchFor registered path before the request) came since seq: then the
// watch may already have fired, and the next reader arms another.
// The server keeps one watch per session and node however often it is set; remembering
// it keeps go-zookeeper from piling up one channel per request on a node that does not
// change.
func (b *Backend) setArmed(path string, kind watchKind, seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.events == seq {
		b.armed[watch{path, kind}] = struct{}{}
	}
}

// setInterest makes paths the only nodes whose events concern c. Called with b.mu held.
func (b *Backend) setInterest(c *contention, paths []string) {
	keep := make(map[string]struct{}, len(paths))
	for _, p := range paths {
		keep[p] = struct{}{}
	}
	for p := range c.interest {
		if _, ok := keep[p]; !ok {
			b.drop(c, p)
		}
	}
	for p := range keep {
		m := b.interest[p]
		if m == nil {
			m = make(map[*contention]struct{})
			b.interest[p] = m
		}
		m[c] = struct{}{}
		c.interest[p] = struct{}{}
	}
}

// forget removes c from the backend. Called with b.mu held.
func (b *Backend) forget(c *contention) {
	for p := range c.interest {
		b.drop(c, p)
	}
	delete(b.contentions, c)
	delete(c.q.users, c)
	if len(c.q.users) == 0 {
		c.q.idle = time.Now()
	}
}

func (b *Backend) drop(c *contention, path string) {
	delete(c.interest, path)
	if m := b.interest[path]; m != nil {
		delete(m, c)
		if len(m) == 0 {
			delete(b.interest, path)
		}
	}
}

// leaveBehind records a node for the keeper to delete, once the session is back if it is
// not. Called with b.mu held.
func (b *Backend) leaveBehind(o orphan) {
	b.orphans[o] = struct{}{}
	b.log.Warn("simba/zookeeper: node left for the backend to delete", "node", o.parent+"/"+o.name, "by_prefix", o.prefix)
	b.wakeKeeper()
}

// collectLater records a node for the keeper to delete that nobody needs, without the
// warning of leaveBehind: the value node of a contender's node that is gone. Called with
// b.mu held.
func (b *Backend) collectLater(o orphan) {
	b.orphans[o] = struct{}{}
	b.wakeKeeper()
}

func (b *Backend) wakeKeeper() {
	select {
	case b.keepWake <- struct{}{}:
	default:
	}
}

// keep runs while the backend is open. While there is a session it sends a heartbeat
// every sixth of the session timeout, which renews the local bound on every contention's
// view (see alive), and it deletes the nodes that contentions left behind when they
// stopped without a connection. It beats while no contention runs too: the proof of a
// heartbeat lags its send time by a third of the timeout, and a contention that starts
// must find a recent one, not wait for three beats of its own before its owner may believe.
func (b *Backend) keep() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-b.quit:
			return
		case <-b.keepWake:
		case <-timer.C:
		}
		b.mu.Lock()
		s := b.sess
		orphans := make([]orphan, 0, len(b.orphans))
		for o := range b.orphans {
			orphans = append(orphans, o)
		}
		b.mu.Unlock()
		if !s.up {
			continue // sync wakes the keeper when the session is back
		}
		b.heartbeat(s)
		for _, o := range orphans {
			b.collect(o)
		}
		b.sweepQueues(s)
		timer.Reset(beatPeriod(s.timeout))
	}
}

// beatPeriod is how often the keeper sends a heartbeat, and how long it waits for one.
func beatPeriod(timeout time.Duration) time.Duration { return max(timeout/6, 10*time.Millisecond) }

// heartbeat sends a sync, which the server the connection is on passes to the ensemble's
// leader, and, when it is answered within session s, moves the proof that the session is
// alive forward (see alive) and every contention's view with it. It waits at most a
// heartbeat period for the answer.
func (b *Backend) heartbeat(s session) {
	ctx, cancel := context.WithTimeout(context.Background(), beatPeriod(s.timeout))
	defer cancel()
	sent := time.Now()
	if err := b.syncLeader(ctx, "/"); err != nil {
		b.log.Debug("simba/zookeeper: heartbeat failed", "err", err)
		return
	}
	answered := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess.epoch != s.epoch {
		return
	}
	proof := b.alive(beat{sent, answered}, s.timeout)
	if !proof.After(b.proof) {
		return
	}
	b.proof = proof
	for c := range b.contentions {
		c.confirm(s.epoch, proof)
	}
}

// alive records the heartbeat hb, answered on the current connection, and returns what it
// proves: an instant p such that the session cannot expire on the ensemble's leader before
// p plus the session timeout. Called with b.mu held.
//
// Only the leader expires sessions, and it learns that a session is alive from the
// session's own server: a follower (or observer) answers reads and the client's pings
// itself, and tells the leader which sessions it heard from in its answer to the leader's
// next ping, which the leader sends every half tick. A follower cut off from its leader
// goes on answering for up to syncLimit × tickTime (10 s with ZooKeeper's defaults),
// while the leader expires its sessions after their timeout (as low as 2 ticks, 4 s by
// default): an answer of that follower proves nothing.
//
// A sync is different: the follower passes it to the leader over the link that carries
// its answers to the leader's pings, and the leader reads that link in order. So when
// the sync of heartbeat k is answered, the leader has read every ping answer that the
// follower wrote before it passed the sync on. If the follower answered a ping of the
// leader between receiving an earlier heartbeat j and receiving k, that answer named the
// session (j had just been heard from), so the leader heard of the session after j was
// sent, and it cannot expire it before j's send time plus the timeout. The leader pings
// every half tick; so any earlier heartbeat j answered at least a third of the session
// timeout before k was sent will do, provided half a tick plus the delays of the links
// between the servers is less than that third. With ZooKeeper's default minimum session
// timeout of 2 ticks, half a tick is at most a quarter of any session timeout the server
// grants, which leaves a twelfth of the timeout for those delays.
//
// The handshake of a connection is a proof of its own: the server passes it to the leader
// (as a new session, or to revalidate a known one), which renews the session then; sync
// makes the time at which the connection reported StateConnected, just before the
// handshake was sent, the first proof of a connection.
//
// Connected to the leader itself, or to a standalone server, every answer would prove the
// session alive at its send time; the backend cannot tell and applies the rule above
// everywhere, at the cost of a bound a third of a timeout shorter.
func (b *Backend) alive(hb beat, timeout time.Duration) time.Time {
	threshold := hb.sent.Add(-timeout / 3)
	var proof time.Time
	keep := 0
	for i, j := range b.beats {
		if j.answered.After(threshold) {
			break
		}
		proof, keep = j.sent, i // a later heartbeat proves more; older ones are not needed again
	}
	b.beats = append(b.beats[keep:], hb)
	return proof
}

// collect deletes an orphan node; it is forgotten once it is surely gone.
func (b *Backend) collect(o orphan) {
	ctx, cancel := context.WithTimeout(context.Background(), b.bound())
	defer cancel()
	name := o.name
	if o.prefix {
		kids, err := b.children(ctx, o.parent)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return
		}
		name = ""
		for _, k := range kids {
			if strings.HasPrefix(k, o.name) {
				name = k
			}
		}
	}
	if name != "" {
		if err := b.delete(ctx, o.parent+"/"+name); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return
		}
	}
	b.mu.Lock()
	delete(b.orphans, o)
	b.mu.Unlock()
}

// makeParents creates /simba and /simba/<mutex> as container nodes where missing, as
// Curator does; ZooKeeper deletes a container once its last child is gone. It may delete
// an empty /simba between the two creates (a CI run saw ErrNoNode for the mutex's node):
// then both are made again, a few times at most.
func (b *Backend) makeParents(ctx context.Context, parent string) error {
	var err error
	for range 3 {
		if err = b.makeParentsOnce(ctx, parent); !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return err
}

func (b *Backend) makeParentsOnce(ctx context.Context, parent string) error {
	for _, p := range []string{rootPath, parent} {
		if _, err := b.create(ctx, p, nil, zk.FlagContainer); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return storeError("create container", p, err)
		}
	}
	return nil
}

// timeoutReadable says whether go-zookeeper keeps the negotiated session timeout in the
// field negotiatedTimeout reads. go-zookeeper v1.0.4 has no accessor for it.
var timeoutReadable = func() bool {
	f, ok := reflect.TypeFor[zk.Conn]().FieldByName("sessionTimeoutMs")
	return ok && f.Type.Kind() == reflect.Int32
}()

// negotiatedTimeout returns the session timeout the server granted conn. See sync for
// when it may be called.
func negotiatedTimeout(conn *zk.Conn) time.Duration {
	return time.Duration(reflect.ValueOf(conn).Elem().FieldByName("sessionTimeoutMs").Int()) * time.Millisecond
}

// storeError wraps an error of the connection with the operation and node, and a refusal
// in simba.ErrRefused.
func storeError(op, path string, err error) error {
	switch {
	case errors.Is(err, zk.ErrClosing):
		err = errors.Join(simba.ErrClosed, err)
	case refused(err):
		err = fmt.Errorf("%w: %w", simba.ErrRefused, err)
	}
	return fmt.Errorf("simba/zookeeper: %s %s: %w", op, path, err)
}

// errAuthRequired stands for ZooKeeper's answer SESSIONCLOSEDREQUIRESASLAUTH (-124), for
// which go-zookeeper v1.0.4 has no error of its own (it returns "unknown error: -124"):
// the server requires an authentication scheme (enforce.auth.schemes, or SASL with
// sessionRequireClientSASLAuth) that the session has not used, and drops the connection
// after the answer. go-zookeeper then dials again and resumes the session, which fares
// no better.
var errAuthRequired = errors.New("zk: the server requires authentication that the session has not given (SESSIONCLOSEDREQUIRESASLAUTH)")

// fromZK returns err, an answer of the connection, with the codes go-zookeeper does not
// name replaced by the package's errors.
func fromZK(err error) error {
	if err == nil {
		return nil
	}
	switch err.Error() {
	case "unknown error: -124":
		return errAuthRequired
	case "unknown error: -6":
		return errUnimplemented
	case "unknown error: -121":
		return errNoWatcher
	}
	return err
}

// refused reports whether err is an answer that no retry can cure: see the package
// documentation for the table of refusals and outages.
func refused(err error) bool {
	for _, e := range []error{zk.ErrNoAuth, zk.ErrAuthFailed, errAuthRequired, zk.ErrInvalidACL,
		zk.ErrNoChildrenForEphemerals, zk.ErrBadArguments, zk.ErrInvalidPath} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// transient reports whether err comes from the connection or session rather than from an
// answer about the nodes (or no answer came in time): the call is worth repeating, once
// the session is back, and the outcome of one that changes nodes is unknown. Besides
// go-zookeeper's own errors, a request that was being written when its connection broke
// gets the raw error of the write (a *net.OpError: "connection reset by peer", "broken
// pipe").
func transient(err error) bool {
	for _, e := range []error{zk.ErrConnectionClosed, zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrSessionMoved, zk.ErrClosing, ErrNoSession,
		context.DeadlineExceeded, io.EOF, io.ErrUnexpectedEOF, net.ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}

// answered reports whether a failed create surely did not create its node: the server
// refused it, or it never left this process. Any other failure (the connection broke
// while the request was out) leaves the outcome unknown.
func answered(err error) bool {
	for _, e := range []error{zk.ErrNoNode, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrBadArguments, errAuthRequired,
		zk.ErrNoChildrenForEphemerals, zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrInvalidPath, zk.ErrInvalidFlags, zk.ErrClosing} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
