package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// contention is one participant's contention: for a contender, its key and the watches
// that tell it when to look again; for a retriever, the watches only. Its key is put, read
// and deleted in order, by whoever holds its turn: its goroutine (run), StartContend for
// the first look and StopContend for the delete, on their callers' goroutines. Calls
// through the contention (OthersWaiting, the slot record's, Waiters, HandOff) make their
// requests in their callers' goroutines; HandOff deletes the key, and a look finds it
// gone, as after ReleaseOwner.
type contention struct {
	b   *Backend
	p   backend.Participant
	log *slog.Logger
	dir string // <prefix><mutex>/; a semaphore's or read-write lock's: see holdDirs
	n   uint64 // its number under dir, part of its key (Backend.takeNumber)

	// A semaphore's or read-write lock's (holds.go); empty for a mutex.
	queue string // the prefix of its key: where it queues
	held  string // the prefix of its marker: where it marks its hold

	kick     chan struct{} // capacity 1: look again
	stop     chan struct{} // closed by halt
	stopOnce sync.Once
	runOnce  sync.Once                 // starts run (startRun)
	lookMu   sync.Mutex                // guards endLook, and orders halt's close of stop with it
	endLook  context.CancelFunc        // ends the look under way (lookContext); halt calls it
	stopBy   atomic.Pointer[time.Time] // StopContend's deadline for the delete; nil: none
	turn     chan struct{}             // capacity 1: held (sent to) for a look or the leave
	stopping atomic.Bool               // StopContend leaves on its caller's goroutine
	gaveUp   chan struct{}             // closed when StopContend's context ended before its turn
	done     chan struct{}             // closed when the contention has left
	started  chan struct{}             // closed at the first report, or with startErr
	startErr error
	leaveErr error // set by leave before done is closed

	// Owned by the holder of turn.
	left     bool             // the contention has left (leave)
	key      string           // this contender's key; empty when it has none
	marker   string           // a hold's marker, put with key's lease at its admission; empty for a mutex
	keyLease clientv3.LeaseID // the lease key is put with
	joinReq  *pb.TxnRequest   // join's transaction for key (prepareJoin); a mutex's only
	rev      int64            // key's create revision, the token while it owns; 0 until it is known
	// The last join failed (StopContend cut it short, say): its put may still be applied,
	// even after leave's delete.
	joinUnanswered bool
	served         bool // a one-tenure participant (WaitsOnly) was reported the owner
	isStarted      bool

	// Guarded by b.mu.
	gen      uint64              // bumped by every event that may make view stale
	view     view                // the last view installed
	last     backend.Record      // the last record reported
	since    time.Time           // when view.ownerKey was first seen owning
	sinceOf  string              // the owner key since refers to
	watches  map[target]*watcher // by what is watched
	lastErr  error               // the last failure, for StartContend's error
	mine     string              // key, for OthersWaiting
	slotSeen slotRecord          // the slot record last seen, which a claim expects
	// HandOff is queueing this contender's key again: run does not join meanwhile.
	handingOff bool
}

// view is what one look found: who owns the mutex, and how long that may be believed.
type view struct {
	valid     bool
	self      bool          // the owner key is this contender's
	ownerKey  string        // empty: no owner
	owner     string        // the owner's contender ID (from its key's value)
	value     string        // the owner value of the tenure token names (from the same key)
	token     uint64        // the owner key's create revision
	epoch     uint64        // the lease epoch it was read in
	gen       uint64        // the contention's gen when the look began
	confirmed time.Time     // the lease cannot expire before confirmed + ttl
	ttl       time.Duration // the lease's TTL
}

// look is what one read of the mutex found, and what to watch from rev on.
type look struct {
	v     view
	watch []target // what to watch
	rev   int64    // the revision the read saw
	again bool     // something changed: look again at once
}

// newContention returns p's contention, with the lowest number free under its dir. Called
// with b.mu held.
func newContention(b *Backend, p backend.Participant) *contention {
	log := p.Logger
	if log == nil {
		log = b.log
	}
	dir, queue, held := b.holdDirs(p)
	return &contention{
		b:       b,
		p:       p,
		log:     log,
		dir:     dir,
		queue:   queue,
		held:    held,
		n:       b.takeNumber(dir),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		turn:    make(chan struct{}, 1),
		gaveUp:  make(chan struct{}),
		done:    make(chan struct{}),
		started: make(chan struct{}),
		watches: make(map[target]*watcher),
	}
}

var _ backend.Contention = (*contention)(nil)

// StopContend deletes the contender's key, on the caller's goroutine, and stops watching.
// It returns when that is done, or with ctx's error when ctx ends first; the key is then
// left to the backend, which deletes it in the background, or to etcd, which deletes it
// with the lease.
func (c *contention) StopContend(ctx context.Context) error {
	if dl, ok := ctx.Deadline(); ok {
		c.stopBy.Store(&dl)
	}
	first := c.stopping.CompareAndSwap(false, true)
	c.halt() // a look under way ends: the turn comes at once
	if first {
		select {
		case c.turn <- struct{}{}:
			if !c.left {
				c.leave(ctx)
			}
			<-c.turn
		case <-ctx.Done():
			close(c.gaveUp)
			c.startRun() // run leaves
		}
	}
	select {
	case <-c.done:
		return c.leaveErr
	case <-ctx.Done():
		return fmt.Errorf("simba/etcd: key not deleted yet; left to the backend: %w", ctx.Err())
	}
}

var _ backend.WaitList = (*contention)(nil)

// OthersWaiting reports whether keys of other contenders are under the mutex, that is
// whether anyone waits behind this contender: the keys are the mutex's wait list.
func (c *contention) OthersWaiting(ctx context.Context) (bool, error) {
	c.b.mu.Lock()
	mine := c.mine
	c.b.mu.Unlock()
	resp, err := c.b.client.Get(ctx, c.dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(2))
	if err != nil {
		return false, storeError("list", c.dir, err)
	}
	for _, kv := range resp.Kvs {
		if string(kv.Key) != mine {
			return true, nil
		}
	}
	return false, nil
}

func (c *contention) halt() {
	c.stopOnce.Do(func() {
		c.lookMu.Lock()
		defer c.lookMu.Unlock()
		close(c.stop)
		if c.endLook != nil {
			c.endLook() // a look under way ends
		}
	})
	if !c.stopping.Load() {
		c.startRun() // run leaves: StopContend does not
	}
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
	c.startRun()
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// startRun starts the contention's goroutine (run) when it is first needed: at the first
// poke, or at a halt that StopContend does not leave for. An uncontended Locker's
// contention needs none: the caller makes its first look and its leave.
func (c *contention) startRun() { c.runOnce.Do(func() { c.b.wg.Go(c.run) }) }

// run looks at the mutex whenever something may have changed (a watch fired, the lease
// was granted) until halted, then leaves, unless StopContend does.
func (c *contention) run() {
	retry := stoppedTimer()
	defer retry.Stop()
	failures := 0
	for {
		select {
		case <-c.stop:
			c.leaveFromRun()
			return
		case <-c.kick:
		case <-retry.C:
		}
		c.turn <- struct{}{}
		if c.halted() {
			<-c.turn
			continue // the next turn of the loop leaves
		}
		ctx, cancel := c.lookContext(context.Background())
		again, err := c.step(ctx)
		c.endLookContext(cancel)
		failed := err != nil && !c.halted() && !c.startFailed(err)
		<-c.turn
		if err == nil {
			failures = 0
			if again {
				c.poke()
			}
			continue
		}
		if !failed {
			continue
		}
		failures++
		isRefused := errors.Is(err, simba.ErrRefused)
		d := backoff(failures, time.Second)
		if isRefused {
			c.log.Error("simba/etcd: etcd refused a request on the mutex; retrying", "err", err, "retry_in", d)
		} else {
			c.log.Warn("simba/etcd: reading the mutex failed; retrying", "err", err, "retry_in", d)
		}
		retry.Reset(d)
	}
}

// startFailed records err as the last failure and reports whether it ended the start: a
// refusal before the first report. Called by the holder of the turn.
func (c *contention) startFailed(err error) bool {
	c.b.mu.Lock()
	c.lastErr = err
	c.b.mu.Unlock()
	if !errors.Is(err, simba.ErrRefused) || c.isStarted {
		return false
	}
	c.startErr, c.isStarted = err, true
	close(c.started)
	return true
}

// lookFirst makes the contention's first look on the caller's goroutine (StartContend's),
// within ctx: an uncontended acquisition's goroutine then only waits. It leaves the look
// to run when run holds the turn (the lease was granted meanwhile), and any look after a
// failure or a change.
func (c *contention) lookFirst(ctx context.Context) {
	select {
	case c.turn <- struct{}{}:
	default:
		c.poke()
		return
	}
	defer func() { <-c.turn }()
	if c.halted() {
		return
	}
	ctx, cancel := c.lookContext(ctx)
	defer c.endLookContext(cancel)
	again, err := c.step(ctx)
	if again || (err != nil && !c.startFailed(err)) {
		c.poke()
	}
}

// lookContext returns the context of a look within parent, which ends after a lease TTL,
// or at once when the contention is halted. The look ends it with endLookContext. Called
// by the holder of the turn: one look at a time.
func (c *contention) lookContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(parent, c.b.leaseTTL)
	c.lookMu.Lock()
	defer c.lookMu.Unlock()
	if c.halted() {
		cancel()
	} else {
		c.endLook = cancel
	}
	return ctx, cancel
}

// endLookContext ends the context of the look that ends (lookContext).
func (c *contention) endLookContext(cancel context.CancelFunc) {
	c.lookMu.Lock()
	c.endLook = nil
	c.lookMu.Unlock()
	cancel()
}

// leaveFromRun leaves once run is halted, unless StopContend leaves on its caller's
// goroutine: then it waits for that, or for StopContend to give up.
func (c *contention) leaveFromRun() {
	if c.stopping.Load() {
		select {
		case <-c.done:
			return
		case <-c.gaveUp:
		}
	}
	c.turn <- struct{}{}
	defer func() { <-c.turn }()
	if c.left {
		return
	}
	dl := time.Now().Add(c.b.leaseTTL / 3)
	if by := c.stopBy.Load(); by != nil {
		dl = *by
	}
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	c.leave(ctx)
}

// step looks at the mutex once, if the backend has a lease, and reports what it found.
// again asks for another step at once: something changed while it looked.
func (c *contention) step(ctx context.Context) (again bool, err error) {
	c.b.mu.Lock()
	l, gen, handingOff := c.b.lease, c.gen, c.handingOff
	c.b.mu.Unlock()
	if l.id == 0 {
		if errors.Is(l.err, simba.ErrRefused) {
			return false, l.err // etcd refuses the backend a lease: the start fails at once
		}
		return false, nil // the keeper pokes every contention when it has a lease
	}
	var lk look
	switch {
	case c.p.ContenderID == "":
		lk, err = c.observe(ctx)
	case c.served && c.rev == 0:
		// A participant that serves one tenure (Participant.WaitsOnly: a Locker's) lost
		// it with its key. It does not queue again: its StopContend follows, and a new
		// key would make it the owner again meanwhile, for nobody.
		lk = look{}
	case handingOff && c.rev == 0:
		return false, nil // HandOff queues the key behind those it passed over, then pokes
	default:
		if c.key != "" && c.keyLease != l.id {
			c.setKey(0) // put with a lease that is gone, and gone with it
		}
		if c.key == "" {
			c.setKey(l.id)
		}
		switch {
		case c.p.Hold.Kind != backend.Mutex && c.rev == 0:
			lk, err = c.joinHold(ctx)
			c.joinUnanswered = err != nil
		case c.p.Hold.Kind != backend.Mutex:
			lk, err = c.readHold(ctx)
		case c.rev == 0:
			lk, err = c.join(ctx)
			c.joinUnanswered = err != nil
		default:
			lk, err = c.read(ctx)
		}
	}
	if leaseNotFound(err) {
		c.b.lost(l.epoch, "a put with it found it expired")
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if lk.again {
		return true, nil
	}
	return c.install(l, gen, lk), nil
}

// join puts the contender's key, if it does not exist, and reads the mutex in the same
// transaction. While the mutex's prefix holds no key (the comparison of a range holds
// for each of its keys, and for none), it only puts the key, which is then the lowest:
// the contender owns, with the transaction's revision as its token. Otherwise, in a
// transaction nested in the same one, it puts the key if it is absent and reads the
// lowest key and the two latest (its own, just put, and the one before it). A retry
// after a lost reply finds the key put and reads again.
func (c *contention) join(ctx context.Context) (look, error) {
	floor := c.b.revisionFloor()
	resp, err := c.b.kv.Txn(ctx, c.joinReq, callOptions...)
	if err != nil {
		return look{}, storeError("put", c.key, clientv3.ContextError(ctx, err))
	}
	c.b.sawRevision(resp.Header, floor)
	if resp.Succeeded {
		c.rev = resp.Header.Revision
		return c.ownLook(resp.Header.Revision), nil
	}
	nested := resp.Responses[0].GetResponseTxn()
	if !nested.Succeeded {
		kvs := nested.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return look{again: true}, nil
		}
		c.rev = kvs[0].CreateRevision
		c.log.Info("simba/etcd: found the key put: by a put whose reply was lost, or by a hand-off that queued it again", "key", c.key)
		return c.read(ctx)
	}
	c.rev = resp.Header.Revision
	first := nested.Responses[1].GetResponseRange().Kvs
	latest := nested.Responses[2].GetResponseRange().Kvs
	var pred *mvccpb.KeyValue
	if len(latest) == 2 && string(latest[0].Key) == c.key {
		pred = latest[1]
	}
	return c.decide(ctx, resp.Header.Revision, first, pred)
}

// callOptions are clientv3's defaults for requests its KV makes, for those the backend
// makes on the client's connection (Backend.kv): a request waits for a connection rather
// than failing at once.
var callOptions = []grpc.CallOption{grpc.WaitForReady(true), grpc.MaxCallSendMsgSize(2 << 20), grpc.MaxCallRecvMsgSize(math.MaxInt32)}

// joinRequest returns join's transaction for key, put with value and lease under dir, as
// etcd's protocol messages: clientv3's Op and Cmp build them anew at every request, and
// clone every comparison by reflection.
func joinRequest(dir, key, value string, lease clientv3.LeaseID) *pb.TxnRequest {
	k, d, end := []byte(key), []byte(dir), []byte(clientv3.GetPrefixRangeEnd(dir))
	put := &pb.RequestOp{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: k, Value: []byte(value), Lease: int64(lease)}}}
	get := func(r *pb.RangeRequest) *pb.RequestOp {
		return &pb.RequestOp{Request: &pb.RequestOp_RequestRange{RequestRange: r}}
	}
	absent := func(key, end []byte) *pb.Compare {
		return &pb.Compare{Key: key, RangeEnd: end, Result: pb.Compare_EQUAL, Target: pb.Compare_CREATE,
			TargetUnion: &pb.Compare_CreateRevision{CreateRevision: 0}}
	}
	byCreate := func(order pb.RangeRequest_SortOrder, limit int64) *pb.RequestOp {
		return get(&pb.RangeRequest{Key: d, RangeEnd: end, Limit: limit, SortOrder: order, SortTarget: pb.RangeRequest_CREATE})
	}
	return &pb.TxnRequest{
		Compare: []*pb.Compare{absent(d, end)}, // no key under dir
		Success: []*pb.RequestOp{put},
		Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestTxn{RequestTxn: &pb.TxnRequest{
			Compare: []*pb.Compare{absent(k, nil)},
			// The put, the lowest key (WithFirstCreate), the two latest.
			Success: []*pb.RequestOp{put, byCreate(pb.RangeRequest_ASCEND, 1), byCreate(pb.RangeRequest_DESCEND, 2)},
			Failure: []*pb.RequestOp{get(&pb.RangeRequest{Key: k})},
		}}}},
	}
}

// read reads, in one transaction, the contender's key, the mutex's lowest key, and the
// key created just before the contender's.
func (c *contention) read(ctx context.Context) (look, error) {
	floor := c.b.revisionFloor()
	resp, err := c.b.client.Txn(ctx).Then(
		clientv3.OpGet(c.key),
		clientv3.OpGet(c.dir, clientv3.WithFirstCreate()...),
		clientv3.OpGet(c.dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(c.rev-1))...),
	).Commit()
	if err != nil {
		return look{}, storeError("read", c.dir, err)
	}
	c.b.sawRevision(resp.Header, floor)
	own := resp.Responses[0].GetResponseRange().Kvs
	if len(own) > 0 && own[0].CreateRevision != c.rev && clientv3.LeaseID(own[0].Lease) == c.keyLease {
		// Put again with this contender's lease: a hand-off passed it over (or was its
		// own) and queued it behind to. Its place is the new key's.
		c.log.Info("simba/etcd: this contender's key was queued again by a hand-off", "key", c.key)
		c.rev = own[0].CreateRevision
		return look{again: true}, nil
	}
	if len(own) == 0 || own[0].CreateRevision != c.rev {
		// Deleted by someone else (ReleaseOwner), or gone with its lease (then the put
		// of the next join fails, and the backend finds out).
		c.log.Info("simba/etcd: this contender's key is gone", "key", c.key)
		c.suspendView()
		c.rev = 0 // join again, unless it served its tenure (see step)
		return look{again: true}, nil
	}
	var pred *mvccpb.KeyValue
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		pred = kvs[0]
	}
	return c.decide(ctx, resp.Header.Revision, resp.Responses[1].GetResponseRange().Kvs, pred)
}

// decide makes the view from a read at rev: first is the mutex's lowest key (none: no
// owner), pred the key created just before the contender's (nil: none, it owns).
func (c *contention) decide(ctx context.Context, rev int64, first []*mvccpb.KeyValue, pred *mvccpb.KeyValue) (look, error) {
	if len(first) == 0 {
		return look{again: true}, nil // its own key is gone since: read again
	}
	owner := first[0]
	if string(owner.Key) == c.key {
		return c.ownLook(rev), nil
	}
	lk := look{rev: rev, v: ownerView(owner)}
	if pred != nil {
		lk.watch = append(lk.watch, target{key: string(pred.Key)}) // its deletion may make this contender the owner
	}
	if !c.p.WaitsOnly && (pred == nil || string(pred.Key) != string(owner.Key)) {
		lk.watch = append(lk.watch, target{key: string(owner.Key)}) // its deletion changes the owner
	}
	lk.watch = append(lk.watch, target{key: c.key}) // its deletion ends the contention's place
	if lk.v.owner == c.p.ContenderID {
		return c.sharedID(ctx, lk, owner)
	}
	return lk, nil
}

// ownLook is the look of a read at rev that found the contender's key the lowest: it owns,
// and watches its key, whose deletion ends its tenure.
func (c *contention) ownLook(rev int64) look {
	return look{rev: rev, watch: []target{{key: c.key}},
		v: view{self: true, ownerKey: c.key, owner: c.p.ContenderID, value: c.p.Value, token: uint64(c.rev)}}
}

// sharedID handles an owner key that carries this contender's ID but is not its key. A
// key of this backend's lease is one a contention of this contender left behind when it
// stopped (its delete was lost, or is under way): it is deleted, and the mutex read again.
// Any other is a contender elsewhere with the same ID, and the owner is reported as
// unknown rather than as this contender.
func (c *contention) sharedID(ctx context.Context, lk look, owner *mvccpb.KeyValue) (look, error) {
	if clientv3.LeaseID(owner.Lease) == c.keyLease {
		c.log.Info("simba/etcd: deleting a key this contender left behind", "key", string(owner.Key))
		if _, err := c.b.deleteKey(ctx, string(owner.Key), ""); err != nil {
			return look{}, err
		}
		return look{again: true}, nil
	}
	c.log.Warn("simba/etcd: the owner's key carries this contender's ID: two contenders share an ID", "key", string(owner.Key))
	lk.v.owner, lk.v.value, lk.v.token = "", "", 0
	return lk, nil
}

// observe reads the owner for a retriever, and watches its key, or, while nobody contends,
// the mutex's prefix for the first key.
func (c *contention) observe(ctx context.Context) (look, error) {
	floor := c.b.revisionFloor()
	resp, err := c.b.client.Get(ctx, c.dir, clientv3.WithFirstCreate()...)
	if err != nil {
		return look{}, storeError("read", c.dir, err)
	}
	c.b.sawRevision(resp.Header, floor)
	if len(resp.Kvs) == 0 {
		return look{rev: resp.Header.Revision, watch: []target{{key: c.dir, prefix: true, puts: true}}}, nil
	}
	kv := resp.Kvs[0]
	return look{rev: resp.Header.Revision, watch: []target{{key: string(kv.Key)}}, v: ownerView(kv)}, nil
}

// ownerView is the view of kv as the owner's key: its contender ID and owner value, and
// its create revision as the token, all read at once.
func ownerView(kv *mvccpb.KeyValue) view {
	id, value := parseKeyValue(kv.Value)
	return view{ownerKey: string(kv.Key), owner: id, value: value, token: uint64(kv.CreateRevision)}
}

// valueSep separates a contender's ID from its owner value in its key's value. Neither
// contains a control character (simba checks both), so the first NUL ends the ID.
const valueSep = "\x00"

// keyValue returns the value of a contender's key: its ID alone, or with an owner value
// its ID, a NUL and the value.
func keyValue(id, value string) string {
	if value == "" {
		return id
	}
	return id + valueSep + value
}

// parseKeyValue splits the value of a contender's key into its ID and owner value.
func parseKeyValue(v []byte) (id, value string) {
	id, value, _ = strings.Cut(string(v), valueSep)
	return id, value
}

// setKey gives the contender a key to put with lease id (and, for a hold, a marker, and
// for a mutex, join's transaction), or none when id is zero.
func (c *contention) setKey(id clientv3.LeaseID) {
	key, marker := "", ""
	var join *pb.TxnRequest
	c.b.mu.Lock()
	switch {
	case id == 0:
	case c.queue != "":
		key, marker = keyOf(c.queue, id, c.n), keyOf(c.held, id, c.n)
	default:
		key, join = c.b.prepareJoin(c.number(), id, c.p.ContenderID, c.p.Value)
	}
	c.mine = key
	c.b.mu.Unlock()
	c.key, c.marker, c.keyLease, c.rev, c.joinReq = key, marker, id, 0, join
}

// preparedJoin is the key of a mutex contender's contention and its join's transaction,
// which depend on its number, the lease, the contender's ID and its owner value only.
type preparedJoin struct {
	n         number
	lease     clientv3.LeaseID
	id, value string
	key       string
	req       *pb.TxnRequest
}

// prepareJoin returns the key and join's transaction of a mutex contender's contention
// numbered n under lease, with ID id and owner value value. The backend keeps the last it
// made: a Locker's acquisitions, one contention each, make the same one. No two contentions
// share it at once: a number is taken until its contention has left (takeNumber). Called
// with b.mu held.
func (b *Backend) prepareJoin(n number, lease clientv3.LeaseID, id, value string) (key string, req *pb.TxnRequest) {
	j := &b.lastJoin
	if j.req == nil || j.n != n || j.lease != lease || j.id != id || j.value != value {
		key := keyOf(n.dir, lease, n.n)
		*j = preparedJoin{n: n, lease: lease, id: id, value: value, key: key,
			req: joinRequest(n.dir, key, keyValue(id, value), lease)}
	}
	return j.key, j.req
}

// suspendView ends the view at once. Called by run.
func (c *contention) suspendView() {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.suspend()
}

// install makes lk's view the contention's, watches what it names, and reports it, unless
// the lease changed since the look began (the keeper pokes when it has a new one) or an
// event came meanwhile (gen): then it asks to look again.
func (c *contention) install(l lease, gen uint64, lk look) (again bool) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lease.epoch != l.epoch {
		return false
	}
	c.setWatches(lk)
	if c.gen != gen {
		return true
	}
	v := lk.v
	v.valid, v.epoch, v.gen, v.confirmed, v.ttl = true, l.epoch, gen, b.lease.proof, b.lease.ttl
	if v.ownerKey != c.sinceOf {
		c.since, c.sinceOf = time.Now(), v.ownerKey
	}
	c.view = v
	c.lastErr = nil
	c.publish()
	if v.self && c.p.WaitsOnly {
		c.served = true
	}
	if !c.isStarted {
		c.isStarted = true
		close(c.started)
	}
	return false
}

// setWatches watches the keys lk names from the revision after its read, and stops
// watching the others. A watch already running was started earlier, and so covers those
// revisions too. A watch fires when what it waits for comes; one that ends otherwise (the
// member lost its leader, the revision was compacted, the stream broke) fires too: the look
// finds out what happened (see Backend.fire). Called with b.mu held.
func (c *contention) setWatches(lk look) {
	for t, w := range c.watches {
		if !slices.Contains(lk.watch, t) {
			c.b.unwatch(w)
			delete(c.watches, t)
		}
	}
	for _, t := range lk.watch {
		if _, ok := c.watches[t]; !ok {
			// An owner's watch of its own key is sent late (ownWatchDelay): a short
			// tenure, an uncontended Locker's, ends before it would be.
			c.watches[t] = c.b.watch(c, t, lk.rev+1, lk.v.self && t.key == c.key)
		}
	}
}

// target is what a watch waits for: key's deletion, or with puts its put; with prefix,
// the same of any key under key, and with before only of keys created before that
// revision (a semaphore's waiter, for the keys ahead of it).
type target struct {
	key    string
	prefix bool
	puts   bool
	before int64
}

// fires reports whether events are what t waits for.
func (t target) fires(events []*mvccpb.Event) bool {
	if t.before == 0 {
		return len(events) > 0
	}
	for _, ev := range events {
		if ev.PrevKv == nil || ev.PrevKv.CreateRevision < t.before {
			return true // without the key as it was (compacted), look again
		}
	}
	return false
}

// confirm renews the local bound of c's view with a new proof that the lease is alive
// (Backend.beat), if nothing has made the view stale. Called with b.mu held.
func (c *contention) confirm(epoch uint64, proof time.Time, ttl time.Duration) {
	v := &c.view
	if !v.valid || v.epoch != epoch || v.gen != c.gen || !proof.After(v.confirmed) {
		return
	}
	v.confirmed, v.ttl = proof, ttl
	c.publish()
}

// suspend ends c's view at once: the lease is lost, or this contender's key is gone.
// Called with b.mu held.
func (c *contention) suspend() {
	c.gen++
	c.view.valid = false
	if c.last != (backend.Record{}) {
		c.last = backend.Record{}
		c.p.Report(backend.Record{}, time.Now())
	}
}

// publish reports c's view. An owner record is believed until the proof that the lease is
// alive plus its TTL, less 1% for clock-rate drift: the lease, and the contender's key
// with it, cannot expire on the leader before then. Called with b.mu held.
func (c *contention) publish() {
	v := c.view
	var rec backend.Record
	if v.valid && v.owner != "" {
		life := v.ttl - v.ttl/100
		rec = backend.Record{Owner: v.owner, TTL: life, Transition: life, Held: v.confirmed.Sub(c.since), Token: v.token, Value: v.value}
	}
	if rec == (backend.Record{}) && c.last == (backend.Record{}) {
		return
	}
	c.last = rec
	c.p.Report(rec, v.confirmed)
}

// leave deletes the contender's key when the contention stops, within ctx or, when it
// has no deadline, a third of the lease TTL, then closes done. A key whose delete fails is
// left to the backend, which deletes it in the background, or to etcd, with the lease.
// Called by the holder of the turn, once.
func (c *contention) leave(ctx context.Context) {
	c.left = true
	defer close(c.done)
	b := c.b
	b.mu.Lock()
	c.suspend() // the service has ended belief already, unless the backend is closing
	for k, w := range c.watches {
		b.unwatch(w)
		delete(c.watches, k)
	}
	delete(b.contentions, c)
	closed, current := b.closed, b.lease.id
	b.mu.Unlock()
	if !c.isStarted {
		c.isStarted = true
		c.startErr = errors.New("simba/etcd: stopped before it started")
		close(c.started)
	}
	if closed || c.key == "" || c.keyLease != current {
		// Close revokes the lease, and its keys go with it; a lost lease took the key. A
		// key put with an earlier lease had another name.
		b.mu.Lock()
		b.freeNumber(c.number())
		b.mu.Unlock()
		return
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, b.leaseTTL/3)
		defer cancel()
	}
	deleted, err := b.deleteKey(ctx, c.key, c.marker)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case err != nil:
		c.leaveErr = err
		b.leaveBehind(c.key, c.marker, c.keyLease, c.number())
	case c.joinUnanswered || !deleted:
		// A put of the key may still come after this delete: a join cut short on the
		// client that the server applies late, or, when the key was gone already, a
		// hand-off that passed this contender over and queues its key again. Its key
		// would stand ahead of every later contender until the lease ends: the keeper
		// deletes it again at its keep-alives for a TTL.
		b.orphans[c.key] = orphan{lease: c.keyLease, marker: c.marker, number: c.number(), until: time.Now().Add(b.leaseTTL)}
	default:
		b.freeNumber(c.number())
	}
}

// number returns c's number under its dir.
func (c *contention) number() number { return number{dir: c.dir, n: c.n} }
