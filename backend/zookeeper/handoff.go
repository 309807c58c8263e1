package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

var _ backend.HandOffer = (*contention)(nil)

// handOffTries is how often HandOff lists the queue again when a waiter ahead of the one
// it hands to leaves meanwhile.
const handOffTries = 8

// Waiters lists the contenders whose nodes come after the owner's, in sequence order, with
// the value each keeps (none for a JVM contender's node): a list of the queue, then a read
// of every node (and value node) in one round trip.
func (c *contention) Waiters(ctx context.Context) ([]backend.Waiter, error) {
	nodes, err := c.listQueue(ctx)
	if err != nil || len(nodes) < 2 {
		return nil, err
	}
	waiting, err := c.readWaiters(ctx, nodes[1:])
	if err != nil {
		return nil, err
	}
	out := make([]backend.Waiter, 0, len(waiting))
	for _, w := range waiting {
		out = append(out, backend.Waiter{ID: w.id, Value: w.value})
	}
	return out, nil
}

// HandOff makes to the owner: in one multi, it checks that to's node is still there and
// deletes the nodes of the waiters ahead of it and the caller's node, the lowest, which
// makes to's node the lowest. Every contender whose node was deleted joins again at the
// back (a JVM one too, see the package documentation, Hand-off); the caller's contention
// last, once the others have or a session timeout has passed, so that it is behind
// those waiting. HandOff returns once it has joined, or when ctx ends.
func (c *contention) HandOff(ctx context.Context, to string) error {
	b := c.b
	b.mu.Lock()
	c.holdJoin, c.rejoined = true, make(chan struct{})
	rejoined := c.rejoined
	b.mu.Unlock()
	waiting, at, err := c.handOff(ctx, to)
	if err == nil {
		c.poke()                                 // its node is gone: it stops believing, and waits to join again
		c.awaitJoins(ctx, waiting, at, rejoined) // the waiters sent back join again first
	}
	b.mu.Lock()
	c.holdJoin = false
	if err != nil {
		c.rejoined = nil
	}
	b.mu.Unlock()
	c.poke() // a contention held meanwhile (its node gone anyway) joins now
	if err != nil {
		return err
	}
	select {
	case <-rejoined:
	case <-ctx.Done():
	case <-c.stop:
	}
	return nil
}

// joinHeld reports whether a hand-off holds the contender's join back.
func (c *contention) joinHeld() bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.holdJoin
}

// awaitJoins waits until every waiter ahead of waiting[at] (their nodes deleted by a
// hand-off) has a new node, for a session timeout at most, or until the caller's
// contention has a node again (rejoined closed) or stops.
func (c *contention) awaitJoins(ctx context.Context, waiting []waiter, at int, rejoined <-chan struct{}) {
	if at == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.b.bound())
	defer cancel()
	missing := map[string]int{} // IDs that have not joined again, how often
	for _, w := range waiting[:at] {
		missing[w.id]++
	}
	seen := map[string]bool{} // nodes already read, or listed before the hand-off
	for _, w := range waiting {
		seen[base(w.path)] = true
	}
	for {
		w, err := ask(ctx, c.b, func() (childrenWatch, error) {
			kids, _, ch, err := c.b.conn.ChildrenW(c.parent)
			return childrenWatch{kids, ch}, err
		})
		if err != nil {
			return
		}
		var fresh []latch
		for _, l := range latches(w.kids) {
			if !seen[l.name] {
				seen[l.name] = true
				fresh = append(fresh, l)
			}
		}
		joined, err := c.readWaiters(ctx, fresh)
		if err != nil {
			return
		}
		left := 0
		for _, j := range joined {
			missing[j.id]--
		}
		for _, n := range missing {
			left += max(n, 0)
		}
		if left == 0 {
			return
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return
		case <-rejoined:
			return
		case <-c.stop:
			return
		}
	}
}

// childrenWatch is a list of a node's children and the watch it set.
type childrenWatch struct {
	kids    []string
	changed <-chan zk.Event
}

// handOff makes the hand-off of HandOff: it returns the waiters it listed and the place
// of to's node among them; it deleted the nodes of those ahead.
func (c *contention) handOff(ctx context.Context, to string) (waiting []waiter, at int, err error) {
	b := c.b
	b.mu.Lock()
	mine := c.mine
	b.mu.Unlock()
	if c.p.ContenderID == "" || mine == "" {
		return nil, 0, fmt.Errorf("simba/zookeeper: hand off: %w: the contender has no node", simba.ErrNotOwner)
	}
	if to == c.p.ContenderID {
		return nil, 0, fmt.Errorf("simba/zookeeper: hand off to %q: %w: it is the caller", to, simba.ErrNotWaiting)
	}
	for range handOffTries {
		nodes, err := c.listQueue(ctx)
		switch {
		case err != nil:
			return nil, 0, err
		case len(nodes) == 0 || nodes[0].name != mine:
			return nil, 0, fmt.Errorf("simba/zookeeper: hand off: %w: its node is not the lowest", simba.ErrNotOwner)
		}
		waiting, err = c.readWaiters(ctx, nodes[1:])
		if err != nil {
			return nil, 0, err
		}
		at = -1
		for i, w := range waiting {
			if w.id == to {
				at = i
				break
			}
		}
		if at < 0 {
			return nil, 0, fmt.Errorf("simba/zookeeper: hand off to %q: %w", to, simba.ErrNotWaiting)
		}
		// The owner's node goes last: the server sends the events of the deletions in
		// order, and a session that keeps the queue from them (or a waiter that owns
		// when the owner's node goes, see promote) must never see a waiter ahead of to
		// at the head. Each deleted waiter's predecessor is deleted too, so a JVM
		// waiter, which watches only its predecessor, hears of it.
		ops := []any{&zk.CheckVersionRequest{Path: waiting[at].path, Version: -1}}
		for _, w := range waiting[:at] {
			ops = append(ops, &zk.DeleteRequest{Path: w.path, Version: -1})
		}
		own := c.child(mine)
		ops = append(ops, &zk.DeleteRequest{Path: own, Version: -1})
		res, err := ask(ctx, b, func() ([]zk.MultiResponse, error) { return b.conn.Multi(ops...) })
		if err == nil {
			return waiting, at, nil
		}
		failed := -1
		for i, r := range res {
			if r.Error != nil {
				failed = i
				break
			}
		}
		switch {
		case !errors.Is(err, zk.ErrNoNode) || failed < 0:
			return nil, 0, b.explain(storeError("hand off to", waiting[at].path, err))
		case failed == len(ops)-1:
			return nil, 0, fmt.Errorf("simba/zookeeper: hand off: %w: its node %s is gone", simba.ErrNotOwner, own)
		}
		// to's node, or a waiter's ahead of it, is gone: look again.
	}
	return nil, 0, fmt.Errorf("simba/zookeeper: hand off to %q: the queue changed under each of %d tries", to, handOffTries)
}

// waiter is a waiting contender's node as read.
type waiter struct {
	path, id, value string
}

// listQueue lists the contenders' nodes of the mutex, lowest first.
func (c *contention) listQueue(ctx context.Context) ([]latch, error) {
	kids, err := c.b.children(ctx, c.parent)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, nil
	case err != nil:
		return nil, c.b.explain(storeError("list", c.parent, err))
	}
	return latches(kids), nil
}

// readWaiters reads the nodes, with their values, all at once (one round trip); nodes
// gone meanwhile are left out.
func (c *contention) readWaiters(ctx context.Context, nodes []latch) ([]waiter, error) {
	type read struct {
		n     node
		value string
		err   error
	}
	reads := make([]read, len(nodes))
	var wg sync.WaitGroup
	for i, l := range nodes {
		wg.Go(func() {
			r := &reads[i]
			r.n, r.value, r.err = c.readOwnerNode(ctx, c.child(l.name), c.b.get)
		})
	}
	wg.Wait()
	out := make([]waiter, 0, len(nodes))
	for i, r := range reads {
		path := c.child(nodes[i].name)
		switch {
		case errors.Is(r.err, zk.ErrNoNode):
			continue
		case r.err != nil:
			return nil, c.b.explain(storeError("read", path, r.err))
		}
		out = append(out, waiter{path: path, id: string(r.n.data), value: r.value})
	}
	return out, nil
}
