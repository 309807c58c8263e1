package zookeeper

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// queue is what the backend knows of one mutex's queue of nodes, for every contention of
// the mutex in the backend. While it is live, a persistent recursive watch on the mutex
// node (addWatch), set once per session, brings every creation and deletion of a node
// under it, in the order the server applied them, and the contentions read the queue
// here instead of listing it: joining costs a create (create2, which answers the node's
// czxid, the token), and a hand-over, or the loss of the contender's node, costs no
// request at all. The price is that the session hears every change of the queue, where a
// watch per node wakes only the next contender: past DefaultQueueWatchLimit nodes that
// costs the server more than the requests it saves, so a queue longer than the limit,
// when the watch is set or later, is watched per node (see contention.list), until a
// look finds it at most half as long.
//
// The queue is exact: the server sends the events of a session's watches before the
// answer of any later request of that session, and go-zookeeper runs the event callback
// before it hands the answer over. So once the list that follows the watch is in, with
// the events that came after it applied, the queue holds every node the server holds, as
// of the last event; a create's answer comes after its own node's creation event and
// after every lower node's, and a read's answer after the deletion of every node deleted
// before it.
//
// Exact, that is, for the nodes this session may read: ZooKeeper (3.8.4 and 3.9.2 on,
// and distributions that carry the fix of CVE-2024-23944) sends no event of a node whose
// ACL denies the watcher READ. A node hidden so when it is created would leave a second
// owner believing; the sequence numbers tell: ZooKeeper numbers a sequential node with
// the count of nodes created under its parent before it, so every creation the queue
// hears must carry the next number (next), and one that does not shows that a creation
// went unheard. The mutex is then watched per node, where a node the session may not
// read fails the look (zk.ErrNoAuth, a refusal) rather than going unseen.
type queue struct {
	parent string
	users  map[*contention]struct{} // the contentions of the mutex in this backend
	idle   time.Time                // when the last user left

	// Guarded by Backend.mu, like the rest.
	epoch     uint64     // the session epoch the watch was set in: a connection's watches end with it
	watched   bool       // the watch was set in epoch (and not removed): its events come
	state     queueState // see Backend.queueMode
	after     queueState // removing: what follows an answered removal (perNode, or unwatched: forget an unused queue)
	nodes     []latch    // live: the queue, lowest sequence first
	next      int64      // live: the sequence number of the next node created under the mutex node
	early     []zk.Event // adding: the events that came before the list (and some after)
	head      headRead   // the owner's node as last read (readHead)
	abandoned []string   // protection prefixes of creates given up for lost (see join)
}

// queueState is where a queue's watch stands.
type queueState uint8

const (
	unwatched queueState = iota // no watch in this session: the next look sets one
	adding                      // the watch is being set; its events wait in early until the list is in
	live                        // nodes is the queue, kept by the watch's events
	perNode                     // the queue was long: its contentions watch per node
	removing                    // the watch is being removed, or its removal got no answer: per node
)

// headRead is a read of the node at the head of a queue.
type headRead struct {
	name  string
	data  []byte
	st    *zk.Stat
	value string // the owner value of the tenure the node is
}

// DefaultQueueWatchLimit is the longest queue a session watches whole by default (see
// WithQueueWatchLimit): where the queue watch and watches per node cost the server about
// as much per critical section (see the package documentation, Watches).
const DefaultQueueWatchLimit = 16

// queueOf returns the queue of the mutex node parent, made if there is none, with c
// among its users. Called with b.mu held.
func (b *Backend) queueOf(parent string, c *contention) *queue {
	q := b.queues[parent]
	if q == nil {
		q = &queue{parent: parent, users: make(map[*contention]struct{})}
		b.queues[parent] = q
	}
	q.users[c] = struct{}{}
	return q
}

// queueMode returns how a look in session epoch reads q: live, per node (perNode or
// removing), or first setting the watch (unwatched, adding). Called with b.mu held.
func (b *Backend) queueMode(q *queue, epoch uint64) queueState {
	switch {
	case b.queueLimit == 0 || b.queueOff:
		return perNode
	case q.state == removing:
		return removing // in any epoch: a removal without an answer may yet go out, after a new addWatch
	case q.epoch != epoch:
		return unwatched
	}
	return q.state
}

// queueJoin is a contender's join made in the pipeline that watches the queue: its node's
// create (with its value node, for a contender with a value) and the answers.
type queueJoin struct {
	created      create2Response
	createdMulti multiResponse
	createdRead  getDataResponse
}

// calls returns the join's requests, the pending protection set.
func (j *queueJoin) calls(c *contention) []rawCall {
	c.pending = c.newProtection()
	if c.p.Value != "" {
		return c.createValueCalls(c.pending, &j.createdMulti, &j.createdRead)
	}
	return []rawCall{{opCreate2, &zk.CreateRequest{Path: c.child(c.pending + latchName), Data: c.data,
		Acl: c.b.acl, Flags: zk.FlagEphemeralSequential}, &j.created}}
}

// done applies the join's answers, errs from its first request on.
func (j *queueJoin) done(c *contention, errs []error) {
	created := j.created
	if c.p.Value != "" {
		var st *zk.Stat
		if created.Path, st, errs[0] = createdWithValue(errs, &j.createdMulti, &j.createdRead); st != nil {
			created.Stat = *st
		}
	}
	switch err := errs[0]; {
	case err == nil:
		c.pending = ""
		c.setNode(created.Path)
		c.czxid, c.nodeSession = created.Stat.Czxid, created.Stat.EphemeralOwner
	case answered(err):
		c.pending = "" // the mutex node is missing, say: the next look joins, and makes it
	}
}

// watchQueue sets the persistent watch on the mutex node and lists the queue, which then
// is live for every contention of the mutex in this session; or, when the queue is longer
// than the limit, removes the watch again and leaves the mutex to watches per node. A
// contender that has no node yet creates it in the same round trip: the three requests
// go out one after the other (see pipeline), and the server answers them in order, so
// that the list comes after the watch and the node's creation after the list.
// Another contention of the mutex may be setting the watch at the same time: the server
// keeps one watch however often it is set, and the first list in is used.
func (c *contention) watchQueue(ctx context.Context, s session) error {
	b, q := c.b, c.q
	b.mu.Lock()
	if b.queueMode(q, s.epoch) == unwatched {
		q.epoch, q.state, q.nodes, q.early, q.head = s.epoch, adding, nil, nil, headRead{}
	}
	q.watched = q.epoch == s.epoch // removing one that is not there is harmless
	b.mu.Unlock()
	var list getChildren2Response
	calls := []rawCall{
		{opAddWatch, &addWatchRequest{Path: c.parent, Mode: addWatchPersistentRecursive}, &emptyResponse{}},
		{opGetChildren2, &getChildren2Request{Path: c.parent}, &list},
	}
	var j queueJoin
	join := c.p.ContenderID != "" && c.node == "" && c.pending == "" && !c.served && !c.joinHeld()
	if join {
		calls = append(calls, j.calls(c)...)
	}
	errs, err := b.pipeline(ctx, calls...)
	if err == nil && join {
		j.done(c, errs[2:])
	}
	if err == nil && errs[0] == nil && (errs[1] == nil || errors.Is(errs[1], zk.ErrNoNode)) {
		c.installQueue(s, list)
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if q.epoch == s.epoch && q.state == adding {
		q.state = unwatched
	}
	switch {
	case err != nil:
		return storeError("watch", c.parent, err)
	case errors.Is(errs[0], errUnimplemented):
		if !b.queueOff {
			b.queueOff = true
			b.log.Warn("simba/zookeeper: the server does not know addWatch (ZooKeeper older than 3.6): watching per node")
		}
		return nil // the server closes the connection; the next look is per node
	case errs[0] != nil:
		return storeError("watch", c.parent, errs[0])
	}
	return storeError("list", c.parent, errs[1])
}

// installQueue makes list, the mutex node's children listed after the watch was set, the
// live queue, unless another contention's list came first or the connection is gone.
func (c *contention) installQueue(s session, list getChildren2Response) {
	b, q := c.b, c.q
	b.mu.Lock()
	defer b.mu.Unlock()
	if q.epoch != s.epoch || q.state != adding {
		return
	}
	hidden := q.install(list.Children, &list.Stat)
	for _, n := range q.nodes {
		b.adopted(q, n)
	}
	switch {
	case hidden:
		b.distrust(q)
	case len(q.nodes) > b.queueLimit:
		b.unwatchQueue(q, perNode)
	}
	for u := range q.users {
		if u != c {
			u.poke()
		}
	}
}

// queueEvent applies ev, an event of a queue's watch, to that queue, and wakes the
// contentions it concerns; an owner whose node is deleted stops believing at once.
// Called with b.mu held.
func (b *Backend) queueEvent(ev zk.Event) {
	q := b.queues[ev.Path]
	if q == nil {
		dir, _ := splitPath(ev.Path)
		q = b.queues[dir]
	}
	if q == nil || q.epoch != b.sess.epoch {
		return
	}
	if ev.Type == zk.EventNodeDeleted {
		// Whatever the state: an owner whose node is gone owns nothing now, and stops
		// believing at once (after a switch to watches per node, before its own is set).
		for c := range q.users {
			if c.view.valid && c.view.self && c.view.ownerPath == ev.Path {
				c.suspend()
				c.poke()
			}
		}
	}
	switch q.state {
	case adding:
		q.early = append(q.early, ev)
		return
	case live:
	default:
		return // per node
	}
	n, at, changed, hidden := q.apply(ev)
	if hidden {
		b.distrust(q)
		return
	}
	if !changed {
		return
	}
	if ev.Type == zk.EventNodeCreated {
		b.adopted(q, n)
		if len(q.nodes) > b.queueLimit {
			// Every session with the watch hears every change of a queue this long:
			// per node from now on, until a look finds it short again (queueShort).
			b.unwatchQueue(q, perNode)
			q.lookAgain()
			return
		}
	}
	for c := range q.users {
		if q.concerns(c, ev.Type, n, at) {
			c.gen++
			c.poke()
		}
	}
}

// distrust stops reading q from its watch, which missed a creation: the mutex is watched
// per node from now on, until a look finds the queue short and sets the watch again. The
// watch stays, and still tells an owner that its node is gone, until it is not needed
// (see sweepQueues). Called with b.mu held.
func (b *Backend) distrust(q *queue) {
	b.log.Warn("simba/zookeeper: the queue watch missed the creation of a node this session may not read; watching the mutex per node", "node", q.parent)
	q.state, q.nodes, q.early, q.head = perNode, nil, nil, headRead{}
	q.lookAgain()
}

// lookAgain makes every contention of q look at the mutex again, dropping what its step
// under way found: the queue is no longer read from its watch. Called with b.mu held.
func (q *queue) lookAgain() {
	for c := range q.users {
		c.gen++
		c.poke()
	}
}

// install makes kids, the mutex node's children listed after the watch was set (st its
// Stat), the queue, and applies the events that came after the list. It reports whether a creation
// went unheard (see queue). Called with b.mu held.
//
// An event that came before the list is in it already: a creation numbered below the
// count of creations the list's Stat tells, or of a node that is no latch but listed
// (the same name created again after the list would count as missed: a false alarm, and
// so safe), and the events of the mutex node itself (whose deletion and creation again
// before the list the list shows; after it, only the count can go wrong: safe too).
// Every other event is applied in order; applying a deletion again changes nothing.
func (q *queue) install(kids []string, st *zk.Stat) (hidden bool) {
	// ZooKeeper reports cversion as twice the creations less the children (its
	// DataNode.copyStat; deletions count nowhere else). A mutex node that is not there
	// (its Stat zero) numbers its first child zero.
	q.nodes, q.next = latches(kids), (int64(st.Cversion)+int64(len(kids)))/2
	listed := q.next
	for _, ev := range q.early {
		if dir, name := splitPath(ev.Path); ev.Type == zk.EventNodeCreated && dir == q.parent {
			if seq, ok := sequence(name); ok && seq < listed || !ok && slices.Contains(kids, name) {
				continue
			}
		}
		if ev.Path == q.parent {
			continue
		}
		_, _, _, h := q.apply(ev)
		hidden = hidden || h
	}
	q.early, q.state = nil, live
	return hidden
}

// apply applies one event of the watch to the live queue: it returns the node it
// concerns and its place in the queue (before a deletion), whether it changed the queue
// or the owner's node as read (its data changed), and whether a creation went unheard
// before it (see queue).
func (q *queue) apply(ev zk.Event) (n latch, at int, changed, hidden bool) {
	if ev.Path == q.parent {
		// ZooKeeper deletes a container once it is empty (every node's deletion came
		// before); made again, it numbers its children from zero.
		if ev.Type == zk.EventNodeCreated || ev.Type == zk.EventNodeDeleted {
			q.nodes, q.next = q.nodes[:0], 0
		}
		return latch{}, 0, false, false
	}
	dir, name := splitPath(ev.Path)
	if dir != q.parent {
		return latch{}, 0, false, false
	}
	seq, ok := sequence(name)
	if !ok {
		if ev.Type == zk.EventNodeCreated {
			q.next++ // not a contender, but numbered among the creations
		}
		return latch{}, 0, false, false
	}
	n = latch{name: name, seq: seq}
	i, found := slices.BinarySearchFunc(q.nodes, n, compareLatches)
	switch ev.Type {
	case zk.EventNodeCreated:
		hidden = seq != q.next
		q.next = seq + 1
		if !found {
			q.nodes = slices.Insert(q.nodes, i, n)
		}
		return n, i, !found, hidden
	case zk.EventNodeDeleted:
		if found {
			q.nodes = slices.Delete(q.nodes, i, i+1)
		}
		return n, i, found, false
	case zk.EventNodeDataChanged:
		if q.head.name == name {
			q.head = headRead{}
			return n, 0, true, false
		}
	}
	return n, i, false, false
}

// splitPath splits a node's path into its parent's and its name, without the allocation
// of path.Dir: every session of a mutex splits the path of every event of its queue.
func splitPath(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return "", p
	}
	return p[:i], p[i+1:]
}

// concerns reports whether the change of node n, at place at in the queue, may change
// what c sees, so that c looks again: only a change at the head changes who owns (a
// node created after the head, or deleted behind it, does not), and it matters to a
// Locker's waiter only when it makes its node the head. A contender without a node
// (joining) is in its step, and places its node in the queue as it is then. Called with
// b.mu held.
func (q *queue) concerns(c *contention, typ zk.EventType, n latch, at int) bool {
	switch {
	case at != 0 || c.mine == n.name:
		return c.mine == n.name // its own node, gone: told by queueEvent already; it joins again
	case c.p.ContenderID == "" || !c.p.WaitsOnly || c.p.Once:
		return true // it reports the owner
	}
	return typ == zk.EventNodeDeleted && len(q.nodes) > 0 && q.nodes[0].name == c.mine
}

// adopted hands the node n, just created, to the keeper for deletion if it was made by a
// create this backend gave up for lost (see join). Called with b.mu held.
func (b *Backend) adopted(q *queue, n latch) {
	for i, prefix := range q.abandoned {
		if strings.HasPrefix(n.name, prefix) {
			q.abandoned = slices.Delete(q.abandoned, i, i+1)
			b.leaveBehind(orphan{parent: q.parent, name: n.name})
			if vname, ok := valueName(n.name); ok { // made with it, in its multi
				b.leaveBehind(orphan{parent: valueRoot + strings.TrimPrefix(q.parent, rootPath), name: vname})
			}
			return
		}
	}
}

// unwatchQueue removes q's watch in the background; after is the state that follows the
// answer. Called with b.mu held.
func (b *Backend) unwatchQueue(q *queue, after queueState) {
	q.state, q.after, q.nodes, q.early, q.head = removing, after, nil, nil, headRead{}
	if b.closed {
		return // the connection and its watches end with the backend
	}
	b.wg.Go(func() { b.removeQueueWatch(q) }) // under b.mu, so never after Close has begun to wait
}

// removeQueueWatch removes the persistent watch of q. The queue stays per node until the
// removal is answered, and for good when it gets no answer in time: go-zookeeper may still
// send it, and it would remove a watch set after it.
func (b *Backend) removeQueueWatch(q *queue) {
	ctx, cancel := context.WithTimeout(context.Background(), b.bound())
	defer cancel()
	err := b.removeWatches(ctx, q.parent)
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(err, context.DeadlineExceeded) {
		b.log.Warn("simba/zookeeper: removing a watch got no answer; the mutex is watched per node from now on", "node", q.parent)
		return
	}
	q.watched = false
	// ZooKeeper 3.8 removed the session's other watches of the mutex node with it.
	delete(b.armed, watch{q.parent, dataWatch})
	delete(b.armed, watch{q.parent, childWatch})
	for c := range b.interest[q.parent] {
		c.gen++
		c.poke()
	}
	switch {
	case q.after == perNode:
		q.state = perNode
	case len(q.users) == 0:
		delete(b.queues, q.parent)
		return
	default:
		q.state = unwatched
	}
	for c := range q.users {
		c.poke()
	}
}

// sweepQueues forgets the queues that no contention has used for a session timeout, and
// removes their watches: a session would otherwise go on hearing every change of every
// mutex it ever contended for. Called by the keeper.
func (b *Backend) sweepQueues(s session) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for p, q := range b.queues {
		if len(q.users) > 0 || time.Since(q.idle) < s.timeout {
			continue
		}
		switch mode := b.queueMode(q, s.epoch); {
		case mode == adding || mode == removing: // under way; or stuck, and then kept for good
		case q.watched && q.epoch == s.epoch:
			b.unwatchQueue(q, unwatched)
		default:
			delete(b.queues, p)
		}
	}
}

// queueShort lets a queue watched per node be watched whole again once a look found it
// at most half as long as the limit: a long queue is watched per node until it is short
// again, not at every change around the limit.
func (b *Backend) queueShort(q *queue, epoch uint64, length int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q.state == perNode && q.epoch == epoch && length <= b.queueLimit/2 {
		q.state = unwatched
	}
}

// queueNodes returns the queue of a live q as of now, or false when it is no longer live
// in session epoch.
func (b *Backend) queueNodes(q *queue, epoch uint64) ([]latch, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if q.epoch != epoch || q.state != live {
		return nil, false
	}
	return slices.Clone(q.nodes), true
}

// place finds the contender's node in the live queue: no request, except a read of the
// node when it was found by its protection prefix (join), for its czxid and session.
func (c *contention) place(ctx context.Context, l *look) (outcome, error) {
	if c.czxid == 0 {
		n, err := c.b.get(ctx, c.node)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			c.forgetNode()
			return changed, nil
		case err != nil:
			return failed, storeError("read", c.node, err)
		case n.st.EphemeralOwner != c.b.sessionID():
			c.forgetNode() // a node of an ended session, which the server is deleting
			return changed, nil
		}
		c.czxid, c.nodeSession = n.st.Czxid, n.st.EphemeralOwner
	}
	nodes, ok := c.b.queueNodes(c.q, l.s.epoch)
	if !ok {
		return changed, nil
	}
	l.nodes = nodes
	return c.locate(l), nil
}

// readHead reads the node name at the head of the queue, and its owner value: once per
// owner for all the mutex's contentions in this backend, without a watch (the queue's
// watch tells when it goes).
func (c *contention) readHead(ctx context.Context, name string) (headRead, error) {
	b, q := c.b, c.q
	b.mu.Lock()
	h := q.head
	b.mu.Unlock()
	if h.name == name {
		return h, nil
	}
	n, value, err := c.readOwnerNode(ctx, c.child(name), b.get)
	if err != nil {
		return headRead{}, err
	}
	h = headRead{name: name, data: n.data, st: n.st, value: value}
	b.mu.Lock()
	if q.state == live {
		q.head = h
	}
	b.mu.Unlock()
	return h, nil
}

// readQueueOwner makes the view of who owns the mutex from the head of the live queue,
// for a contender behind it that is told the owner (a service's, or a single attempt)
// or for a retriever.
func (c *contention) readQueueOwner(ctx context.Context, l *look) (outcome, error) {
	if len(l.nodes) == 0 {
		l.v = view{} // nobody contends; the watch tells when someone does
		return seen, nil
	}
	head := c.child(l.nodes[0].name)
	h, err := c.readHead(ctx, l.nodes[0].name)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return changed, nil // gone since: its deletion is in the queue already
	case err != nil:
		return failed, storeError("read", head, err)
	}
	l.v = view{ownerPath: head, owner: string(h.data), token: uint64(h.st.Czxid), value: h.value, node: c.node}
	if c.node != "" && l.v.owner == c.p.ContenderID {
		return c.sharedID(ctx, l, h.st)
	}
	return seen, nil
}
