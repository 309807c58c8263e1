package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Backend is the etcd backend: each contender holds a key under <prefix><mutex>/ for as
// long as it contends, attached to the backend's lease, and the contender whose key has
// the lowest create revision owns the mutex (see the package documentation).
//
// A Backend is safe for concurrent use and must not be copied.
type Backend struct {
	client   *clientv3.Client
	kv       pb.KVClient    // the client's connection, for the requests a cycle makes (callOptions)
	leases   pb.LeaseClient // the client's connection, for the keep-alive stream
	watchers pb.WatchClient // the same, for the watch stream (watches.go)
	prefix   string
	leaseTTL time.Duration // asked for; the server may grant more
	log      *slog.Logger

	life      context.Context // ended by Close: bounds the backend's own requests
	endLife   context.CancelFunc
	keepWake  chan struct{} // capacity 1: the keeper has work now
	sendWake  chan struct{} // capacity 1: the watch stream's sender has work now
	sendTimer *time.Timer   // wakes the sender when work is due later; reset with mu held (watchStream.wakeAt)
	closeOnce sync.Once
	wg        sync.WaitGroup // the keeper, the watch stream's sender and receiver, and every contention's goroutine

	mu          sync.Mutex
	closed      bool
	keeping     bool // the keeper and the watch stream's sender run: a contention has started
	lease       lease
	contentions map[*contention]struct{}
	watches     watchStream
	orphans     map[string]orphan // keys stopped contentions left behind
	numbers     map[number]bool   // the contentions' numbers whose keys may exist (see number)
	revision    int64             // the latest revision a linearizable answer carried (see sawRevision)
	behind      int64             // etcd's revision went back from this one: no lease until it passes it
	given       clientv3.LeaseID  // a lease given up unproven, maybe alive on the server: revoked before the next grant
	lastJoin    preparedJoin      // the last contention's key and join (prepareJoin)

	regressions atomic.Uint64
}

// lease is what the backend knows of its lease.
type lease struct {
	id    clientv3.LeaseID // zero while there is none
	ttl   time.Duration    // granted by the server
	proof time.Time        // the lease cannot expire before proof + ttl (see beat)
	epoch uint64           // bumped at every grant and every loss
	err   error            // why the last grant failed, for StartContend's error
}

var _ simba.Backend = (*Backend)(nil)

// New returns a backend on client. It makes no request: the lease is granted at the first
// StartContend. The client stays the caller's: the backend never closes it, and Close
// must be called before the client is closed.
func New(client *clientv3.Client, opts ...Option) (*Backend, error) {
	if client == nil {
		return nil, simba.InvalidArgument("client", nil, "must not be nil")
	}
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	life, endLife := context.WithCancel(context.Background())
	return &Backend{
		client:      client,
		kv:          pb.NewKVClient(client.ActiveConnection()),
		leases:      pb.NewLeaseClient(client.ActiveConnection()),
		watchers:    pb.NewWatchClient(client.ActiveConnection()),
		prefix:      cfg.prefix,
		leaseTTL:    cfg.leaseTTL,
		log:         cfg.logger,
		life:        life,
		endLife:     endLife,
		keepWake:    make(chan struct{}, 1),
		sendWake:    make(chan struct{}, 1),
		sendTimer:   stoppedTimer(),
		watches:     watchStream{byID: make(map[int64]*watcher), ownDelay: ownWatchDelay},
		contentions: make(map[*contention]struct{}),
		orphans:     make(map[string]orphan),
		numbers:     make(map[number]bool),
	}, nil
}

// Prefix returns the prefix of the backend's keys (WithPrefix).
func (b *Backend) Prefix() string { return b.prefix }

// MutexPrefix returns the prefix of mutex's keys: <prefix><mutex>/.
func (b *Backend) MutexPrefix(mutex string) string { return b.prefix + mutex + "/" }

var _ backend.ValueKeeper = (*Backend)(nil)

// KeepsValues reports that the backend keeps owner values (Participant.Value) for
// mutexes, in their contenders' keys; see the package documentation.
func (b *Backend) KeepsValues(k backend.Kind) bool { return k == backend.Mutex }

var _ backend.DeadlineKeeper = (*Backend)(nil)

// KeepsDeadlines reports that every call of the backend and of its contentions returns by
// its context's deadline (backend.DeadlineKeeper): each request is a gRPC call bounded by
// the caller's context, the client's wait for a connection included, and StartContend and
// StopContend wait for their contention's goroutine only as long as the context lasts.
func (b *Backend) KeepsDeadlines() bool { return true }

// Lease returns the backend's lease and the TTL the server granted it; zero while it has
// none (before the first StartContend, and between a loss and the next grant).
func (b *Backend) Lease() (clientv3.LeaseID, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lease.id, b.lease.ttl
}

// StartContend starts a participant's contention: it puts the contender's key (a
// retriever puts none), reads who owns the mutex, reports it and returns. Until the
// backend has a lease it waits for one, within ctx. See simba.Backend.
func (b *Backend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("simba/etcd: %w", err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("simba/etcd: %w", simba.ErrClosed)
	}
	c := newContention(b, p)
	b.contentions[c] = struct{}{}
	if !b.keeping {
		b.keeping = true
		b.wg.Go(b.keep)
		b.wg.Go(b.send)
	}
	if b.lease.id == 0 {
		b.wakeKeeper() // grant one now, rather than at the keeper's next retry
	}
	b.mu.Unlock()
	c.lookFirst(ctx)
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

// pending explains why c has not reported yet.
func (b *Backend) pending(c *contention) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case c.lastErr != nil:
		return c.lastErr
	case b.lease.id == 0 && b.behind != 0:
		return fmt.Errorf("simba/etcd: etcd's revision went back (its data was lost or restored): no tenure until it passes %d, the highest seen before",
			b.behind)
	case b.lease.id == 0 && b.lease.err != nil:
		return b.lease.err
	case b.lease.id == 0:
		return errors.New("simba/etcd: no lease granted yet")
	}
	return errors.New("simba/etcd: no answer from etcd yet")
}

// Close ends every contention of the backend and revokes its lease, which deletes its
// keys at once, so owners are succeeded without waiting for the lease to expire. Owners
// stop believing first, and waiting acquisitions end with an error matching
// simba.ErrClosed (Participant.Closed). The revoke is best effort, bounded by a second
// (revokeTimeout): the lease expires by itself otherwise. Close does not close the client.
// Later StartContend calls fail with simba.ErrClosed. Close is idempotent.
func (b *Backend) Close() error {
	var err error
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		var told []func()
		for c := range b.contentions {
			c.suspend() // owners stop believing before their keys go
			c.halt()
			c.startRun() // before the wait below: a contention's goroutine starts by then
			if c.p.Closed != nil {
				told = append(told, c.p.Closed)
			}
		}
		b.mu.Unlock()
		for _, closed := range told {
			closed() // a waiting Locker's acquisition ends
		}
		b.endLife()
		b.wg.Wait()
		b.mu.Lock()
		id := b.lease.id
		if id == 0 {
			id = b.given
		}
		b.lease = lease{epoch: b.lease.epoch + 1}
		b.mu.Unlock()
		if id != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), revokeTimeout)
			defer cancel()
			if _, rerr := b.client.Revoke(ctx, id); rerr != nil && !errors.Is(rerr, context.Canceled) {
				err = fmt.Errorf("simba/etcd: revoke lease %x (it expires by itself): %w", int64(id), rerr)
				b.log.Warn("simba/etcd: revoking the lease failed; it expires by itself", "lease", fmt.Sprintf("%x", int64(id)), "err", rerr)
			}
		}
	})
	return err
}

// backoff is the pause after the failures-th failure in a row: 20 ms, doubling, at most
// ceiling.
func backoff(failures int, ceiling time.Duration) time.Duration {
	return min(time.Duration(1<<min(failures, 10))*10*time.Millisecond, ceiling)
}

// stoppedTimer returns a timer that has not been set yet (Reset sets it).
func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// revokeTimeout bounds Close's revoke of the lease.
const revokeTimeout = time.Second

func (b *Backend) wakeKeeper() {
	select {
	case b.keepWake <- struct{}{}:
	default:
	}
}

// keep runs from the first StartContend until Close. It grants the backend's lease when
// there is none, proves it alive with a keep-alive every third of its TTL (beat), gives it
// up when no keep-alive was answered for a TTL, and deletes the keys that stopped
// contentions left behind.
func (b *Backend) keep() {
	timer := stoppedTimer()
	defer timer.Stop()
	var ka keepAlive
	defer ka.close()
	failures := 0
	for {
		select {
		case <-b.life.Done():
			return
		case <-b.keepWake:
		case <-timer.C:
		}
		b.mu.Lock()
		l := b.lease
		b.mu.Unlock()
		var ok bool
		switch {
		case l.id == 0:
			ok = b.revokeGiven() && b.caughtUp() && b.grant(l.epoch)
		case time.Since(l.proof) >= l.ttl:
			// No keep-alive answered for a TTL: every owner has stopped believing. Were
			// the keep-alives still reaching the leader (only the answers are lost), they
			// would keep the lease, and the keys nobody believes in, alive for as long as
			// that lasts, and everyone out. So the backend stops sending them and revokes
			// the lease, as etcd's own client stops keeping alive a lease unanswered for a
			// TTL: the revoke, if it arrives, deletes the keys at once, and the lease
			// expires a TTL after the last keep-alive that arrived otherwise.
			ka.close()
			b.giveUp(l)
		default:
			ok = b.beat(&ka, l)
		}
		// A third: an owner rides out any silence shorter than about two thirds of the
		// TTL, and a crashed owner's lease outlives it by the TTL less the time since its
		// last keep-alive (the package doc has that trade). A beat that fails is tried
		// again within tens of milliseconds, and one that stalls after a sixth (beat):
		// belief lapses only when four beats in a row stall.
		next := max(l.ttl, b.leaseTTL) / 3
		if ok {
			failures = 0
			b.collect()
		} else {
			failures++
			next = backoff(failures, next)
		}
		timer.Reset(next)
	}
}

// grant asks for a new lease. The lease cannot expire before the grant's send time plus
// its TTL: the leader applies the grant, and starts its TTL, after it was sent.
func (b *Backend) grant(epoch uint64) bool {
	ctx, cancel := context.WithTimeout(b.life, b.leaseTTL)
	defer cancel()
	sent, floor := time.Now(), b.revisionFloor()
	resp, err := b.client.Grant(ctx, int64(b.leaseTTL/time.Second))
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		b.lease.err = storeError("grant lease", "", err)
		b.log.Debug("simba/etcd: granting a lease failed", "err", err)
		if refused(err) {
			for c := range b.contentions {
				c.poke() // a contention that has not started yet fails at once
			}
		}
		return false
	}
	if b.closed || b.lease.epoch != epoch {
		return false // Close revokes what it finds; this one expires by itself
	}
	if b.sawRevisionLocked(resp.ResponseHeader, floor); b.behind != 0 {
		b.given = resp.ID // etcd's revision went back: no lease until it has passed it again
		return false
	}
	b.lease = lease{id: resp.ID, ttl: time.Duration(resp.TTL) * time.Second, proof: sent, epoch: epoch + 1}
	b.log.Info("simba/etcd: lease granted", "lease", fmt.Sprintf("%x", int64(resp.ID)), "ttl", b.lease.ttl)
	for c := range b.contentions {
		c.gen++
		c.poke() // join with the new lease
	}
	return true
}

// keepAlive is the backend's keep-alive stream, opened when first needed and again after
// it broke.
type keepAlive struct {
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
}

func (k *keepAlive) close() {
	if k.cancel != nil {
		k.cancel()
	}
	*k = keepAlive{}
}

// beat sends one keep-alive of lease l on the backend's stream and waits, at most a sixth
// of the TTL, for its answer.
//
// Only the leader renews a lease: a follower that receives a keep-alive passes it to the
// leader over the peer link and returns the leader's answer, or fails when it has no
// leader (the stream asks for one: WithRequireLeader). So an answer with a positive TTL
// means that the leader renewed the lease after the keep-alive was sent, and the lease
// cannot expire before its send time plus the TTL. A leader that loses its quorum renews
// until it steps down, at most an election timeout later, and a new leader extends every
// lease by an election timeout when it takes over, which covers those renewals. Nothing
// else proves the lease alive: not a read, which a follower may answer from its own
// state, nor a keep-alive answered by a follower's cache (there is none).
//
// An answer with no TTL left means that the lease is gone, and every key with it: every
// contention stops believing at once, and the backend asks for a new lease.
func (b *Backend) beat(ka *keepAlive, l lease) bool {
	if ka.stream == nil {
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.life))
		stream, err := b.leases.LeaseKeepAlive(ctx)
		if err != nil {
			cancel()
			b.log.Debug("simba/etcd: opening the keep-alive stream failed", "err", err)
			return false
		}
		ka.stream, ka.cancel = stream, cancel
	}
	bound := time.AfterFunc(l.ttl/6, ka.cancel) // a stalled stream ends, and the next beat opens another
	defer bound.Stop()
	sent := time.Now()
	err := ka.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(l.id)})
	var resp *pb.LeaseKeepAliveResponse
	if err == nil {
		resp, err = ka.stream.Recv()
	}
	if err == nil && resp.ID != int64(l.id) {
		err = fmt.Errorf("answer for lease %x, sent for %x", resp.ID, int64(l.id))
	}
	if err != nil {
		ka.close()
		b.log.Debug("simba/etcd: keep-alive failed", "lease", fmt.Sprintf("%x", int64(l.id)), "err", err)
		return false
	}
	if resp.TTL <= 0 {
		b.lost(l.epoch, "the keep-alive found it expired")
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lease.epoch != l.epoch || !sent.After(b.lease.proof) {
		return true
	}
	b.lease.proof = sent
	b.lease.ttl = time.Duration(resp.TTL) * time.Second
	for c := range b.contentions {
		c.confirm(l.epoch, sent, b.lease.ttl)
	}
	return true
}

// giveUp gives up lease l, which no keep-alive proved alive for a TTL (see keep): every
// contention stops believing, and the keeper revokes it before it asks for a new one.
func (b *Backend) giveUp(l lease) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lease.epoch != l.epoch || b.lease.id == 0 {
		return
	}
	b.given = l.id
	b.lostLocked(l.epoch, "no keep-alive answered for a TTL; revoking it")
}

// revokeGiven revokes the lease the backend gave up, if any; it reports whether none is
// left (revoked, or not found: expired already).
func (b *Backend) revokeGiven() bool {
	b.mu.Lock()
	id := b.given
	b.mu.Unlock()
	if id == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(b.life, b.leaseTTL/3)
	defer cancel()
	_, err := b.client.Revoke(ctx, id)
	if err != nil && !leaseNotFound(err) {
		b.log.Debug("simba/etcd: revoking a lease given up failed", "lease", fmt.Sprintf("%x", int64(id)), "err", err)
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.given == id {
		b.given = 0
	}
	return true
}

// caughtUp reports whether etcd's revision has passed the one it went back from (see
// sawRevision), reading it (a linearizable read) while it had not.
func (b *Backend) caughtUp() bool {
	b.mu.Lock()
	behind := b.behind
	b.mu.Unlock()
	if behind == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(b.life, b.leaseTTL/3)
	defer cancel()
	resp, err := b.client.Get(ctx, b.prefix, clientv3.WithCountOnly())
	if err != nil {
		b.log.Debug("simba/etcd: reading etcd's revision failed", "err", err)
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if resp.Header.Revision < b.behind {
		return false
	}
	b.log.Warn("simba/etcd: etcd's revision has passed the one it went back from; contending again",
		"was", b.behind, "now", resp.Header.Revision)
	b.behind = 0
	return true
}

// lost records that the lease of epoch is gone, with every key attached to it: every
// contention stops believing at once and joins again once the keeper has a new lease.
func (b *Backend) lost(epoch uint64, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lostLocked(epoch, why)
}

func (b *Backend) lostLocked(epoch uint64, why string) {
	if b.lease.epoch != epoch || b.lease.id == 0 {
		return
	}
	b.log.Info("simba/etcd: lease lost; owners stop believing", "lease", fmt.Sprintf("%x", int64(b.lease.id)), "why", why)
	for key, o := range b.orphans {
		if o.lease == b.lease.id {
			delete(b.orphans, key) // gone with the lease
			b.freeNumber(o.number)
		}
	}
	b.lease = lease{epoch: epoch + 1}
	for c := range b.contentions {
		c.suspend()
		c.poke()
	}
	b.wakeKeeper()
}

// number is a contention's number in the keys under dir.
type number struct {
	dir string
	n   uint64
}

// takeNumber returns the lowest number under dir that no key of the backend may carry, and
// takes it until freeNumber. A contention's key is named after it, so a contender's later
// contentions put the key of its earlier ones again: etcd keeps every key name put under a
// mutex's prefix in its index until the history is compacted (never, by default), and
// every read of the mutex scans them all. A number is free only once its key is deleted,
// or gone with its lease, so that a join that finds its key put finds its own (a put whose
// reply was lost), not an earlier contention's. Called with b.mu held.
func (b *Backend) takeNumber(dir string) uint64 {
	n := number{dir: dir, n: 1}
	for b.numbers[n] {
		n.n++
	}
	b.numbers[n] = true
	return n.n
}

// freeNumber gives n back once its key is gone. Called with b.mu held.
func (b *Backend) freeNumber(n number) { delete(b.numbers, n) }

// orphan is a key a stopped contention left behind: its lease, a hold's marker, and the
// number it carries.
type orphan struct {
	lease  clientv3.LeaseID
	marker string
	number number
	until  time.Time // deleted again until then (see leave); zero: once
}

// leaveBehind records a key (and a hold's marker, or "") for the keeper to delete. Called
// with b.mu held.
func (b *Backend) leaveBehind(key, marker string, id clientv3.LeaseID, n number) {
	b.orphans[key] = orphan{lease: id, marker: marker, number: n}
	b.log.Warn("simba/etcd: key left for the backend to delete", "key", key)
	b.wakeKeeper()
}

// collect deletes the keys that stopped contentions left behind.
func (b *Backend) collect() {
	b.mu.Lock()
	keys := make(map[string]orphan, len(b.orphans))
	for k, o := range b.orphans {
		keys[k] = o
	}
	b.mu.Unlock()
	for key, o := range keys {
		ctx, cancel := context.WithTimeout(b.life, b.leaseTTL/3)
		_, err := b.deleteKey(ctx, key, o.marker)
		cancel()
		if err != nil || time.Now().Before(o.until) {
			continue
		}
		b.mu.Lock()
		if b.orphans[key] == o {
			delete(b.orphans, key)
			b.freeNumber(o.number)
		}
		b.mu.Unlock()
	}
}

// deleteKey deletes key, and with it a hold's marker (none: ""), in one transaction, so
// that no marker outlives its key. It reports whether it found the key. It compares
// nothing: a key's name carries the lease ID it is put with (keyOf), and every put of a
// name, a hand-off's included, is with that lease, so whatever stands under the name is
// the key of the contention the name is of, attached to that lease.
func (b *Backend) deleteKey(ctx context.Context, key, marker string) (deleted bool, err error) {
	if marker == "" {
		// A mutex contender's key: a plain delete, which etcd applies without the read
		// a transaction's comparison makes.
		resp, err := b.kv.DeleteRange(ctx, &pb.DeleteRangeRequest{Key: []byte(key)}, callOptions...)
		if err != nil {
			return false, storeError("delete", key, clientv3.ContextError(ctx, err))
		}
		return resp.Deleted > 0, nil
	}
	resp, err := b.client.Txn(ctx).Then(clientv3.OpDelete(key), clientv3.OpDelete(marker)).Commit()
	if err != nil {
		return false, storeError("delete", key, err)
	}
	return resp.Responses[0].GetResponseDeleteRange().Deleted > 0, nil
}

// revisionFloor returns the latest revision seen, which the answer to a linearizable
// request sent now must not be below (see sawRevision).
func (b *Backend) revisionFloor() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.revision
}

// sawRevision records the revision of an answer that reflects every write committed before
// its request was sent (a transaction, a linearizable read, a grant), and floor, the
// latest revision seen when it was sent. While etcd keeps its data, the answer's revision
// is at least floor. One below means the data was lost (a member restarted without its
// data directory, a cluster rebuilt) or restored from an older snapshot: keys created
// now would carry tokens no greater than tenures had before. The backend says so at Error
// level, counts it (TokenRegressions), gives its lease up (every contention stops
// believing, and a key restored with the lease goes with its revoke), and asks for no
// lease until etcd's revision has passed the highest it saw (caughtUp).
func (b *Backend) sawRevision(h *pb.ResponseHeader, floor int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sawRevisionLocked(h, floor)
}

func (b *Backend) sawRevisionLocked(h *pb.ResponseHeader, floor int64) {
	switch {
	case h == nil:
	case h.Revision < floor && b.revision < floor:
		// Noticed already, by another answer since this request was sent.
		b.revision = max(b.revision, h.Revision)
	case h.Revision < floor:
		b.regressions.Add(1)
		b.behind = max(b.behind, b.revision)
		b.log.Error("simba/etcd: etcd's revision went back: its data was lost or restored; no tenure until it passes the highest seen before",
			"was", b.behind, "now", h.Revision)
		b.revision = h.Revision
		if b.lease.id != 0 {
			b.given = b.lease.id
			b.lostLocked(b.lease.epoch, "etcd's revision went back")
		}
	case h.Revision > b.revision:
		b.revision = h.Revision
	}
}

// TokenRegressions returns how many times the backend saw etcd's revision go back (see
// the package documentation): each is logged at Error level.
func (b *Backend) TokenRegressions() uint64 { return b.regressions.Load() }

// keyOf returns the key of contention n of the backend under lease id in dir, a mutex's
// prefix: <dir><lease id, 16 hex digits>-<n in hex>.
func keyOf(dir string, id clientv3.LeaseID, n uint64) string {
	return fmt.Sprintf("%s%016x-%s", dir, uint64(id), strconv.FormatUint(n, 16))
}
