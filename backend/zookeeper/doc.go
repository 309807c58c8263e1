// Package zookeeper is simba's ZooKeeper backend, built on github.com/go-zookeeper/zk. It
// elects owners the way Curator's LeaderLatch does, in the same node format, so Go and
// JVM Simba services that name the same mutex on the same ensemble contend with each
// other.
//
// # Storage format
//
// A mutex is the node /simba/<mutex>. Each contender creates an EPHEMERAL_SEQUENTIAL child
// named _c_<uuid>-latch-<10-digit sequence> (Curator's protection: the UUID is random per
// create, in its canonical dashed form) whose data is the contender ID in UTF-8.
// /simba and /simba/<mutex> are created on first use as container nodes, which ZooKeeper
// deletes once their last child is gone. The contender whose node has the lowest
// sequence number owns the mutex; children are ordered by the digits after "latch-", not
// by name, and children that are not latch nodes are no contenders. The queue of nodes
// is the mutex's wait list: contentions implement backend.WaitList (OthersWaiting lists
// the queue). How a session learns of changes to the queue is its own affair (see
// Watches): sessions that watch differently contend with each other, and with JVM
// Simba's.
//
// # Owner values
//
// The backend keeps owner values of mutexes (backend.ValueKeeper, simba.WithOwnerValue) in
// nodes of its own beside the JVM layout, which JVM contenders never list: the node's data
// is Curator's, the contender ID. A contender with a value creates its node and an
// EPHEMERAL value node /simba-value/<mutex>/_c_<uuid>, named after its node's protection
// prefix and holding the value in UTF-8, in one transaction (a multi); the UUID of such a
// node carries version 8 (RFC 9562's custom version) instead of Curator's random version
// 4, so a reader reads a value node only for an owner that has one. /simba-value and
// /simba-value/<mutex> are container nodes. Both nodes of a multi have the same czxid: a
// reader, who reads the value node with the owner's node in one round trip, answers its
// value only when the czxids agree, so a Record never shows another tenure's value. A
// contender without a value creates its node alone, and pays no request more. With a
// value, joining is the multi and a read of the value node (ZooKeeper 3.8 answers no Stat
// to a create inside a multi; the value node's czxid is the token) in one round trip, and
// leaving two deletes in one. When the server has reaped /simba-value/<mutex> (a
// container, once empty), the join makes it again, as it makes /simba/<mutex>. The value
// node of a node deleted by someone else (a hand-off, ReleaseOwner, by hand) is deleted by
// the backend of its session when its contention finds the node gone, or with the session.
// Values need the raw requests of go-zookeeper v1.0.4 (see Watches): with any other
// version the backend keeps none.
//
// # Slot records
//
// A contention records a Scheduler's slots (backend.SlotRecorder) in the PERSISTENT node
// /simba-slot/<mutex>, beside the JVM layout, under the container node /simba-slot. Its
// data is "<At in Unix nanoseconds> <token>" in decimal ASCII. LastSlot reads it;
// ClaimSlot reads it, compares, and writes it with a setData on the version it read (or
// creates it when there is none), and reads again when another claim wrote first (a
// version conflict, or a create that finds the node); an instant whose Unix nanoseconds an
// int64 cannot hold is refused (simba.ErrInvalidArgument), and a record that is not of
// this form is a refusal (simba.ErrRefused). Nothing removes a slot record: it is a few
// bytes per mutex that a Scheduler ran on, kept until someone deletes it.
//
// # Hand-off
//
// A contention hands the mutex to a waiting contender (backend.HandOffer). Waiters lists
// the nodes after the owner's and reads each (its data, the contender ID, and its value
// node when it has one) in one round trip. HandOff(to) finds the first of them whose ID
// is to and sends one multi: a check that to's node is still there, the deletes of the
// waiters' nodes ahead of it, then the delete of the caller's node, so that to's node is
// the lowest and to owns, with its node's czxid as the token: greater than the caller's,
// as its node was made later. A failed check changes nothing: the caller's node gone is
// simba.ErrNotOwner, to's gone and no other node of to's is simba.ErrNotWaiting (a
// waiter ahead that left meanwhile makes HandOff list again).
//
// The caller's node goes last: the server sends the deletions' events in the order of the
// operations, and a session that keeps the queue from them, or a waiter that owns when the
// owner's node just before its own goes (see Watches), never sees a deleted waiter at the
// head. Every Go waiter whose node was deleted joins again at the back, with a new node,
// as when its node vanishes for any reason (a Locker's waiter too: it never owned); the
// waiters ahead of to lose their places, which ZooKeeper cannot keep. The caller's
// contention hears its node's deletion before the multi's answer and stops believing; it
// joins again only once each of those waiters has a new node (HandOff watches the mutex
// node's children for them, for a session timeout at most), so that it is behind those
// waiting, and HandOff returns once it has (or when its context ends). A JVM (Curator
// LeaderLatch) waiter whose node is deleted reacts as Curator does: the deletion of the
// node before its own, which goes in the same multi, wakes it; it lists the children, does
// not find its node and resets, creating a new node at the back. to learns of its tenure
// as of any: a Report, from the deletion of the node before its own. If to's session ends
// after the hand-off, its node goes with it and the next waiter owns, as after any owner
// that crashed.
//
// # Watches
//
// The queue watch (ZooKeeper 3.6 or later). A backend sets one persistent recursive
// watch (addWatch) on each mutex node it contends for, once per connection, and lists
// the queue once; from then on it keeps the queue from the watch's events, which the
// server sends in the order it applied the changes, each before the answer of any later
// request of the session, and a look at the mutex reads that copy. Joining costs one
// request, a create that answers the new node's czxid (create2); a hand-over costs none:
// the contender next in line hears the deletion of the node before its own, and owns;
// leaving costs the delete. An uncontended Locker cycle is two requests in two round
// trips (go-zookeeper's zk.Lock: three), a critical section of Lockers contending two
// requests (zk.Lock: five). A service, a Locker's TryAcquire and a retriever read the
// owner's node too, once per owner for the backend's contentions of the mutex, for its
// contender ID; a retriever's first look also asks the server (an exists), so that it
// sees every contender that joined before it began.
//
// The price is that every session with the watch hears every change of the queue, two
// events per critical section, where a watch per node wakes the next contender only.
// Measured in server CPU per critical section, with Lockers on one mutex, each on a
// session of its own in a loop of acquire and release: with 8 sessions the queue watch
// costs 0.6 to 0.8 times what watches per node cost, with 12 to 16 about as much (0.9 to
// 1.15 times), with 32 1.4 to 1.8 times. So a backend watches a queue whole only when it
// is at most WithQueueWatchLimit nodes long (DefaultQueueWatchLimit, 16): the watch of a
// longer queue, when the backend sets it or as soon as it hears the queue grow past the
// limit, is removed again, and the mutex is watched per node until a look finds the queue
// at most half that long. A backend
// keeps the watch while it contends for the mutex and a session timeout after (a Locker
// that acquires again meanwhile finds it set), then removes it (removeWatches).
//
// The copy holds what the server sends, and ZooKeeper (3.8.4 and 3.9.2 on, and
// distributions that carry the fix of CVE-2024-23944) sends no event of a node the session
// may not read. Every contender must be able to read the others' nodes anyway (the
// owner's data is its contender ID), but a node whose ACL says otherwise would be missing
// from the copy, and its successor would own beside it. The backend notices: ZooKeeper
// numbers a sequential node with the count of the nodes created under its parent before
// it, so a node whose number is not the next one the copy expects tells of a creation it
// did not hear, and the mutex is then watched per node, where the read of such a node
// fails (a refusal) instead of going unseen. A node whose read permission is taken away
// after the copy has it stays in the copy after its deletion, and holds its successors
// back until the watch is set again (after a reconnect).
//
// go-zookeeper v1.0.4 has no API for addWatch, removeWatches and create2: the backend
// sends them through the connection's own request method, unexported, linked by name, and
// only when the go-zookeeper linked is v1.0.4, whose method it was written for; with any
// other version, with WithQueueWatchLimit(0), and on a server that answers addWatch with
// UNIMPLEMENTED (older than 3.6), a backend watches per node. Such a server also closes
// the connection after that answer, once per backend, at the first look of its first
// contention, before any of its contentions can own; the session survives, and the
// backend logs a warning.
//
// Watches per node (as the ZooKeeper recipe). A non-owner watches the node just before
// its own, so a leaving contender wakes only its successor. A service's non-owner also
// watches the owner's node, so it knows at once who owns the mutex after a change (JVM
// Simba's non-owners do not), at the price of every such waiter looking again at every
// change of owner. A Locker's waiter, which only waits for its turn, neither watches the
// owner's node nor, with other waiters between them, reads it (as the ZooKeeper recipe):
// with many Lockers waiting, a hand-over wakes one of them, and joining the queue costs a
// create, a list together with a read of the waiter's own node (for its czxid, and a
// watch that tells an owner its node is gone), and a read of its predecessor's. A
// Locker's TryAcquire reads the owner's node, without a watch, to say who owns the mutex.
// A retriever watches the owner's node, or the mutex node while nobody contends.
//
// A look at the mutex then lists the queue and reads the owner's node (a Locker's waiter
// only when its node comes just after it). If the owner has left meanwhile, the next nodes
// before the contender's are read until one exists (no lower node can come after the
// list: sequence numbers only grow). A waiter whose node came just after the owner's in
// its last list owns the mutex as soon as the owner's node is deleted, without listing
// again; the ZooKeeper recipe (and go-zookeeper's zk.Lock) lists again there, a round
// trip more per hand-over.
//
// # Clock: sessions, not clocks
//
// ZooKeeper keeps no TTL per owner: ownership lasts as long as the owner's session and
// its node. No clock of the server or of this host decides who owns; Participant.TTL and
// Transition (simba.WithTTL, simba.WithTransition) play no part here, except that the
// service derives its call timeout from the TTL. The timing that matters is the session
// timeout, negotiated when the session is established: ZooKeeper grants the requested
// timeout clamped to [2, 20] × its tickTime by default. The backend logs the granted value
// and reports it by SessionTimeout.
//
// # Fencing token
//
// The token of a tenure is the czxid of the owner's node: the zxid of the transaction that
// created it, as the create answered it (create2) or a read of the node. Zxids are global
// and only grow, and an owner's node is older than every node behind it in the queue, so
// every later tenure of the mutex has a greater token. The sequence number would not do:
// it restarts at zero when an empty mutex node has been reaped and is created again.
// A hold of a semaphore or read-write lock has another token (see below).
//
// # Session policy
//
// When the connection is lost (go-zookeeper reports StateDisconnected) every contention of
// the backend reports "no owner" at once, as Curator does by default on SUSPENDED: the
// owner stops believing, its tenure context is cancelled and OnReleased follows. When the
// connection comes back within the session timeout the session and its node survive, and
// so do its watches per node (go-zookeeper sets them again); each contention reads the
// mutex again, and the same node owns again with the same token (a new OnAcquired) while
// nobody else took over. The server keeps a queue watch for the connection that set it,
// not for the session, and go-zookeeper does not know it: the backend sets it again and
// lists the queue anew before a contention of the mutex looks. When the session has expired
// its node is gone: the contender joins again with a new node, behind whoever joined
// meanwhile. A contention whose own node disappears (deleted by hand) stops believing at
// once and joins again, unless it served a Locker's acquisition that owned: that tenure
// is over, and the contention waits for its StopContend without a node.
//
// # TTL fields of reported owners
//
// Every owner a contention reports has TTLAt = TransitionAt = the latest proof that the
// backend's session is alive on the ensemble's leader, plus the session timeout, minus 1%
// for clock-rate drift, on the local monotonic clock. Only the leader expires sessions, so
// an owner's node cannot be deleted, and nobody can succeed it, before then either.
//
// What counts as proof: the moment the connection was made (its handshake reaches the
// leader), and heartbeats. A heartbeat is a sync, sent every sixth of the session timeout,
// which the server passes to the leader. A read or a ping is no proof: a follower cut off
// from its leader goes on answering them for up to syncLimit × tickTime (10 s with
// ZooKeeper's defaults), while the leader expires the session after its timeout. When a
// heartbeat is answered, the send time of the latest earlier heartbeat answered at least
// a third of the timeout before it was sent becomes the proof: in between, the server
// answered one of the leader's pings (sent every half tick) naming the session, and the
// leader read that answer before the sync. This holds when the session timeout is at
// least two ticks (ZooKeeper's default minimum; a server whose minSessionTimeout was set
// lower voids it) and the links between the servers deliver within a twelfth of the
// session timeout. So an owner believes at most about half a timeout less than the session
// lives, and a connection cut off, from its server or its server from the leader, ends
// belief within one session timeout. For the
// owner this is a local bound on belief that holds even when no event arrives (a paused
// process, a connection that stalls without breaking); for everyone else it says how
// fresh the view is. Owner.InTTL and HasOwner are therefore true while the session is
// alive and false soon after it is lost. AcquiredAt is when this contention first saw the
// owner's node own the mutex; no server timestamp is used.
//
// # Who closes what
//
// New takes a Connect function rather than a *zk.Conn. go-zookeeper delivers connection
// events on a channel of six that drops events when full, and reliably only to the
// callback given to zk.Connect; a lost StateDisconnected would let an owner believe
// through a session expiry. So the backend has the connection made with its callback,
// through the caller's function: the caller chooses servers, dialer, authentication and
// logging, the library dials nothing itself. The connection, and its session, belong to
// the Backend: Close closes them, and the caller must not. An application that already
// has a connection for other work keeps it and gives simba a second one, as it would give
// Curator its own client; ownership then depends on nothing else that the application
// does with its connection.
//
// The backend runs one goroutine that sends heartbeats, deletes nodes left behind and
// removes queue watches no longer needed, one per contention that makes all of that
// contention's requests, and one per request in flight (below). It hears the connection
// through the callback only: the channel that zk.Connect returns is read by Close, to
// wait for the connection's end. StopContend waits for its contention's goroutine (within
// its context); Close waits for all of them and for the connection's own.
//
// # Requests that get no answer
//
// go-zookeeper has no per-request timeout: a request lost on a connection that stays up
// (its pings get through) is waited for until the connection closes, which may be never.
// So every request runs on a goroutine of its own, and whoever made it waits only until a
// bound: the caller's context for StartContend, StopContend and OthersWaiting; the
// negotiated session timeout for the requests the backend makes on its own (a sixth of it
// for heartbeats). The request cannot be taken back; its answer, if it ever comes, is
// dropped, and the backend cleans up what it may still do: a create is found again by its
// protection prefix, or deleted by it, a delete whose answer did not come in time is
// retried in the background until it is answered or the session ends, and a queue watch
// whose removal got no answer is kept for good (see What Stop leaves behind). Closing
// the connection ends every request still in flight.
//
// A node of this contender in this backend's session that none of its contentions holds
// (a stopped contention left it behind, its delete unanswered) is deleted by the backend
// in the background and, should it head the queue first, by the contender's next
// contention that reads the owner's node (watching per node, any but a Locker's waiter
// with other waiters between it and the owner; with the queue watch, a service's, a
// TryAcquire's), which then looks at the mutex again. It is never taken for the owner,
// and the owner is not reported as unknown while it holds the others back.
//
// Choose a session timeout of a few seconds at least: go-zookeeper waits a second before
// it dials a lone server again, so with shorter sessions every lost connection is an
// expired session, and the owner's successor takes over instead of the owner resuming.
//
// # Refusals and outages
//
// An answer that no retry can cure is a refusal: the errors of New, StartContend,
// OthersWaiting, StopContend and ReleaseOwner then match simba.ErrRefused, and
// StartContend fails at once rather than waiting for its context. A running contention retries a refusal like
// any failure (an ACL may be put back), logging each at Error level. Every other failure
// is an outage, which StartContend waits out within its context and a contention retries.
//
//	Condition                                               ZooKeeper's answer               Kind
//	an ACL forbids this client to create, list, read or     zk.ErrNoAuth                     refusal
//	  delete under /simba, a mutex node or a contender's
//	  node; wrong digest credentials (ZooKeeper takes any:
//	  they name an identity that the ACL does not list)
//	the server requires an authentication scheme the        SESSIONCLOSEDREQUIRESASLAUTH,    refusal
//	  session has not used (enforce.auth.enabled, or          then the connection dropped
//	  sessionRequireClientSASLAuth: go-zookeeper has no
//	  SASL)
//	Connect's AddAuth names a scheme the server refuses     zk.ErrAuthFailed, from New       refusal
//	WithACL's ACL is malformed, or names the auth scheme    zk.ErrInvalidACL                 refusal
//	  while the session has authenticated with none
//	/simba or /simba/<mutex> is another client's            zk.ErrNoChildrenForEphemerals    refusal
//	  ephemeral node
//	a path the server or go-zookeeper refuses (never a      zk.ErrBadArguments,              refusal
//	  name that passed ValidateMutex)                         zk.ErrInvalidPath
//	no server answers: down, a wrong address, cut off       no session: ErrNoSession and     outage
//	  from its quorum (go-zookeeper asks for no read-only     the context's error
//	  session)
//	a server takes the connection and does not answer       no session: ErrNoSession, saying outage
//	  the handshake (one still starting can; Dialer           so
//	  bounds the wait)
//	the connection breaks, or a request gets no answer      zk.ErrConnectionClosed, network  outage
//	  within its bound                                        errors, a context deadline
//	the session expired or moved                            zk.ErrSessionExpired,            outage
//	                                                          zk.ErrSessionMoved
//
// An ephemeral /simba or mutex node goes with its owner's session, but it is another
// application using simba's paths, which someone has to look at: a refusal. With
// SESSIONCLOSEDREQUIRESASLAUTH (go-zookeeper v1.0.4 reports it as "unknown error:
// -124") the server answers one request and drops the connection; go-zookeeper dials
// again and resumes the session, which fares no better. The requests that fail with the
// connection are reported with that refusal too, until a request is answered otherwise.
// go-zookeeper v1.0.4 never reports StateAuthFailed; credentials it sends again after a
// reconnect and the server now refuses are only logged, by go-zookeeper, and look like a
// connection that keeps breaking. It has no chroot either: a server address with one
// ("zk1:2181/app") does not dial, which looks like a server that is down.
//
// # Semaphores and read-write locks
//
// The backend keeps them (backend.Holder) in the nodes of Curator's recipes, so that a
// Curator process given the same path shares the semaphore or the lock with Go ones.
// Holds are watched per node (the queue watch serves mutexes only), each hold is a
// Locker's contention of its own, and a hold's token is the mzxid of a write of its own
// node's data (the contender ID again) made at its admission: zxids only grow, so it is
// above every token of the name handed out before. A node's czxid would not do: a node
// created while it waited may be older than a hold admitted meanwhile. An uncontended
// cycle of a write hold is six requests (a Locker's two), of a permit eleven
// (BenchmarkHoldCycle).
//
// A read-write lock is /simba-rwlock/<name> (RWMutexPath), as InterProcessReadWriteLock:
// each holder or waiter creates an EPHEMERAL_SEQUENTIAL child _c_<uuid>-__READ__<seq> or
// _c_<uuid>-__WRIT__<seq> whose data is the contender ID; nodes are ordered by the digits
// at the end. A reader is admitted when no writer's node comes before its own, a writer
// when no node does; a waiter watches the last node that keeps it out. A downgrade's read
// node (backend.Hold.Beside) is created beside its writer's, while that holds, as an
// EPHEMERAL node named with the writer's sequence number, as Curator does since 5.5.0
// (CURATOR-621): a writer that waits behind the downgrading writer then finds the read
// node before its own once the write hold is given back, and waits for the reader too.
// Curator 5.4.0 and earlier create a new sequential read node there, after every node
// waiting: a writer of any process then gets in beside a Curator 5.4.0 process's
// downgraded reader (not beside a Go one's, which 5.4.0's writers see as simba's do).
//
// A semaphore is /simba-semaphore/<name> (SemaphorePath), as InterProcessSemaphoreV2: a
// holder first owns the guard, an InterProcessMutex of _c_<uuid>-lock-<seq> nodes under
// locks/, then creates its EPHEMERAL_SEQUENTIAL lease node under leases/, is admitted once
// at most Permits lease nodes exist (watching the children of leases/ meanwhile), and
// then gives the guard up. Only the guard's owner can have a lease node beyond the count,
// so waiters are admitted first come, first served, and one whose session ends (its
// guard and lease nodes deleted) holds nobody back. Curator stores no permit count, so a
// Go lease node carries it in its name, _c_<uuid>-permits-<n>-lease-<seq> (Curator
// counts the children of leases/ and reads no name): a Go participant that finds a lease
// of another count, when it owns the guard, is refused (simba.ErrRefused). A Curator
// lease tells no count: a Curator process and a Go one that give different counts are
// not told, and each admits by its own.
//
// # What Stop leaves behind
//
// StopContend deletes the contender's node, within its context. Without a session, or
// when the delete gets no answer in time, it leaves the node to the backend, which deletes
// it in the background (once the session is back, without one), or the server deletes it
// when the session expires. A create whose reply was lost is recognised by its protection
// prefix, so neither a retry nor a stop leaves a second node; with the queue watch, a
// create given up for lost that reaches the server later shows in the queue, and the
// backend deletes its node. A queue watch is removed a session timeout after the last
// contention of its mutex in the backend stopped; when that removal gets no answer in
// time, the mutex is watched per node from then on (the removal might still reach the
// server after a new watch and remove it). A watch per node of a stopped contention stays
// until its node changes or the session ends. The backend sets each watch at most once
// per session and node, whatever the number of contentions, so they do not pile up, and
// watches contenders' nodes through reads, which set no watch on a node that is gone
// already (an exists would leave one for its creation, which never comes).
//
// # Names
//
// Mutex names must be one node name (no '/', not "." or "..", none of the characters
// ZooKeeper refuses in paths) of at most MaxMutexLength bytes, and contender IDs at most
// MaxContenderIDLength bytes: a request longer than the server's jute.maxbuffer makes it
// drop the connection, and with it the session that every mutex of the backend shares.
package zookeeper
