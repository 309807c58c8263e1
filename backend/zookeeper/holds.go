package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Semaphores and read-write locks: see "Semaphores and read-write locks" in the package
// documentation for the nodes (Curator's InterProcessSemaphoreV2 and
// InterProcessReadWriteLock) and the rules of admission.

var _ backend.Holder = (*Backend)(nil)

// Holds reports that the backend keeps mutexes, semaphores and read-write locks; see
// backend.Holder.
func (b *Backend) Holds(k backend.Kind) bool {
	return k == backend.Mutex || k == backend.Semaphore || k == backend.RWLock
}

// Node layout of holds, shared with Curator's recipes.
const (
	// semaphoreRoot and rwlockRoot are the parents of every semaphore's and read-write
	// lock's node: apart from rootPath, so that the kinds of a name are kept apart.
	semaphoreRoot = "/simba-semaphore"
	rwlockRoot    = "/simba-rwlock"
	// guardDir and leaseDir are InterProcessSemaphoreV2's children of a semaphore's node:
	// an InterProcessMutex ("lock-" nodes) that guards the leases ("lease-" nodes).
	guardDir  = "locks"
	leaseDir  = "leases"
	guardName = "lock-"
	leaseName = "lease-"
	// readName and writeName are InterProcessReadWriteLock's lock names.
	readName  = "__READ__"
	writeName = "__WRIT__"
)

// SemaphorePath returns the node of semaphore name: /simba-semaphore/<name>, the path a
// Curator InterProcessSemaphoreV2 is given to share it.
func SemaphorePath(name string) string { return semaphoreRoot + "/" + name }

// RWMutexPath returns the node of read-write lock name: /simba-rwlock/<name>, the path a
// Curator InterProcessReadWriteLock is given to share it.
func RWMutexPath(name string) string { return rwlockRoot + "/" + name }

// holdPath returns the node of participant p's name, by its kind.
func holdPath(p backend.Participant) string {
	switch p.Hold.Kind {
	case backend.Semaphore:
		return SemaphorePath(p.Mutex)
	case backend.RWLock:
		return RWMutexPath(p.Mutex)
	}
	return mutexPath(p.Mutex)
}

// permitsMark returns the part of a lease node's name that tells its permit count,
// "permits-<n>-", before leaseName; Curator's lease nodes have none.
func permitsMark(n int) string { return "permits-" + strconv.Itoa(n) + "-" }

// leasePermits returns the permit count a lease node's name tells; ok is false for a
// lease node without one (Curator's).
func leasePermits(name string) (n int, ok bool) {
	i := strings.LastIndex(name, leaseName)
	j := strings.LastIndex(name[:max(i, 0)], "permits-")
	if i < 0 || j < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(name[j+len("permits-"):i], "-"))
	return n, err == nil
}

// holdNode is a node of a read-write lock, or of a semaphore's guard.
type holdNode struct {
	name  string
	seq   int64
	write bool
}

// holdNodes returns the nodes among children whose name ends in one of names and a
// sequence number, lowest sequence first, as Curator's lock drivers sort them.
func holdNodes(children []string, names ...string) []holdNode {
	var out []holdNode
	for _, k := range children {
		for _, name := range names {
			if seq, ok := sequenceAfter(k, name); ok {
				out = append(out, holdNode{name: k, seq: seq, write: name == writeName})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b holdNode) int {
		return compareLatches(latch{a.name, a.seq}, latch{b.name, b.seq})
	})
	return out
}

// holdStep looks at a semaphore or read-write lock once: it joins, finds out whether the
// contender is admitted, and reports it. See step.
func (c *contention) holdStep(ctx context.Context, l look) (again bool, err error) {
	if c.node != "" && c.nodeSession != 0 && c.nodeSession != l.s.id {
		c.forgetNode() // an ephemeral node ends with its session
	}
	if c.guard != "" && c.guardSession != 0 && c.guardSession != l.s.id {
		c.guard = ""
	}
	if c.node == "" && c.served {
		// A Locker's hold, lost with its node: its StopContend follows (see transition).
		return c.install(l.s, l.gen, view{}), nil
	}
	var v view
	var o outcome
	if c.p.Hold.Kind == backend.Semaphore {
		o, v, err = c.permit(ctx, l)
	} else {
		o, v, err = c.rwHold(ctx, l)
	}
	switch {
	case err != nil:
		return false, err
	case o == changed:
		return true, nil
	}
	return c.install(l.s, l.gen, v), nil
}

// rwHold finds out whether the contender holds the read-write lock, joining it first
// when it has no node. A reader is admitted when no writer's node comes before its own,
// a writer when no node does; a waiter watches the last node that keeps it out.
func (c *contention) rwHold(ctx context.Context, l look) (outcome, view, error) {
	if c.node == "" {
		if err := c.joinRW(ctx); err != nil {
			return failed, view{}, err
		}
	}
	o, kids, err := c.checkNodeAndList(ctx, l, c.parent, false)
	switch {
	case o != seen || err != nil:
		return o, view{}, err
	case c.admitted:
		return seen, c.holding(), nil
	}
	nodes := holdNodes(kids, readName, writeName)
	i := slices.IndexFunc(nodes, func(n holdNode) bool { return n.name == base(c.node) })
	if i < 0 {
		c.forgetNode() // deleted since its read
		return changed, view{}, nil
	}
	blocker := ""
	for _, n := range nodes[:i] {
		// A node of the same number is a downgrade's read node beside its writer's
		// (joinRW): neither keeps the other out.
		if n.seq < nodes[i].seq && (n.write || !c.p.Hold.Shared) {
			blocker = n.name
		}
	}
	if blocker == "" {
		return c.admit(ctx)
	}
	o, v, err := c.waitFor(ctx, c.child(blocker))
	if o != seen || err != nil {
		return o, v, err
	}
	return c.tellHolder(ctx, v, c.child(nodes[0].name)) // the first node holds
}

// joinRW creates the contender's node: __READ__ or __WRIT__ with a sequence number. A
// downgrade's read node (Hold.Beside) takes the number of its writer's node instead, as
// Curator does since CURATOR-621: a writer that waits behind that writer then finds the
// read node before its own, and waits for the reader too.
func (c *contention) joinRW(ctx context.Context) error {
	name, flags := writeName, int32(zk.FlagEphemeralSequential)
	if c.p.Hold.Shared {
		name = readName
	}
	if c.p.Hold.Shared && c.p.Hold.Beside != "" {
		seq, ok, err := c.besideWriter(ctx)
		if err != nil {
			return err
		}
		if ok {
			name, flags = readName+fmt.Sprintf("%0*d", seqDigits, seq), zk.FlagEphemeral
		}
	}
	path, err := c.createHold(ctx, c.parent, name, flags)
	if err != nil {
		return err
	}
	c.setNode(path)
	return nil
}

// besideWriter returns the sequence number of the write holder's node that the
// downgrade's read hold is admitted beside: the first node, a writer's, whose data is
// Hold.Beside. ok is false when it is not there (its session ended, say): the read hold
// then queues as any.
func (c *contention) besideWriter(ctx context.Context) (int64, bool, error) {
	kids, err := c.b.children(ctx, c.parent)
	if errors.Is(err, zk.ErrNoNode) {
		return 0, false, nil
	} else if err != nil {
		return 0, false, storeError("list", c.parent, err)
	}
	nodes := holdNodes(kids, readName, writeName)
	if len(nodes) == 0 || !nodes[0].write {
		return 0, false, nil
	}
	n, err := c.b.get(ctx, c.child(nodes[0].name))
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, false, nil
	case err != nil:
		return 0, false, storeError("read", c.child(nodes[0].name), err)
	}
	return nodes[0].seq, string(n.data) == c.p.Hold.Beside, nil
}

// permit finds out whether the contender holds a permit of the semaphore, as
// InterProcessSemaphoreV2 does: a contender first owns the guard (an InterProcessMutex
// under locks), then creates its lease node, and is admitted once at most Permits lease
// nodes exist; it then gives the guard up. Only the guard's owner can be a lease node
// beyond the count, so waiters are admitted first come, first served.
func (c *contention) permit(ctx context.Context, l look) (outcome, view, error) {
	if c.node == "" {
		o, v, err := c.ownGuard(ctx, l)
		if o != seen || err != nil || !v.self {
			return o, v, err
		}
		path, err := c.createHold(ctx, c.parent+"/"+leaseDir, permitsMark(c.p.Hold.Permits)+leaseName, zk.FlagEphemeralSequential)
		if err != nil {
			return failed, view{}, err
		}
		c.setNode(path)
	}
	leases := c.parent + "/" + leaseDir
	o, kids, err := c.checkNodeAndList(ctx, l, leases, true) // its watch tells of every lease given back
	switch {
	case o != seen || err != nil:
		return o, view{}, err
	case c.admitted:
		return seen, c.holding(), nil
	}
	if !slices.Contains(kids, base(c.node)) {
		c.forgetNode()
		return changed, view{}, nil
	}
	if o, err := c.keepsGuard(ctx); o != seen || err != nil {
		return o, view{}, err
	}
	if err := c.checkCount(kids); err != nil {
		// Refused: its lease node would count, and its guard node keep those behind it
		// waiting, while it retries.
		c.dropGuard(ctx)
		c.dropNode(ctx)
		return failed, view{}, err
	}
	if len(kids) > c.p.Hold.Permits {
		first := holdNodes(kids, leaseName)[0] // the guard's owner, which waits, has the last lease
		return c.tellHolder(ctx, view{watched: []string{c.node, leases, c.guard}, node: c.node}, leases+"/"+first.name)
	}
	o, v, err := c.admit(ctx)
	if o == seen && err == nil {
		c.dropGuard(ctx)
	}
	return o, v, err
}

// ownGuard finds out whether the contender owns the semaphore's guard, creating its
// guard node first when it has none; v.self tells that it does.
func (c *contention) ownGuard(ctx context.Context, l look) (outcome, view, error) {
	locks, leases := c.parent+"/"+guardDir, c.parent+"/"+leaseDir
	if c.guard == "" {
		// The leases are read as it joins: a participant of another count is refused
		// at once, also behind a waiter that owns the guard.
		var (
			path           string
			kids           []string
			err, leasesErr error
		)
		together(func() { path, err = c.createHold(ctx, locks, guardName, zk.FlagEphemeralSequential) },
			func() { kids, leasesErr = c.b.children(ctx, leases) })
		if err != nil {
			return failed, view{}, err
		}
		c.guard, c.guardSession = path, 0
		if leasesErr != nil && !errors.Is(leasesErr, zk.ErrNoNode) {
			return failed, view{}, storeError("list", leases, leasesErr)
		}
		if err := c.checkCount(kids); err != nil {
			c.dropGuard(ctx)
			return failed, view{}, err
		}
	}
	var (
		ok           bool
		st           *zk.Stat
		kids         []string
		err, listErr error
	)
	together(func() { ok, st, err = c.watchNode(ctx, c.guard) }, func() { kids, listErr = c.b.children(ctx, locks) })
	switch {
	case err != nil:
		return failed, view{}, storeError("watch", c.guard, err)
	case !ok || st.EphemeralOwner != l.s.id:
		c.guard = "" // gone, or of an ended session
		return changed, view{}, nil
	case listErr != nil:
		return failed, view{}, storeError("list", locks, listErr)
	}
	c.guardSession = st.EphemeralOwner
	nodes := holdNodes(kids, guardName)
	i := slices.IndexFunc(nodes, func(n holdNode) bool { return n.name == base(c.guard) })
	switch {
	case i < 0:
		c.guard = ""
		return changed, view{}, nil
	case i == 0:
		return seen, view{self: true}, nil
	}
	return c.waitFor(ctx, c.child(guardDir+"/"+nodes[i-1].name), c.guard)
}

// keepsGuard checks, for a contender whose lease node is not admitted yet, that it still
// owns the guard: only the guard's owner may have a lease beyond the count. One whose
// guard node is gone (deleted by hand) gives its lease up and joins again; left in place,
// its lease and the next guard owner's would both wait for the count to fall. The guard
// is read only when its watch has fired.
func (c *contention) keepsGuard(ctx context.Context) (outcome, error) {
	if c.guard != "" && c.b.isArmed(watch{c.guard, dataWatch}) {
		return seen, nil
	}
	ok := false
	if c.guard != "" {
		var err error
		if ok, _, err = c.watchNode(ctx, c.guard); err != nil {
			return failed, storeError("watch", c.guard, err)
		}
	}
	if ok {
		return seen, nil
	}
	c.log.Warn("simba/zookeeper: this semaphore waiter's guard node is gone; giving its lease up and joining again", "node", c.node)
	c.guard = ""
	c.dropNode(ctx)
	return changed, nil
}

// checkCount refuses a semaphore whose lease nodes, kids, tell another permit count.
func (c *contention) checkCount(kids []string) error {
	for _, k := range kids {
		if n, ok := leasePermits(k); ok && n != c.p.Hold.Permits {
			return fmt.Errorf("simba/zookeeper: semaphore %q has %d permits, not %d: %w",
				c.p.Mutex, n, c.p.Hold.Permits, simba.ErrRefused)
		}
	}
	return nil
}

// dropNode deletes the contender's lease node before its admission; a delete that
// fails leaves the node to the backend.
func (c *contention) dropNode(ctx context.Context) {
	c.drop(ctx, c.node)
	c.forgetNode()
}

// dropGuard gives the semaphore's guard up once the contender holds its permit; a
// delete that fails leaves the node to the backend.
func (c *contention) dropGuard(ctx context.Context) {
	c.drop(ctx, c.guard)
	c.guard = ""
}

// drop deletes the contender's node at path, if any; a delete that fails leaves the node
// to the backend.
func (c *contention) drop(ctx context.Context, path string) {
	if path == "" {
		return
	}
	if err := c.b.delete(ctx, path); err != nil && !errors.Is(err, zk.ErrNoNode) {
		dir, name := splitPath(path)
		c.b.mu.Lock()
		c.b.leaveBehind(orphan{parent: dir, name: name})
		c.b.mu.Unlock()
	}
}

// createHold creates a node named name (after a protection prefix) under dir, and the
// container nodes above it when missing. A create without an answer leaves its prefix to
// the backend, which deletes the node should it have been made.
func (c *contention) createHold(ctx context.Context, dir, name string, flags int32) (string, error) {
	prefix := newProtection()
	p := dir + "/" + prefix + name
	for range 4 {
		path, err := c.b.create(ctx, p, c.data, flags)
		switch {
		case err == nil:
			return path, nil
		case !answered(err):
			c.b.mu.Lock()
			c.b.leaveBehind(orphan{parent: dir, name: prefix, prefix: true})
			c.b.mu.Unlock()
			return "", storeError("create", p, err)
		case !errors.Is(err, zk.ErrNoNode):
			return "", storeError("create", p, err)
		}
		if err := c.b.makeContainers(ctx, dir); err != nil {
			return "", err
		}
	}
	return "", storeError("create", p, fmt.Errorf("%s keeps disappearing: %w", dir, zk.ErrNoNode))
}

// makeContainers creates dir and the nodes above it as container nodes where missing.
func (b *Backend) makeContainers(ctx context.Context, dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		if _, err := b.create(ctx, p, nil, zk.FlagContainer); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return storeError("create container", p, err)
		}
	}
	return nil
}

// checkNode reads the contender's node, with a watch: seen when it is there, in this
// session; changed when it is gone (the contender then joins again, unless it served).
func (c *contention) checkNode(ctx context.Context, l look) (outcome, error) {
	ok, st, err := c.watchNode(ctx, c.node)
	switch {
	case err != nil:
		return failed, storeError("watch", c.node, err)
	case !ok || st.EphemeralOwner != l.s.id:
		c.forgetNode()
		return changed, nil
	}
	c.nodeSession = st.EphemeralOwner
	return seen, nil
}

// checkNodeAndList reads the contender's node (checkNode) and, at once, unless it is
// admitted, lists dir's children, with a child watch if watched; a missing dir has none.
func (c *contention) checkNodeAndList(ctx context.Context, l look, dir string, watched bool) (outcome, []string, error) {
	var (
		o         outcome
		kids      []string
		err, lErr error
	)
	list := func() {
		if watched {
			kids, lErr = c.children(ctx, dir)
		} else {
			kids, lErr = c.b.children(ctx, dir)
		}
	}
	if c.admitted {
		list = func() {}
	}
	together(func() { o, err = c.checkNode(ctx, l) }, list)
	switch {
	case o != seen || err != nil:
		return o, nil, err
	case lErr != nil && !errors.Is(lErr, zk.ErrNoNode):
		return failed, nil, storeError("list", dir, lErr)
	}
	return seen, kids, nil
}

// waitFor is the view of a waiter whose turn comes once the node at path is gone: it
// watches that node, and also what else is given.
func (c *contention) waitFor(ctx context.Context, path string, also ...string) (outcome, view, error) {
	ok, _, err := c.watchNode(ctx, path)
	switch {
	case err != nil:
		return failed, view{}, storeError("watch", path, err)
	case !ok:
		return changed, view{}, nil // gone since the list: look again
	}
	watched := append([]string{path}, also...)
	if c.node != "" {
		watched = append(watched, c.node)
	}
	return seen, view{watched: watched, node: c.node}, nil
}

// tellHolder names, in v, the holder whose node is at path, to a single attempt
// (Participant.Once), which is told who holds; its token is the node's mzxid (see admit).
// A waiter that waits for its turn reads no holder.
func (c *contention) tellHolder(ctx context.Context, v view, path string) (outcome, view, error) {
	if !c.p.Once {
		return seen, v, nil
	}
	n, err := c.b.get(ctx, path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return changed, view{}, nil // gone since the list: look again
	case err != nil:
		return failed, view{}, storeError("read", path, err)
	}
	v.ownerPath, v.owner, v.token = path, string(n.data), uint64(n.st.Mzxid)
	return seen, v, nil
}

// admit makes the contender a holder: it writes its node's data again, whose new mzxid is
// the hold's token. The zxid of a write made at the admission is above every token of
// the name handed out before it, which a node's czxid is not: a node created while it
// waited may be older than a hold admitted meanwhile (a downgrade's read node).
func (c *contention) admit(ctx context.Context) (outcome, view, error) {
	st, err := c.b.setData(ctx, c.node, c.data)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		c.forgetNode()
		return changed, view{}, nil
	case err != nil:
		return failed, view{}, storeError("write", c.node, err)
	}
	c.admitted, c.token = true, uint64(st.Mzxid)
	return seen, c.holding(), nil
}

// holding is the view of an admitted holder.
func (c *contention) holding() view {
	return view{self: true, ownerPath: c.node, owner: c.p.ContenderID, token: c.token,
		watched: []string{c.node}, node: c.node}
}

func (b *Backend) setData(ctx context.Context, path string, data []byte) (*zk.Stat, error) {
	return ask(ctx, b, func() (*zk.Stat, error) {
		return b.conn.Set(path, data, -1)
	})
}
