// Package etcd is simba's etcd backend, built on go.etcd.io/etcd/client/v3. It elects
// owners the way etcd's own concurrency package does (a key per contender under the
// mutex's prefix, the lowest create revision owns), and closes the gaps that package
// leaves: see "Compared with etcd's concurrency package" below.
//
// # Storage format
//
// The backend has one lease, granted at its first StartContend and kept alive on one
// keep-alive stream, as a concurrency.Session is. A contender of mutex m puts the key
//
//	<prefix><m>/<lease ID, 16 hex digits>-<contention number, hex>
//
// attached to that lease, with its contender ID as the value (followed, for a contender
// with an owner value, by a NUL and the value: see Owner values). The prefix is "simba/"
// unless WithPrefix says otherwise; the number tells apart the contentions of one backend
// on one mutex, and is the lowest whose key is gone: a contender's acquisitions put the
// same key again, so that the names etcd keeps in its index until a compaction, and scans
// at every read of the mutex, are as many as the contentions at once. The key whose create revision is the lowest owns the mutex: first come,
// first served. A key is put once (a transaction that puts it only if it does not exist,
// so a retry after a lost reply finds it) and read back in the same transaction with the
// mutex's lowest key and the key created just before it; when the transaction finds no
// key under the mutex's prefix (a comparison over the prefix), it only puts the key, which
// then owns. Keys go when their contender
// stops (a delete), when the lease ends (revoked by Close, or expired on the server), by
// ReleaseOwner, or by a hand-off (which puts them again, behind: see Hand-off). The keys under a mutex's prefix are its wait list: contentions
// implement backend.WaitList.
//
// Every read that decides ownership is linearizable (a transaction, or a Get without
// WithSerializable): it reflects every write the cluster committed before it was sent.
//
// # Owner values
//
// The backend keeps owner values (Participant.Value) for mutexes: the value of a
// contender's key is its ID, a NUL and its value (its ID alone when it has none, so a
// contender without a value writes and reads what it did before). The join that creates
// the key writes it, with no request of its own, and every read takes the owner's ID,
// value and token (the key's create revision) from the one key: a record's value is
// always the value of the tenure its token names. IDs and values contain no control
// characters (simba checks both), so the first NUL ends the ID. A backend of an earlier
// version reads such an owner's ID with the NUL and value attached.
//
// # Slot records
//
// Contentions implement backend.SlotRecorder: a mutex's last slot that a Scheduler
// started lies in a key of its own, outside the mutex's prefix (no contender lists it),
// and attached to no lease:
//
//	<prefix>/slot/<m>   "<the slot's instant, Unix nanoseconds> <its token>", in decimal
//
// LastSlot reads it (a linearizable read). ClaimSlot puts it in a transaction that
// compares its mod revision with the record's the contention saw last (none: absent), so
// that nothing was recorded in between; a record that passed the slot, or passes it when
// read again, answers false. Nothing removes the record (a few bytes per mutex): delete
// it with etcdctl once the mutex is no longer used. A malformed record is refused
// (simba.ErrRefused).
//
// # Hand-over by watch
//
// A contender that does not own watches the key created just before its own, from the
// revision after its read, for its deletion: a leaving contender wakes only its successor,
// which reads the mutex again (one round trip) and owns if its key is now the lowest. A
// service's waiter also watches the owner's key, so that it knows at once who owns after
// a change; a Locker's waiter (which only waits for its turn) does not. The owner watches
// its own key, once its tenure has lasted 50ms (see How long an owner believes). A
// retriever watches the owner's key, or the mutex's prefix while nobody contends. A watch
// that ends otherwise (the member lost its leader, the revision was compacted, the stream
// broke) makes the contention read again. A backend's watches share one watch stream,
// each a create and a cancel on it under an ID the backend picks, so that a watch opens
// no stream of its own. etcd takes a client's watch ID since 3.4: the backend needs etcd
// 3.4 or later.
//
// # Hand-off
//
// Contentions implement backend.HandOffer. Waiters lists the keys after the owner's, in
// create order, with their IDs and values. HandOff(to), by the owner, reads the mutex's
// keys, then in one transaction, which compares the create revisions of the owner's key
// (it still exists, so it is still the lowest) and of to's key (the first waiter's with
// ID to), deletes the owner's key and the keys of the waiters ahead of to's, each if it
// still has the create revision read. to's key is then the lowest: to owns, with its
// key's create revision as its token (greater than the owner's) and its key's value, and
// learns it from its watch on the key before its own. A failed comparison changes
// nothing: simba.ErrNotOwner, or simba.ErrNotWaiting when to's key is gone.
//
// Then the caller puts the keys it deleted again, one transaction each, each only if it
// is absent, with its lease and value: first those of the waiters passed over, in their
// order, then its own, while its own contention holds back from joining. So they wait
// behind those that waited behind to, the caller last, and each contention takes its new
// key as its own (a waiter that saw its key gone first joins by itself, at the back, still
// ahead of the caller). A contention that stops and finds its key gone already may see
// such a put come after its delete: its backend deletes the key again at its keep-alives
// for a lease TTL, so that no key outlives its contention for longer.
//
// etcd takes at most 128 operations in a transaction by default (--max-txn-ops): a
// hand-off that passes over 128 waiters or more is refused (simba.ErrRefused). If to dies
// after the hand-off, its key goes with its lease, as any owner's: its tenure lapses a
// lease TTL after its last answered keep-alive at the latest, and the next waiter owns.
//
// # Fencing token
//
// The token of a tenure is the create revision of the owner's key. etcd's revision is
// global to the cluster and only grows, and the owner's key is older than every key
// behind it, so every later tenure of the mutex has a greater token, whatever happens to
// keys meanwhile. It goes back only if the cluster's data is lost (members restarted
// without their data directories, a cluster rebuilt, or restored from an older snapshot).
//
// The backend notices that: a linearizable answer (a transaction, a read, a grant) whose
// revision is below one seen before its request was sent; after a wipe at once, since its
// lease is gone and it asks for another, after a restore that brought its lease back at
// its next read of a mutex (which an owner left undisturbed does not make). It logs it at Error level, counts it (TokenRegressions) and
// gives its lease up: every contention stops believing at once, and a key that came back
// with the lease goes with the revoke. Then it holds back: it asks for no lease, so none
// of its contentions holds a key, owns or reports an owner, until etcd's revision has
// passed the highest it saw before (it reads it again at least every third of the TTL).
// So no token it reports after the loss repeats or is below one it reported before, and
// it keeps nobody else out meanwhile; StartContend fails by its deadline, with an error
// that says why. Other writes raise the revision in time; an operator raises it at once
// by restoring the cluster with etcdutl snapshot restore --bump-revision (by more than the
// revisions lost) --mark-compacted, in etcd 3.6 and later 3.5 releases. A backend started
// after the loss knows no earlier revision and contends at once: its tokens may be below
// ones handed out before, and a resource that keeps the greatest token it has seen
// rejects its owners' writes until tokens pass it.
//
// A resource kept in the same etcd rejects a stale owner's writes with FenceKey (or
// Fence, which finds the key): the comparison CreateRevision(owner key) = token holds
// while the tenure's key exists, and fails once it is gone, whatever its owner believes.
//
// # How long an owner believes: the lease, proven by the leader
//
// Every owner a contention reports is believed until the latest proof that the backend's
// lease is alive plus the lease's TTL, less 1% for clock-rate drift, on the local
// monotonic clock. The proof is the send time of the last keep-alive that was answered
// with a TTL (or of the grant). Only the leader renews leases: a follower passes a
// keep-alive to the leader over the peer link and returns the leader's answer, and fails
// it when it has no leader (the stream asks for one). So the lease, and the keys attached
// to it, cannot expire before the keep-alive's send time plus the TTL. A leader cut off
// from its quorum renews until it steps down, within an election timeout or two, and a
// new leader extends every lease by an election timeout when it takes over, which covers
// those renewals. Nothing else renews belief: no read (a follower may serve one from its
// own, stale state) and no answer the client library kept.
//
// So an owner stops believing, and its tenure context ends, at the latest a TTL after its
// last answered keep-alive: when its process stalls, when its connection is cut, or when
// its member is cut off from the leader. Earlier when it learns that its tenure is over:
// a keep-alive answered without a TTL (the lease expired or was revoked), a put that
// finds the lease gone, or its watch of its key, which sees the key deleted. That watch
// is sent once the tenure has lasted 50ms, so that a shorter one (an uncontended Locker's)
// sends neither it nor its cancel. It starts from the read that found the contender
// owning: a deletion in the first 50ms reaches the owner when it is sent, or, when etcd
// has written other revisions since, at etcd's next catch-up of such watches (every
// 100ms), so within 150ms and a round trip. A keep-alive goes every third of the TTL, and
// again soon after one fails or goes unanswered for a sixth, so an owner keeps its tenure
// through any silence of etcd shorter than about two thirds of the TTL (etcd's own client,
// a third after each answer from a loop that wakes every 500ms, through 500ms less at
// worst). The price is in failover: a crashed owner's keys outlive it by the TTL less the
// time since its last keep-alive, which longer gaps would shorten only by shortening the
// silence an owner rides out. For everyone else the same bound says how fresh the view is.
//
// Once no keep-alive has been answered for a TTL, the backend gives the lease up: it stops
// sending keep-alives and revokes it, as etcd's own client stops keeping alive a lease it
// heard nothing of for a TTL. Keep-alives that reach the leader while their answers are
// lost would otherwise keep the keys of owners that no longer believe first in line, and
// everyone out, for as long as that lasts. The revoke, if it arrives, deletes the
// backend's keys at once; otherwise the lease expires a TTL after the last keep-alive
// that arrived. Every contention then joins again under a new lease, as below.
//
// # The lease's TTL
//
// The TTL is the backend's (WithLeaseTTL, default 10s), not Participant.TTL: one lease
// serves every contention of the backend, whatever TTL its service set, as a
// concurrency.Session's does, and etcd counts TTLs in whole seconds. It is how long a
// crashed process's keys, and its ownership, outlive it. The server raises a TTL below its
// minimum (1.5 × its election timeout, rounded up to seconds: 2s by default), and the
// backend goes by the TTL the server granted (Lease). simba's TTL and transition play no
// part here, except that a service derives its call timeout from its TTL.
//
// When the lease is lost, every contention of the backend stops believing at once, the
// backend asks for a new lease, and each contention joins again with a new key, behind
// whoever joined meanwhile. A Locker's acquisition that owned is over then; one that
// waited goes on waiting, with its new key: no acquisition returns on a key that is gone.
//
// # What holds per deployment
//
// On a single member, ownership holds while the member runs; a restart keeps its data and
// the lease with it, and an owner whose keep-alives resume within the TTL keeps its
// tenure (a restart without the data: see Fencing token). On a cluster, it holds while a quorum is up: a member cut off from the others
// renews no lease, so owners connected only to it stop believing within a TTL (two
// election timeouts more if it was the leader), and tokens stay monotonic across leader
// changes. The backend's client may list every member; any may serve it.
//
// # Compared with etcd's concurrency package
//
//   - Campaign does not abort when its session's lease is lost while it waits: its key
//     is gone with the lease, and once the keys before it are deleted it returns nil, a
//     leader without a key. simba's waiter joins again with a new key under a new lease,
//     and an acquisition returns only on a key that exists and owns the mutex.
//   - Observe never reports that nobody leads, and keeps the old leader after its key is
//     gone. simba.Observe, Lookup and a retrieval service report the zero Owner.
//   - The only loss signal is Session.Done. A simba tenure has a context that ends, with
//     simba.ErrOwnershipLost as its cause, at the latest by the bound above, and at once
//     when the key or lease is seen gone; OnReleased follows.
//   - Fencing is left to the user (IsOwner inside a transaction). simba's token is the
//     owner key's create revision, and Fence or FenceKey gives the transaction's guard.
//   - There are no callbacks, scheduler, Locker deadlines or health: simba's are the same
//     as on every other store.
//
// # Semaphores and read-write locks
//
// The backend keeps them too (backend.Holder), each kind apart from mutexes and from the
// other: a semaphore's keys lie under <prefix>/semaphore/<name>/<permits>/
// (SemaphorePrefix), a read-write lock's under <prefix>/rwlock/<name>/ (RWMutexPrefix);
// the empty segment after the prefix is no mutex's name. Each hold is a contender of its
// own with two keys, named as a mutex contender's (<lease ID>-<contention number>), both
// attached to the backend's lease and with its contender ID as the value:
//
//	<prefix>/semaphore/<name>/<permits>/q/<key>   a permit's place, put when it joins
//	<prefix>/semaphore/<name>/<permits>/h/<key>   its marker, put when it is admitted
//	<prefix>/rwlock/<name>/r/<key>                a reader's place
//	<prefix>/rwlock/<name>/hr/<key>               its marker
//	<prefix>/rwlock/<name>/w/<key>                a writer's place
//	<prefix>/rwlock/<name>/hw/<key>               its marker
//
// Places are ordered by create revision: first come, first served, holders and waiters
// alike, so that no waiter passes an earlier one. A place is admitted when
//
//   - a semaphore's: fewer than permits places of the name were created before it;
//   - a reader's: no writer's place was created before it (a waiting writer keeps later
//     readers out);
//   - a writer's: no key of the lock was created before it, and no reader's marker
//     stands. A downgrade's read place comes after a writer that was waiting for the
//     downgrading writer, which is the first place once the downgrading writer is gone
//     (Curator's CURATOR-621): the read hold's marker keeps it out;
//   - a downgrade's read place (backend.Hold.Beside): at once, while the named writer's
//     marker stands.
//
// The admitted contender puts its marker in a transaction that compares its place's
// create revision, and for a read-write lock that no marker of the other side stands (for
// a downgrade instead, that the writer's marker still does, so that no writer can be
// admitted between the two). The marker's create revision is the hold's fencing token:
// new at the admission and above every earlier hold's of the name, read, write or permit.
// FenceKey(marker, token) guards a resource as a mutex owner's key does; the marker is the
// key under the name created at revision token. A release deletes place and marker in
// one transaction, and a lease ends both.
//
// The permit count is part of a semaphore's keys: a place is put only while no key of
// another count lies under the name, in the same transaction, and a mismatch is refused
// at once (simba.ErrRefused). Once nobody holds or waits, the name takes another count.
//
// A waiter watches, from the revision after its read, what can admit it: a reader the
// last writer's place before its own; a writer the key just before its own, then a
// downgrade's marker; a semaphore's waiter the place just before its own and that place's
// marker (that waiter is admitted or leaves first), or, when all the places before it may
// hold, the name's places, acting only on the deletion of one created before its own.
// So a release wakes only the waiters it may admit, each to read once. A waiter is told of the holder
// admitted first (the first marker, a writer's before a reader's), or of none: when
// another process's lease ends is not known here.
//
// # Who closes what
//
// New takes the caller's *clientv3.Client and never dials or closes it. Close ends every
// contention and revokes the lease (within a second; it expires by itself otherwise);
// close the client after the backend. The backend runs one goroutine that grants the
// lease, sends keep-alives and deletes keys left behind; one per contention, which makes
// its requests after the first look (StartContend makes that one, StopContend the delete,
// and calls through it, as HandOff or ClaimSlot, theirs, in the caller's goroutine),
// started when the contention first needs it (an uncontended Locker's never does); and
// two for its watch stream, which send the watches' requests and read their events.
// Every call returns by its context's deadline (backend.DeadlineKeeper).
//
// # Refusals and outages
//
// An answer that no retry can cure is a refusal: the error matches simba.ErrRefused, and
// a start fails at once rather than by its deadline. These are: permission denied, a
// failed or missing authentication (user name empty, user not found, authentication
// failed), a request too large or with too many operations, and a store out of space
// (its NOSPACE alarm needs an administrator). Everything else (no answer, no leader, a
// timeout, a reset connection, too many requests) is an outage, retried. A running
// contention retries a refusal too, logging it at Error level.
//
// # Names
//
// Mutex names must not contain '/' (a mutex's keys would lie under another's prefix) and
// are at most MaxMutexLength bytes; contender IDs at most MaxContenderIDLength bytes. The
// names of semaphores and read-write locks follow the same rules.
package etcd
