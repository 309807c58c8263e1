package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/mutation"
)

// contention is one participant's contention: for a contender, its node and the watches
// that tell it when to look again; for a retriever, the watches only. One goroutine (run)
// does all its I/O, so its node is created, found again and deleted in order.
type contention struct {
	b      *Backend
	p      simba.Participant
	log    *slog.Logger
	parent string // /simba/<mutex>
	data   []byte // the contender ID, the node's data

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
	nodeSession int64  // the session that owns node (its ephemeralOwner)
	czxid       int64  // node's czxid: the fencing token while it owns
	pending     string // protection prefix of a create whose outcome is unknown
	isStarted   bool
	served      bool // a one-tenure participant (WaitsOnly) was reported the owner

	// Guarded by b.mu.
	gen       uint64              // bumped by every event that may make view stale
	view      view                // the last view installed
	last      simba.Owner         // the last Owner reported
	since     time.Time           // when view.ownerPath was first seen as the owner
	sincePath string              // the owner node since refers to
	interest  map[string]struct{} // nodes whose events concern this contention
	lastErr   error               // the last failure, for StartContend's error
	mine      string              // the name of node, for OthersWaiting
	next      string              // view.before, deleted since (see promote)
}

// view is what one evaluation found: who owns the mutex, as of when.
type view struct {
	valid     bool
	self      bool   // the owner node is this contender's
	ownerPath string // the owner's node; empty: no owner
	owner     string // the owner's contender ID (its node's data)
	token     uint64 // the owner node's czxid
	watched   []string
	node      string    // the contender's node it was read with
	before    string    // the owner's node when it is just before node: its deletion makes node the owner
	epoch     uint64    // the session epoch it was read in
	gen       uint64    // the contention's gen when the evaluation began
	confirmed time.Time // the backend's proof that the session is alive (Backend.alive)
	timeout   time.Duration
}

func newContention(b *Backend, p simba.Participant) *contention {
	log := p.Logger
	if log == nil {
		log = b.log
	}
	life, endLife := context.WithCancel(context.Background())
	return &contention{
		life:     life,
		endLife:  endLife,
		b:        b,
		p:        p,
		log:      log,
		parent:   mutexPath(p.Mutex),
		data:     []byte(p.ContenderID),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		started:  make(chan struct{}),
		interest: make(map[string]struct{}),
	}
}

var _ simba.Contention = (*contention)(nil)

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

var _ simba.WaitList = (*contention)(nil)

// OthersWaiting reports whether other contenders have nodes under the mutex, that is
// whether anyone waits behind this contender: the ZooKeeper queue is the wait list. A
// retriever's answer counts every contender.
func (c *contention) OthersWaiting(ctx context.Context) (bool, error) {
	b := c.b
	b.mu.Lock()
	mine := c.mine
	b.mu.Unlock()
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

// step evaluates the mutex once, if there is a session. again asks for another step at
// once: something changed while it looked.
func (c *contention) step(ctx context.Context) (again bool, err error) {
	b := c.b
	b.mu.Lock()
	s, gen := b.sess, c.gen
	next := c.next != "" && c.next == c.view.before && c.view.node == c.node && c.view.epoch == s.epoch
	c.next = ""
	b.mu.Unlock()
	if !s.up {
		return false, nil // sync pokes every contention when the session is back
	}
	var v view
	switch {
	case c.p.ContenderID == "":
		v, again, err = c.observe(ctx)
	case next && c.promote():
		v = view{self: true, ownerPath: c.node, owner: c.p.ContenderID, token: uint64(c.czxid), watched: []string{c.node}, node: c.node}
	default:
		v, again, err = c.contend(ctx, s)
	}
	if err != nil || again || c.halted() {
		return again, err
	}
	return c.install(s, gen, v), nil
}

// contend makes sure the contender has a node in session s and finds out who owns the
// mutex: the lowest node. A non-owner watches the node just before its own, which is
// deleted when that contender leaves, and, unless it only waits for its turn
// (Participant.WaitsOnly), the owner's node, which is deleted when the mutex changes hands.
func (c *contention) contend(ctx context.Context, s session) (view, bool, error) {
	if c.node != "" && c.nodeSession != 0 && c.nodeSession != s.id {
		c.forgetNode() // an ephemeral node ends with its session
	}
	if c.node == "" {
		if c.served {
			// A participant that serves one tenure (Participant.WaitsOnly: a Locker's)
			// lost it with its node. It does not queue again: its StopContend follows, and
			// a new node would make it the owner again meanwhile, for nobody.
			return view{}, false, nil
		}
		if err := c.join(ctx); err != nil {
			return view{}, false, err
		}
		if c.halted() {
			return view{}, false, nil
		}
	}
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
		return view{}, false, storeError("watch", c.node, ownErr)
	}
	if !own {
		c.forgetNode()
		return view{}, true, nil
	}
	if ownStat != nil {
		if ownStat.EphemeralOwner != c.b.sessionID() {
			// A node of an ended session (found by its protection prefix after the
			// session expired): the server is deleting it with its session.
			c.forgetNode()
			return view{}, true, nil
		}
		// Usually s.id; a create queued while the session expired is sent in the next
		// one. If the session changed, install discards this view and step looks again.
		c.czxid, c.nodeSession = ownStat.Czxid, ownStat.EphemeralOwner
	}
	switch {
	case errors.Is(kidsErr, zk.ErrNoNode):
		c.forgetNode() // the mutex node is gone, and so the contender's node
		return view{}, true, nil
	case kidsErr != nil:
		return view{}, false, storeError("list", c.parent, kidsErr)
	}
	nodes := latches(kids)
	i := index(nodes, base(c.node))
	if i < 0 {
		c.forgetNode() // listed after its creation, so deleted since
		return view{}, true, nil
	}
	if i == 0 {
		token := uint64(c.czxid)
		if mutation.On("sequence-token") {
			token = uint64(nodes[0].seq) + 1 // restarts when the reaped parent is created again
		}
		return view{self: true, ownerPath: c.node, owner: c.p.ContenderID, token: token,
			watched: []string{c.node}}, false, nil
	}
	pred := c.parent + "/" + nodes[i-1].name
	head := c.parent + "/" + nodes[0].name
	if c.p.WaitsOnly && !c.p.Once && pred != head {
		return c.waitBehind(ctx, pred)
	}
	var (
		data            []byte
		headStat        *zk.Stat
		headErr, preErr error
		pre             = true
	)
	readHead := func() { data, headStat, headErr = c.get(ctx, head) }
	waitsOnly := c.p.WaitsOnly && pred != head
	if waitsOnly {
		// A single attempt (Participant.Once) is told the owner, but only the predecessor
		// decides its turn: the owner is read without a watch.
		readHead = func() {
			var n node
			n, headErr = c.b.get(ctx, head)
			data, headStat = n.data, n.st
		}
	}
	before := ""
	if pred == head {
		readHead()
		before = head
	} else {
		together(readHead, func() { pre, _, preErr = c.watchNode(ctx, pred) })
		// The owner left while this contender looked (a short tenure, a busy mutex): the
		// first of the nodes before this contender's that still exists owns the mutex
		// now. No lower node can have come since (sequence numbers only grow), and the
		// predecessor, there when it was watched, ends the walk; if it goes meanwhile,
		// its watch makes the contention look again. One read per node instead of
		// another whole look (list, owner, predecessor).
		for j := 1; j < i && pre && preErr == nil && errors.Is(headErr, zk.ErrNoNode); j++ {
			head = c.parent + "/" + nodes[j].name
			readHead()
		}
		if head == pred {
			before = head // every node before it is gone
		}
	}
	if mutation.On("promote-any-predecessor") {
		before = pred
	}
	watched := []string{c.node, pred, head}
	if waitsOnly {
		watched = watched[:2]
	}
	switch {
	case errors.Is(headErr, zk.ErrNoNode) || !pre:
		return view{}, true, nil // the owner or the predecessor left: look again
	case headErr != nil:
		return view{}, false, storeError("read", head, headErr)
	case preErr != nil:
		return view{}, false, storeError("watch", pred, preErr)
	}
	v := view{ownerPath: head, owner: string(data), token: uint64(headStat.Czxid),
		watched: watched, node: c.node, before: before}
	if v.owner == c.p.ContenderID {
		// Another node carries this contender's ID. Only its own node makes a contender
		// the owner. A node of this backend's sessions is one a contention of this
		// contender left behind when it stopped (its delete was lost, or is under
		// way): it is deleted, and the mutex looked at again. Any other is a
		// contender elsewhere with the same ID, and the owner is reported as unknown
		// rather than as this contender.
		c.b.mu.Lock()
		ours := headStat.EphemeralOwner == c.b.sess.id || c.b.past[headStat.EphemeralOwner]
		c.b.mu.Unlock()
		if ours {
			c.log.Info("simba/zookeeper: deleting a node this contender left behind", "node", head)
			if err := c.b.delete(ctx, head); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return view{}, false, storeError("delete", head, err)
			}
			return view{}, true, nil
		}
		c.log.Warn("simba/zookeeper: the owner's node carries this contender's ID: two contenders share an ID", "node", head)
		v.owner, v.token = "", 0
	}
	return v, false, nil
}

// waitBehind ends the look of a waiter that only waits for its turn (Participant.WaitsOnly)
// and has other waiters between it and the owner: only the node just before its own
// decides its turn, so that node is all it reads, with a watch that fires when it goes.
// The owner is not read, and the view names none (it is not this contender). With 8
// Lockers on one mutex, reading the owner, and the next nodes when the owner had just
// left, cost 1.9 of the 7.9 requests per critical section.
func (c *contention) waitBehind(ctx context.Context, pred string) (view, bool, error) {
	pre, _, err := c.watchNode(ctx, pred)
	switch {
	case err != nil:
		return view{}, false, storeError("watch", pred, err)
	case !pre:
		return view{}, true, nil // the predecessor left: look again
	}
	return view{watched: []string{c.node, pred}, node: c.node}, false, nil
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

// join gives the contender a node: the one a create whose reply was lost made, if it
// exists, or a new one.
func (c *contention) join(ctx context.Context) error {
	if prefix := c.pending; prefix != "" {
		kids, err := c.b.children(ctx, c.parent)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return storeError("list", c.parent, err)
		}
		c.pending = ""
		c.forgetNode()
		for _, k := range kids {
			if strings.HasPrefix(k, prefix) {
				c.setNode(c.parent + "/" + k)
			}
		}
		if c.node != "" {
			c.log.Info("simba/zookeeper: found the node of a create whose reply was lost", "node", c.node)
			return nil
		}
	}
	prefix := newProtection()
	c.pending = prefix
	path, err := c.create(ctx, prefix)
	if err != nil {
		if answered(err) {
			c.pending = ""
		}
		return err
	}
	c.pending = ""
	c.setNode(path)
	return nil
}

// create creates the contender's node, and the container nodes above it when missing.
func (c *contention) create(ctx context.Context, prefix string) (string, error) {
	p := c.parent + "/" + prefix + latchName
	for range 4 {
		path, err := c.b.create(ctx, p, c.data, zk.FlagEphemeralSequential)
		if !errors.Is(err, zk.ErrNoNode) {
			if err != nil {
				return "", storeError("create", p, err)
			}
			return path, nil
		}
		// ErrNoNode: the server reaped /simba, empty, before the mutex node was made under
		// it. Both are made again.
		if err := c.b.makeParents(ctx, c.parent); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return "", err
		}
	}
	return "", storeError("create", p, fmt.Errorf("%s keeps disappearing: %w", c.parent, zk.ErrNoNode))
}

// observe finds out who owns the mutex without contending, for a retriever: it watches
// the owner's node, or, when there is none, the mutex node for the first contender.
func (c *contention) observe(ctx context.Context) (view, bool, error) {
	kids, err := c.b.children(ctx, c.parent)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		ok, _, err := c.exists(ctx, c.parent)
		if err != nil {
			return view{}, false, storeError("watch", c.parent, err)
		}
		if ok {
			return view{}, true, nil
		}
		return view{watched: []string{c.parent}}, false, nil
	case err != nil:
		return view{}, false, storeError("list", c.parent, err)
	}
	nodes := latches(kids)
	if len(nodes) == 0 {
		kids, err := c.children(ctx, c.parent)
		switch {
		case errors.Is(err, zk.ErrNoNode) || len(latches(kids)) > 0:
			return view{}, true, nil
		case err != nil:
			return view{}, false, storeError("watch", c.parent, err)
		}
		return view{watched: []string{c.parent}}, false, nil
	}
	head := c.parent + "/" + nodes[0].name
	data, st, err := c.get(ctx, head)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return view{}, true, nil
	case err != nil:
		return view{}, false, storeError("read", head, err)
	}
	return view{ownerPath: head, owner: string(data), token: uint64(st.Czxid),
		watched: []string{head}}, false, nil
}

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

// setNode makes path the contender's node (empty: none).
func (c *contention) setNode(path string) {
	c.node, c.czxid, c.nodeSession = path, 0, 0
	c.b.mu.Lock()
	c.mine = base(path)
	c.b.mu.Unlock()
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
	if !c.last.IsZero() {
		c.last = simba.Owner{}
		c.p.Report(simba.Owner{})
	}
}

// publish reports c's view. An owner record is believed until its TTLAt: the proof that
// the session is alive (Backend.alive), plus the session timeout, less 1% for clock-rate
// drift. The session cannot expire on the ensemble's leader before then, so the owner's
// node cannot be gone and succeeded before then either. Called with b.mu held.
func (c *contention) publish() {
	v := c.view
	o := simba.Owner{}
	if v.valid && v.owner != "" {
		end := v.confirmed.Add(v.timeout - v.timeout/100)
		o = simba.Owner{ID: v.owner, AcquiredAt: c.since, TTLAt: end, TransitionAt: end, Token: v.token}
	}
	if o.IsZero() && c.last.IsZero() {
		return
	}
	c.last = o
	c.p.Report(o)
}

// leave deletes the contender's node when the contention stops, within StopContend's
// deadline or, without one, the bound of the backend's own requests. Without a session,
// or when the delete's outcome is unknown (the connection broke, or no answer came in
// time), the node is left to the backend.
func (c *contention) leave() {
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
	}
	if c.node != "" && (c.nodeSession == 0 || c.nodeSession == s.id) {
		o := orphan{parent: c.parent, name: base(c.node)}
		switch err := c.deleteNode(s); {
		case err == nil:
		case transient(err) || !s.up:
			left = append(left, o)
			c.leaveErr = err
		default:
			c.leaveErr = err
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

func (c *contention) deleteNode(s session) error {
	if !s.up {
		return fmt.Errorf("simba/zookeeper: delete %s: %w", c.node, ErrNoSession)
	}
	dl := time.Now().Add(c.b.bound())
	if by := c.stopBy.Load(); by != nil {
		dl = *by
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	err := c.b.delete(ctx, c.node)
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	return c.b.explain(storeError("delete", c.node, err))
}

// together runs f and g at once and returns when both have: two independent requests on
// one connection cost one round trip instead of two.
func together(f, g func()) {
	var wg sync.WaitGroup
	wg.Go(g)
	f()
	wg.Wait()
}
