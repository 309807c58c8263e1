package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// contention is one participant's contention: for a contender, its node and the watches
// that tell it when to look again; for a retriever, the watches only. One goroutine (run)
// does all its I/O, so its node is created, found again and deleted in order.
type contention struct {
	b      *Backend
	p      backend.Participant
	log    *slog.Logger
	parent string // /simba/<mutex>
	data   []byte // the contender ID, the node's data
	q      *queue // the mutex's queue in this backend; c is among its users until it leaves

	kick     chan struct{} // capacity 1: look again
	stop     chan struct{} // closed by halt
	stopOnce sync.Once
	life     context.Context           // bounds every request of run; ended by halt
	endLife  context.CancelFunc        // ends life
	stopBy   atomic.Pointer[time.Time] // StopContend's deadline for leave's requests (monotonic); nil: none
	done     chan struct{}             // closed when run has returned
	started  chan struct{}             // closed at the first report, or with startErr
	startErr error
	leaveErr error // set by run before done is closed

	// Owned by run.
	node        string // this contender's node; empty when it has none
	valueNode   string // node's value node (see valueNodeOf); empty when it has none
	nodeSession int64  // the session that owns node (its ephemeralOwner)
	czxid       int64  // node's czxid: the fencing token while it owns
	pending     string // protection prefix of a create whose outcome is unknown
	state       state  // where the contention stands; changed by transition only
	isStarted   bool
	served      bool // a one-tenure participant (WaitsOnly) was reported the owner
	// Of a semaphore's or read-write lock's participant (see holdStep).
	guard        string // its node in a semaphore's guard; empty when it has none
	guardSession int64  // the session that owns guard
	admitted     bool   // node is a holder's
	token        uint64 // the hold's token, once admitted

	// Guarded by b.mu.
	gen       uint64              // bumped by every event that may make view stale
	view      view                // the last view installed
	last      backend.Record      // the last record reported
	since     time.Time           // when view.ownerPath was first seen as the owner
	sincePath string              // the owner node since refers to
	interest  map[string]struct{} // nodes whose events concern this contention
	lastErr   error               // the last failure, for StartContend's error
	holdJoin  bool                // a hand-off holds the contender's join back (see HandOff)
	rejoined  chan struct{}       // closed when the contender has a node again after a hand-off
	mine      string              // the name of node, for OthersWaiting
	ownerGone string              // view.before, deleted since (see promote)
}

// view is what one evaluation found: who owns the mutex, as of when.
type view struct {
	valid     bool
	self      bool   // the owner node is this contender's
	ownerPath string // the owner's node; empty: no owner
	owner     string // the owner's contender ID (its node's data)
	token     uint64 // the owner node's czxid
	value     string // the owner value of the tenure token names
	watched   []string
	node      string    // the contender's node it was read with
	before    string    // the owner's node when it is just before node: its deletion makes node the owner
	epoch     uint64    // the session epoch it was read in
	gen       uint64    // the contention's gen when the evaluation began
	confirmed time.Time // the backend's proof that the session is alive (Backend.alive)
	timeout   time.Duration
}

func newContention(b *Backend, p backend.Participant) *contention {
	log := p.Logger
	if log == nil {
		log = b.log
	}
	life, endLife := context.WithCancel(context.Background())
	st := joining
	if p.ContenderID == "" {
		st = observing
	}
	return &contention{
		state:    st,
		life:     life,
		endLife:  endLife,
		b:        b,
		p:        p,
		log:      log,
		parent:   holdPath(p),
		data:     []byte(p.ContenderID),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		started:  make(chan struct{}),
		interest: make(map[string]struct{}),
	}
}

var _ backend.Contention = (*contention)(nil)

// StopContend deletes the contender's node and stops watching. It returns when that is
// done, or with ctx's error when ctx ends first (the delete then waits no longer either);
// the node is then left to the backend, which deletes it in the background, or to
// ZooKeeper, which deletes it when the session ends. Without a session the node is left
// to the backend, which deletes it when the session is back; the error then wraps
// ErrNoSession.
func (c *contention) StopContend(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		c.stopBy.Store(&dl)
	}
	c.halt()
	select {
	case <-c.done:
		return c.leaveErr
	case <-ctx.Done():
		return fmt.Errorf("simba/zookeeper: node not deleted yet; left to the backend: %w", ctx.Err())
	}
}

var _ backend.WaitList = (*contention)(nil)

// OthersWaiting reports whether other contenders have nodes under the mutex, that is
// whether anyone waits behind this contender: the ZooKeeper queue is the wait list. A
// retriever's answer counts every contender.
func (c *contention) OthersWaiting(ctx context.Context) (bool, error) {
	b := c.b
	b.mu.Lock()
	mine := c.mine
	b.mu.Unlock()
	// A list even with the queue live: the queue is as fresh as the last event, and the
	// caller may have seen another contender stop just now.
	kids, err := b.children(ctx, c.parent)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return false, nil
	case err != nil:
		return false, b.explain(storeError("list", c.parent, err))
	}
	for _, l := range latches(kids) {
		if l.name != mine {
			return true, nil
		}
	}
	return false, nil
}

func (c *contention) halt() {
	c.stopOnce.Do(func() {
		close(c.stop)
		c.endLife()
	})
}

func (c *contention) halted() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

func (c *contention) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// run looks at the mutex whenever something may have changed (a watch fired, the session
// came back) until halted, then leaves.
func (c *contention) run() {
	defer close(c.done)
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	failures := 0
	for {
		select {
		case <-c.stop:
			c.leave()
			return
		case <-c.kick:
		case <-retry.C:
		}
		if c.halted() {
			c.leave()
			return
		}
		ctx, cancel := context.WithTimeout(c.life, c.b.bound())
		again, err := c.step(ctx)
		cancel()
		if err == nil {
			failures = 0
			if again {
				c.poke()
			}
			continue
		}
		if c.halted() {
			continue
		}
		failures++
		err = c.b.explain(err)
		c.b.mu.Lock()
		c.lastErr = err
		c.b.mu.Unlock()
		isRefused := errors.Is(err, simba.ErrRefused)
		if (isRefused || !transient(err)) && !c.isStarted {
			c.startErr = err
			c.isStarted = true
			close(c.started)
			continue
		}
		d := min(time.Duration(1<<min(failures, 10))*10*time.Millisecond, time.Second)
		if isRefused {
			c.log.Error("simba/zookeeper: zookeeper refused a request on the mutex; retrying", "err", err, "retry_in", d)
		} else {
			c.log.Warn("simba/zookeeper: reading the mutex failed; retrying", "err", err, "retry_in", d)
		}
		retry.Reset(d)
	}
}

// state is where a contention stands. A contender joins (creates its node), lists the
// queue to find its node's place (or, with the queue watch live, looks it up in the
// backend's copy: see queue), and then owns the mutex or waits behind the owner; a
// retriever only observes. A step whose queue has no watch yet sets one first
// (watchQueue), and begins again. Each step of the contention (run) begins (woken) from what it
// finds, and goes from state to state, doing each state's work (work), until it has a
// view to report (seen), must look again (changed) or fails. transition is the one place
// where the state changes:
//
//	from             what the work found                              to
//	(a step begins)  woken: a retriever                               observing
//	                 woken: the owner's node, just before its own,    owning (see promote)
//	                        was deleted
//	                 woken: its node was made in a session now ended  expired
//	                 woken: it has a node                             listing
//	                 woken: it has none                               joining, served or held
//	expired          dropped: it forgot its node                      joining, served or held
//	joining          joined: it has a node                            listing
//	listing          first: its node is the lowest                    owning
//	                 behind: other nodes come before its own          waiting, or queued
//	any              seen, changed                                    (stays: the step ends)
//	any              stopped, or halted meanwhile                     left
//
// Without a session no step runs: the backend ends every view when the connection is lost
// (suspend) and wakes every contention when the session is back, resumed (its node, if
// any, still there) or new (expired).
type state uint8

const (
	observing state = iota // a retriever: reads the owner's node (watching per node: and watches it, or the mutex node while nobody contends)
	joining                // creates the contender's node, or finds the one a create whose reply was lost made
	listing                // finds its node's place in the queue (watching per node: lists it, and watches its node)
	owning                 // its node is the lowest: it owns the mutex
	waiting                // behind the owner: reads the owner's node (watching per node: and watches the node before its own)
	queued                 // a Locker's waiter (watching per node: behind another waiter): reads no owner (per node: watches only the node before its own)
	expired                // its node was made in a session that has ended, and ended with it
	served                 // a one-tenure participant (WaitsOnly) whose node is gone after it owned: waits for its stop
	held                   // its node is gone in a hand-off it made: it joins again once the waiters sent back with it have (see HandOff)
	left                   // stopped: its node is deleted, or left to the backend
)

var stateNames = [...]string{"observing", "joining", "listing", "owning", "waiting", "queued", "expired", "served", "held", "left"}

func (s state) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// outcome is what a state's work found, or why a step began (woken): transition decides
// the next state from it.
type outcome uint8

const (
	failed  outcome = iota // the work failed: the step ends with its error
	woken                  // a step begins: a watch fired, the session came back, or a retry is due
	dropped                // expired: the contender forgot its node
	joined                 // joining: the contender has a node
	first                  // listing: its node is the lowest
	behind                 // listing: other nodes come before its own
	seen                   // the view to report is ready
	changed                // something read is gone, or was deleted: the next step looks again
	stopped                // the contention is stopping
)

// look is what one step began with and what its states' work has found.
type look struct {
	s        session    // the session the step began in
	mode     queueState // how the queue is read (Backend.queueMode)
	queue    bool       // the queue is live: read in the backend, not listed (see queue)
	gen      uint64     // the contention's gen when the step began (see install)
	handOver bool       // the owner's node just before the contender's was deleted (see promote)
	nodes    []latch    // the queue, as listing found it
	i        int        // the contender's place in nodes
	pred     string     // the node just before the contender's, when others come before it
	v        view       // the view to report
}

// step looks at the mutex once, if there is a session: it runs the contention from state
// to state until it has a view to report, and reports it. again asks for another step at
// once: something changed while it looked.
func (c *contention) step(ctx context.Context) (again bool, err error) {
	l := c.begin()
	if !l.s.up {
		return false, nil // sync pokes every contention when the session is back
	}
	if c.p.Hold.Kind != backend.Mutex {
		return c.holdStep(ctx, l)
	}
	if l.mode == unwatched || l.mode == adding {
		if err := c.watchQueue(ctx, l.s); err != nil {
			return false, err
		}
		return true, nil // look again: the queue is live now, or watched per node
	}
	for o := woken; ; {
		c.state = c.transition(o, &l)
		switch {
		case c.state == left:
			return false, nil // run leaves
		case o == changed:
			return true, nil
		case o == seen:
			return c.install(l.s, l.gen, l.v), nil
		}
		if o, err = c.work(ctx, &l); err != nil {
			return false, err
		}
	}
}

// begin starts a step: it reads the session, the contention's gen and whether the owner's
// node just before the contender's was deleted since the last view.
func (c *contention) begin() look {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	s := c.b.sess
	handOver := c.ownerGone != "" && c.ownerGone == c.view.before && c.view.node == c.node && c.view.epoch == s.epoch
	c.ownerGone = ""
	mode := c.b.queueMode(c.q, s.epoch)
	return look{s: s, mode: mode, queue: mode == live, gen: c.gen, handOver: handOver}
}

// transition returns the contention's next state, after what the work of its current
// state found (o). It is the only place that decides a state (see state); l is nil
// when o is stopped.
func (c *contention) transition(o outcome, l *look) state {
	if o == stopped || c.halted() {
		return left
	}
	switch o {
	case woken:
		switch {
		case c.p.ContenderID == "":
			return observing
		case l.handOver && c.promote():
			return owning
		case c.node != "" && c.nodeSession != 0 && c.nodeSession != l.s.id:
			return expired // an ephemeral node ends with its session
		case c.node != "":
			return listing
		}
		fallthrough // no node
	case dropped:
		if c.served {
			// A participant that serves one tenure (Participant.WaitsOnly: a Locker's)
			// lost it with its node. It does not queue again: its StopContend follows, and
			// a new node would make it the owner again meanwhile, for nobody.
			return served
		}
		if c.joinHeld() {
			return held
		}
		return joining
	case joined:
		return listing
	case first:
		return owning
	case behind:
		if c.p.WaitsOnly && !c.p.Once && (l.queue || l.i > 1) {
			return queued // only the nodes before its own decide its turn (see waitBehind)
		}
		return waiting
	}
	return c.state // seen, changed: the step ends, and the next begins with what it finds
}

// work does the work of the contention's state and says what it found.
func (c *contention) work(ctx context.Context, l *look) (outcome, error) {
	switch c.state {
	case observing:
		return c.observe(ctx, l)
	case expired:
		c.forgetNode()
		return dropped, nil
	case joining:
		if err := c.join(ctx, l); err != nil {
			return failed, err
		}
		return joined, nil
	case listing:
		if l.queue {
			return c.place(ctx, l)
		}
		return c.list(ctx, l)
	case owning:
		c.own(l)
		return seen, nil
	case waiting:
		if l.queue {
			return c.readQueueOwner(ctx, l)
		}
		return c.wait(ctx, l)
	case queued:
		if l.queue {
			l.v = view{node: c.node} // the queue's watch tells when the nodes before its own are gone
			return seen, nil
		}
		return c.waitBehind(ctx, l)
	case served, held:
		l.v = view{} // no owner known, nothing watched
		return seen, nil
	}
	return stopped, nil // left: run leaves
}

// join gives the contender a node: the one a create whose reply was lost made, if it
// exists, or a new one. With the queue live, the node's create answers its czxid and
// session too (create2), and a lost create is looked for in the queue.
func (c *contention) join(ctx context.Context, l *look) error {
	if prefix := c.pending; prefix != "" {
		var kids []string
		if nodes, ok := c.b.queueNodes(c.q, l.s.epoch); l.queue && ok {
			for _, n := range nodes {
				kids = append(kids, n.name)
			}
		} else {
			var err error
			kids, err = c.b.children(ctx, c.parent)
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				return storeError("list", c.parent, err)
			}
		}
		c.pending = ""
		c.forgetNode()
		for _, k := range kids {
			if strings.HasPrefix(k, prefix) {
				c.setNode(c.child(k))
			}
		}
		if c.node != "" {
			c.log.Info("simba/zookeeper: found the node of a create whose reply was lost", "node", c.node)
			return nil
		}
		if l.queue {
			// The create may still reach the server (go-zookeeper sends what it was
			// given, on a later connection too): the queue's watch will show its node,
			// which the backend then deletes (Backend.adopted).
			c.b.mu.Lock()
			c.q.abandoned = append(c.q.abandoned, prefix)
			c.b.mu.Unlock()
		}
	}
	prefix := c.newProtection()
	c.pending = prefix
	path, st, err := c.create(ctx, prefix, l.queue)
	if err != nil {
		if answered(err) {
			c.pending = ""
		}
		return err
	}
	c.pending = ""
	c.setNode(path)
	if st != nil {
		c.czxid, c.nodeSession = st.Czxid, st.EphemeralOwner
	}
	return nil
}

// create creates the contender's node, and the container nodes above it when missing.
// withStat makes it a create2, which answers the node's Stat too (ZooKeeper 3.5).
func (c *contention) create(ctx context.Context, prefix string, withStat bool) (string, *zk.Stat, error) {
	p := c.child(prefix + latchName)
	for range 4 {
		var path string
		var st *zk.Stat
		var err error
		if c.p.Value != "" {
			path, st, err = c.createWithValue(ctx, prefix)
		} else if withStat {
			var res create2Response
			res, err = c.b.create2(ctx, p, c.data, zk.FlagEphemeralSequential)
			path, st = res.Path, &res.Stat
		} else {
			path, err = c.b.create(ctx, p, c.data, zk.FlagEphemeralSequential)
		}
		if !errors.Is(err, zk.ErrNoNode) {
			if err != nil {
				return "", nil, storeError("create", p, err)
			}
			return path, st, nil
		}
		// ErrNoNode: the server reaped /simba, empty, before the mutex node was made under
		// it (or /simba-value, before the values' node). Both are made again; only the
		// values' ones when the multi failed at the value node.
		var opErr *multiOpError
		if !errors.As(err, &opErr) || opErr.op == 0 {
			if err := c.b.makeParents(ctx, c.parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return "", nil, err
			}
		}
		if c.p.Value == "" {
			continue
		}
		if err := c.b.makeContainers(ctx, valuesPath(c.p.Mutex)); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return "", nil, err
		}
	}
	return "", nil, storeError("create", p, fmt.Errorf("%s keeps disappearing: %w", c.parent, zk.ErrNoNode))
}

// list lists the queue and finds the contender's node in it, watching per node. The node
// is read too, with a watch, when it has not been yet or its watch has fired: its czxid
// is the token, its session says whether it is the contender's, and its watch tells when
// it is gone.
func (c *contention) list(ctx context.Context, l *look) (outcome, error) {
	var (
		kids            []string
		kidsErr, ownErr error
		own             = true
		ownStat         *zk.Stat
	)
	list := func() { kids, kidsErr = c.b.children(ctx, c.parent) }
	if c.czxid == 0 || !c.b.isArmed(watch{c.node, dataWatch}) {
		together(list, func() { own, ownStat, ownErr = c.watchNode(ctx, c.node) })
	} else {
		list()
	}
	if ownErr != nil {
		return failed, storeError("watch", c.node, ownErr)
	}
	if !own {
		c.forgetNode()
		return changed, nil
	}
	if ownStat != nil {
		if ownStat.EphemeralOwner != c.b.sessionID() {
			// A node of an ended session (found by its protection prefix after the
			// session expired): the server is deleting it with its session.
			c.forgetNode()
			return changed, nil
		}
		// Usually s.id; a create queued while the session expired is sent in the next
		// one. If the session changed, install discards this view and step looks again.
		c.czxid, c.nodeSession = ownStat.Czxid, ownStat.EphemeralOwner
	}
	switch {
	case errors.Is(kidsErr, zk.ErrNoNode):
		c.forgetNode() // the mutex node is gone, and so the contender's node
		return changed, nil
	case kidsErr != nil:
		return failed, storeError("list", c.parent, kidsErr)
	}
	l.nodes = latches(kids)
	c.b.queueShort(c.q, l.s.epoch, len(l.nodes))
	return c.locate(l), nil
}

// locate finds the contender's node in the queue l.nodes, made after its creation.
func (c *contention) locate(l *look) outcome {
	l.i = index(l.nodes, base(c.node))
	switch {
	case l.i < 0:
		c.forgetNode() // in a queue made after its creation, so deleted since
		return changed
	case l.i == 0:
		return first
	}
	l.pred = c.child(l.nodes[l.i-1].name)
	return behind
}

// own makes the view of the owner: the contender's node, whose czxid is the token.
func (c *contention) own(l *look) {
	token := uint64(c.czxid)
	l.v = view{self: true, ownerPath: c.node, owner: c.p.ContenderID, token: token, value: c.p.Value,
		watched: []string{c.node}, node: c.node}
}

// promote reports whether the contender owns the mutex without listing the queue again,
// after the owner's node, which was just before its own, was deleted (view.before, seen by
// Backend.nodeEvent). Every node below the contender's was in the list that found the
// owner just before it (sequence numbers only grow, and the list came after the create),
// so the contender's node is the lowest now, if it is still there: its watch has not
// fired, and it was made in this session. The ZooKeeper recipe lists again here; this
// saves a round trip per hand-over.
func (c *contention) promote() bool {
	if c.node == "" || c.czxid == 0 || c.nodeSession != c.b.sessionID() {
		return false
	}
	return c.b.isArmed(watch{c.node, dataWatch})
}

// wait finds out who owns the mutex for a contender behind the owner, watching per
// node: it reads the owner's node and watches the node just before its own, which is
// deleted when that contender leaves, and, unless it only waits for its turn
// (Participant.WaitsOnly), the owner's node, which is deleted when the mutex changes
// hands.
func (c *contention) wait(ctx context.Context, l *look) (outcome, error) {
	pred := l.pred
	// A single attempt (Participant.Once) is told the owner, but only the predecessor
	// decides its turn: the owner is read without a watch.
	waitsOnly := c.p.WaitsOnly && l.i > 1
	r := c.readOwner(ctx, l, waitsOnly)
	before := ""
	if r.path == pred {
		before = pred // the owner's node is just before the contender's: its deletion hands over (see promote)
	}
	watched := []string{c.node, pred, r.path}
	if waitsOnly {
		watched = watched[:2]
	}
	switch {
	case errors.Is(r.err, zk.ErrNoNode) || !r.pred:
		return changed, nil // the owner or the predecessor left: look again
	case r.err != nil:
		return failed, storeError("read", r.path, r.err)
	case r.predErr != nil:
		return failed, storeError("watch", pred, r.predErr)
	}
	l.v = view{ownerPath: r.path, owner: string(r.data), token: uint64(r.st.Czxid), value: r.value,
		watched: watched, node: c.node, before: before}
	if l.v.owner == c.p.ContenderID {
		return c.sharedID(ctx, l, r.st)
	}
	return seen, nil
}

// ownerRead is what a waiter read of the owner's node and of the node before its own.
type ownerRead struct {
	path    string // the owner's node: the first node of the queue that still exists
	data    []byte
	st      *zk.Stat
	value   string // the owner value of the tenure the node is
	err     error
	pred    bool // the node before the contender's exists
	predErr error
}

// readOwner reads the owner's node, with a watch unless waitsOnly, and, at once, watches
// the node before the contender's when it is another one.
func (c *contention) readOwner(ctx context.Context, l *look, waitsOnly bool) ownerRead {
	r := ownerRead{path: c.child(l.nodes[0].name), pred: true}
	get := c.watchedRead
	if waitsOnly {
		get = c.b.get
	}
	read := func() {
		var n node
		n, r.value, r.err = c.readOwnerNode(ctx, r.path, get)
		r.data, r.st = n.data, n.st
	}
	if l.i == 1 {
		read() // the owner's node is the one before the contender's
		return r
	}
	together(read, func() { r.pred, _, r.predErr = c.watchNode(ctx, l.pred) })
	// The owner left while this contender looked (a short tenure, a busy mutex): the
	// first of the nodes before this contender's that still exists owns the mutex
	// now. No lower node can have come since (sequence numbers only grow), and the
	// predecessor, there when it was watched, ends the walk; if it goes meanwhile,
	// its watch makes the contention look again. One read per node instead of
	// another whole look (list, owner, predecessor).
	for j := 1; j < l.i && r.pred && r.predErr == nil && errors.Is(r.err, zk.ErrNoNode); j++ {
		r.path = c.child(l.nodes[j].name)
		read()
	}
	return r
}

// sharedID handles an owner's node (l.v) that carries this contender's ID. Only its own
// node makes a contender the owner. A node of this backend's sessions is one a
// contention of this contender left behind when it stopped (its delete was lost, or is
// under way): it is deleted, and the mutex looked at again. Any other is a contender
// elsewhere with the same ID, and the owner is reported as unknown rather than as this
// contender.
func (c *contention) sharedID(ctx context.Context, l *look, st *zk.Stat) (outcome, error) {
	c.b.mu.Lock()
	ours := st.EphemeralOwner == c.b.sess.id || c.b.past[st.EphemeralOwner]
	c.b.mu.Unlock()
	head := l.v.ownerPath
	if ours {
		c.log.Info("simba/zookeeper: deleting a node this contender left behind", "node", head)
		if err := c.b.delete(ctx, head); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return failed, storeError("delete", head, err)
		}
		return changed, nil
	}
	c.log.Warn("simba/zookeeper: the owner's node carries this contender's ID: two contenders share an ID", "node", head)
	l.v.owner, l.v.token, l.v.value = "", 0, ""
	return seen, nil
}

// waitBehind is the look of a queued waiter watching per node, which only waits for its
// turn (Participant.WaitsOnly) and has other waiters between it and the owner: only the node
// just before its own decides its turn, so that node is all it reads, with a watch that
// fires when it goes.
// The owner is not read, and the view names none (it is not this contender). With 8
// Lockers on one mutex, reading the owner, and the next nodes when the owner had just
// left, cost 1.9 of the 7.9 requests per critical section.
func (c *contention) waitBehind(ctx context.Context, l *look) (outcome, error) {
	pred := l.pred
	pre, _, err := c.watchNode(ctx, pred)
	switch {
	case err != nil:
		return failed, storeError("watch", pred, err)
	case !pre:
		return changed, nil // the predecessor left: look again
	}
	l.v = view{watched: []string{c.node, pred}, node: c.node}
	return seen, nil
}

// observe finds out who owns the mutex without contending, for a retriever: it reads
// the owner's node; watching per node, it watches that node, or, when there is none, the
// mutex node for the first contender.
func (c *contention) observe(ctx context.Context, l *look) (outcome, error) {
	if l.queue {
		if !c.isStarted {
			// The queue is as fresh as the last event: the answer of a request of the
			// session comes after the events of everything the server did before it,
			// so a first look also sees a contender that joined just before it began.
			if _, err := c.b.exists(ctx, c.parent); err != nil {
				return failed, storeError("read", c.parent, err)
			}
		}
		nodes, ok := c.b.queueNodes(c.q, l.s.epoch)
		if !ok {
			return changed, nil
		}
		l.nodes = nodes
		return c.readQueueOwner(ctx, l)
	}
	kids, err := c.b.children(ctx, c.parent)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		ok, _, err := c.exists(ctx, c.parent)
		if err != nil {
			return failed, storeError("watch", c.parent, err)
		}
		if ok {
			return changed, nil
		}
		l.v = view{watched: []string{c.parent}}
		return seen, nil
	case err != nil:
		return failed, storeError("list", c.parent, err)
	}
	nodes := latches(kids)
	if len(nodes) == 0 {
		kids, err := c.children(ctx, c.parent)
		switch {
		case errors.Is(err, zk.ErrNoNode) || len(latches(kids)) > 0:
			return changed, nil
		case err != nil:
			return failed, storeError("watch", c.parent, err)
		}
		l.v = view{watched: []string{c.parent}}
		return seen, nil
	}
	head := c.child(nodes[0].name)
	n, value, err := c.readOwnerNode(ctx, head, c.watchedRead)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return changed, nil
	case err != nil:
		return failed, storeError("read", head, err)
	}
	l.v = view{ownerPath: head, owner: string(n.data), token: uint64(n.st.Czxid), value: value, watched: []string{head}}
	return seen, nil
}

// child returns the path of the mutex node's child called name.
func (c *contention) child(name string) string { return c.parent + "/" + name }

// exists reads path's stat, with a data watch armed for this session.
func (c *contention) exists(ctx context.Context, path string) (bool, *zk.Stat, error) {
	armed, seq := c.b.watchFor(c, path, dataWatch)
	if armed {
		st, err := c.b.exists(ctx, path)
		return st.ok, st.st, err
	}
	st, err := c.b.existsW(ctx, path)
	if err == nil {
		c.b.setArmed(path, dataWatch, seq)
	}
	return st.ok, st.st, err
}

// watchNode reads the stat of path, a contender's node, with a data watch armed for this
// session, and reports whether the node exists. It reads the node's data rather than
// asking whether it exists: on a node that is gone already (a predecessor that left
// between the list and this read), ZooKeeper's exists would set a watch for the node's
// creation, which never comes for a sequential node's name, and the session would keep
// it for its whole life; a read of a missing node sets none.
func (c *contention) watchNode(ctx context.Context, path string) (bool, *zk.Stat, error) {
	_, st, err := c.get(ctx, path)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil, nil
	}
	return err == nil, st, err
}

// get reads path's data and stat, with a data watch armed for this session.
func (c *contention) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	armed, seq := c.b.watchFor(c, path, dataWatch)
	if armed {
		n, err := c.b.get(ctx, path)
		return n.data, n.st, err
	}
	n, err := c.b.getW(ctx, path)
	if err == nil {
		c.b.setArmed(path, dataWatch, seq)
	}
	return n.data, n.st, err
}

// children lists path's children, with a child watch armed for this session.
func (c *contention) children(ctx context.Context, path string) ([]string, error) {
	armed, seq := c.b.watchFor(c, path, childWatch)
	if armed {
		return c.b.children(ctx, path)
	}
	kids, err := c.b.childrenW(ctx, path)
	if err == nil {
		c.b.setArmed(path, childWatch, seq)
	}
	return kids, err
}

// setNode makes path the contender's node (empty: none). The value node of the node it
// replaces, gone (deleted by hand, by a hand-off, by ReleaseOwner), is left to the
// backend to delete.
func (c *contention) setNode(path string) {
	old, oldSession := c.valueNode, c.nodeSession
	c.node, c.czxid, c.nodeSession = path, 0, 0
	c.valueNode, _ = c.valueNodeOf(path)
	c.admitted, c.token = false, 0
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.mine = base(path)
	if path != "" && c.rejoined != nil {
		close(c.rejoined)
		c.rejoined = nil
	}
	if old != "" && old != c.valueNode && (oldSession == 0 || oldSession == c.b.sess.id) {
		dir, name := splitPath(old)
		c.b.collectLater(orphan{parent: dir, name: name})
	}
}

func (c *contention) forgetNode() { c.setNode("") }

// install makes v the contention's view and reports it, unless the session or anything
// watched changed since the evaluation began (gen): then it asks to look again.
func (c *contention) install(s session, gen uint64, v view) (again bool) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess.epoch != s.epoch {
		return false // sync pokes when the session is back
	}
	if c.gen != gen {
		return true
	}
	b.setInterest(c, v.watched)
	v.valid, v.epoch, v.gen, v.timeout = true, s.epoch, gen, s.timeout
	// The reads may have been answered by a server cut off from the leader; only the
	// proof that the session is alive bounds how long the view can be believed.
	v.confirmed = b.proof
	if v.ownerPath != c.sincePath {
		c.since, c.sincePath = time.Now(), v.ownerPath
	}
	c.view = v
	c.lastErr = nil
	c.publish()
	c.served = c.served || (v.self && c.p.WaitsOnly)
	if !c.isStarted {
		c.isStarted = true
		close(c.started)
	}
	return false
}

// confirm renews the local bound of c's view with a new proof that the session is alive
// (Backend.alive), if nothing has made the view stale. Called with b.mu held.
func (c *contention) confirm(epoch uint64, proof time.Time) {
	v := &c.view
	if !v.valid || v.epoch != epoch || v.gen != c.gen || !proof.After(v.confirmed) {
		return
	}
	v.confirmed = proof
	c.publish()
}

// suspend ends c's view at once: the session is lost, or this contender's node is gone.
// Called with b.mu held.
func (c *contention) suspend() {
	c.gen++
	c.view.valid = false
	if c.last != (backend.Record{}) {
		c.last = backend.Record{}
		c.p.Report(backend.Record{}, time.Now())
	}
}

// publish reports c's view. An owner record is believed until its TTLAt: the proof that
// the session is alive (Backend.alive), plus the session timeout, less 1% for clock-rate
// drift. The session cannot expire on the ensemble's leader before then, so the owner's
// node cannot be gone and succeeded before then either. Called with b.mu held.
func (c *contention) publish() {
	v := c.view
	var rec backend.Record
	if v.valid && v.owner != "" {
		life := v.timeout - v.timeout/100
		rec = backend.Record{Owner: v.owner, TTL: life, Transition: life, Held: v.confirmed.Sub(c.since), Token: v.token, Value: v.value}
	}
	if rec == (backend.Record{}) && c.last == (backend.Record{}) {
		return
	}
	c.last = rec
	c.p.Report(rec, v.confirmed)
}

// leave deletes the contender's node when the contention stops, within StopContend's
// deadline or, without one, the bound of the backend's own requests. Without a session,
// or when the delete's outcome is unknown (the connection broke, or no answer came in
// time), the node is left to the backend.
func (c *contention) leave() {
	c.state = c.transition(stopped, nil)
	b := c.b
	b.mu.Lock()
	c.suspend() // the service has ended belief already, unless the backend is closing
	b.forget(c)
	s := b.sess
	closed := b.closed
	b.mu.Unlock()
	if !c.isStarted {
		c.isStarted = true
		c.startErr = errors.New("simba/zookeeper: stopped before it started")
		close(c.started)
	}
	if closed {
		return // Close ends the session, and the session's nodes with it
	}
	var left []orphan
	if c.pending != "" {
		left = append(left, orphan{parent: c.parent, name: c.pending, prefix: true})
		if vpath, ok := c.valueNodeOf(c.child(c.pending + latchName)); ok {
			dir, name := splitPath(vpath)
			left = append(left, orphan{parent: dir, name: name})
		}
	}
	for _, n := range []struct {
		paths   []string
		session int64
	}{{[]string{c.node, c.valueNode}, c.nodeSession}, {[]string{c.guard}, c.guardSession}} {
		paths := slices.DeleteFunc(n.paths, func(p string) bool { return p == "" })
		if len(paths) == 0 || n.session != 0 && n.session != s.id {
			continue
		}
		for i, err := range c.deleteNodes(s, paths...) {
			dir, name := splitPath(paths[i])
			switch {
			case err == nil:
			case transient(err) || !s.up:
				left = append(left, orphan{parent: dir, name: name})
				c.leaveErr = err
			default:
				c.leaveErr = err
			}
		}
	}
	if len(left) == 0 {
		return
	}
	b.mu.Lock()
	for _, o := range left {
		b.leaveBehind(o)
	}
	b.mu.Unlock()
}

// deleteNodes deletes the nodes, in order, in one round trip, and returns the error of
// each: none when it is gone.
func (c *contention) deleteNodes(s session, nodes ...string) []error {
	errs := make([]error, len(nodes))
	if !s.up {
		for i, node := range nodes {
			errs[i] = fmt.Errorf("simba/zookeeper: delete %s: %w", node, ErrNoSession)
		}
		return errs
	}
	dl := time.Now().Add(c.b.bound())
	if by := c.stopBy.Load(); by != nil {
		dl = *by
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	if len(nodes) == 1 {
		errs[0] = c.b.delete(ctx, nodes[0])
	} else {
		// Only a contender with a value has two nodes, and values need the raw requests.
		calls := make([]rawCall, len(nodes))
		for i, node := range nodes {
			calls[i] = rawCall{opDelete, &zk.DeleteRequest{Path: node, Version: -1}, &emptyResponse{}}
		}
		var err error
		if errs, err = c.b.pipeline(ctx, calls...); err != nil {
			errs = slices.Repeat([]error{err}, len(nodes))
		}
	}
	for i, err := range errs {
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			errs[i] = nil
			continue
		}
		errs[i] = c.b.explain(storeError("delete", nodes[i], err))
	}
	return errs
}

// together runs f and g at once and returns when both have: two independent requests on
// one connection cost one round trip instead of two.
func together(f, g func()) {
	var wg sync.WaitGroup
	wg.Go(g)
	f()
	wg.Wait()
}
