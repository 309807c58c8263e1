// Package redis is simba's Redis backend, on a go-redis v9 client: a standalone,
// Sentinel (failover) or Cluster client, anything that implements
// goredis.UniversalClient. The backend never dials on its own and never closes the client.
//
//	// goredis is github.com/redis/go-redis/v9
//	client := goredis.NewClient(&goredis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	backend, err := redis.New(client)
//	...
//	defer backend.Close()
//	locker, err := simba.NewLocker(backend, "nightly-export")
//
// A release hands the mutex straight to the contender that has waited longest, so a
// hand-over costs about one round trip instead of a polling delay and waiters are served
// first come, first served; the service renews ownership, signals its loss through
// contexts and callbacks, and every tenure carries a fencing token.
//
// # Keys and channels
//
// The format is JVM Simba 3.x's, so that Go and JVM contenders of one mutex on one Redis
// see each other as contenders; this backend adds keys and channels beside it, which JVM
// Simba neither reads nor hears. Every name of a mutex contains "{mutex}", the cluster
// hash tag, so that all of them live in one slot (which is why mutex names may not
// contain braces). JVM Simba's:
//
//   - simba:{mutex}, a string: the owner's contender ID, expiring (PX) a lease (ttl +
//     transition) after the last acquisition or renewal, that is at transitionAt; a
//     granted owner's, a lease after the registration the grant answered.
//   - simba:{mutex}:contender, a sorted set: the waiting contenders, scored by the
//     server's time in seconds when each first found the mutex owned; the oldest waiter
//     (the lowest score) is the one a release serves, in both Simbas. JVM Simba writes
//     whole seconds, s for a waiter that came at any time within second s; this backend
//     writes s - 1 + the fraction, which puts a Go waiter after every waiter of earlier
//     seconds and before the JVM waiters that come later within second s, and moves the
//     JVM waiters already in the set with score s, which came earlier within that second,
//     to just before it: first come, first served, whichever Simba a waiter runs. A Go
//     contender leaves the set when it acquires, is granted the mutex or releases (a
//     release never serves the releaser); the set expires with the grant hash.
//   - channel simba:{mutex}: "acquired@@<id>" when <id> takes the mutex or is granted it.
//   - channel simba:{mutex}:<id>, one per contender: "released@@<former owner>" when a
//     release took <id> off the waiting set and left the mutex free for it (JVM Simba's
//     only message to a waiter), or, from this backend, "granted@@<nonce>@@<token>@@<former
//     owner>" when the release made <id> the owner; a hand-off (see Hand-offs) sends
//     either to the waiter it makes the owner.
//
// This backend's:
//
//   - simba:{mutex}:token, a string: "<token>@@<expires>@@<owner>[@@<value>]", the
//     fencing token of the latest tenure a Go contender began, the server time in ms at
//     which the owner key expires while that tenure holds the mutex (a renewal moves it
//     along), the owner's ID, and, for a tenure that has one, its owner value
//     (simba.WithOwnerValue): everything after the "@@" that ends the ID (which contains
//     none and does not end with "@"), "@@" included. Written at the tenure's start, the
//     value is only ever read with the token beside it, and only while the key names the
//     owner: a lookup never shows one tenure's owner with another's value. The key is
//     written with the owner key and expires with it; it lingers for up to a lease after
//     a release. Versions before this one kept the token in a hash, simba:{mutex}:fence,
//     which this one neither reads nor writes (see Mixing versions).
//   - simba:{mutex}:grant, a hash: for each Go waiter, the registration its latest attempt
//     made, "<nonce>@@<at>@@<lease>@@<ttl>@@<until>@@<heard>[@@<value>]": the attempt's
//     nonce (empty for a waiter that takes no grants, a Quorum's), the server time of the
//     registration in ms, the waiter's lease and ttl in ms, the server time in ms until
//     which it counts as waiting without registering again (the owner key's remaining
//     time, when it will try again, plus its jitter and a lease), 1 if it listened on its
//     channel when it registered, and the waiter's owner value if it has one, which a
//     release that grants it the mutex writes to the token key. The waiting set and this
//     hash expire together, twice that long after the latest registration that needed
//     it. A release that takes a waiter off the waiting set deletes its registration.
//   - nonces, "<8 characters>-<n>": a prefix unique per contention (a random number drawn
//     per Backend, plus the number of the contention on it) and the number of the
//     attempt. They are stored only in registrations and granted messages; the contender
//     keeps those of its latest two attempts in memory, with their send times.
//   - channel simba:{mutex}:@@released: "released@@<former owner>" when a release deleted
//     the owner key and woke nobody (only while a retriever watches the mutex, or when
//     the release passed a waiter by), "released@@<former owner>@@<waiter>" when it woke
//     that waiter. No contender's channel has this name (IDs never contain "@@"), and JVM
//     Simba does not subscribe it: on their own channels JVM peers get only JVM Simba's
//     messages, in JVM Simba's cases.
//   - simba:{mutex}:stopped, a string: the nonce prefixes of up to 8 contentions that
//     stopped while one of their acquire calls was unanswered, separated by spaces, the
//     latest first (the stop script writes it, for 5 minutes after the latest). The
//     acquire script reads it with the owner and token keys, and a call of a contention
//     it names takes nothing: given up by its caller, held on the network path, and run
//     after the contention's release, it would take a free mutex for a contender that
//     has stopped. Such a call may also have run between the release and the stop: the
//     stop script answers the token of a tenure the contender ID has, and one newer than
//     every token the contention heard of is released then (the release script, for that
//     tenure only).
//   - simba:{mutex}:retrievers, a string "1": the mutex is watched. Each lookup of a
//     retriever whose subscription of simba:{mutex}:@@released the server has confirmed
//     (the watch script; a one-off read only reads) writes it to expire a minute after
//     the owner key it saw, after the retriever's next lookup; the release script reads
//     it with the owner and token keys, and a release that finds nobody waiting announces
//     itself on simba:{mutex}:@@released only while it is there.
//   - simba:{mutex}:slot, a string: "<at>@@<token>", the last slot a Scheduler started
//     on the mutex (backend.SlotRecorder): its instant in Unix nanoseconds, a signed
//     decimal, and the fencing token of the tenure that started it. ClaimSlot writes it
//     (the claim_slot script), LastSlot reads it (GET). Nothing removes it: it has no
//     expiry and outlives the mutex's other keys, a few bytes per mutex that a Scheduler
//     ran on. Deleting it by hand forgets the slots, and a Scheduler may then run the
//     last one again; so may a restart without persistence, or a failover to a replica
//     that had not received the last claim (replication is asynchronous: see Fencing
//     tokens). A Quorum keeps one on each instance and claims a slot on each, by majority
//     (see Quorum).
//   - simba:{simba}:@@check, a key and a channel of no mutex: the start-up check (see
//     below) deletes the key, which never exists, and publishes to the channel, which
//     nobody hears.
//
// # Scripts
//
// Every store call of a contention but LastSlot (a GET) is one Lua script, so every change
// is atomic. On Redis 7 and later the scripts are the functions of one library (FCALL),
// which the backend loads (FUNCTION LOAD) where a call finds it missing: after a restart
// without persistence, FUNCTION FLUSH, on a Cluster's primary at its first call; its name,
// simba_<hash of its code>, keeps two versions of simba on one server apart (an old
// version's library stays until FUNCTION DELETE removes it). The
// declarations of prelude.lua run once, when it is loaded. Where the server cannot run it
// (Redis before 7: "ERR unknown command"; an ACL user without FCALL or FUNCTION LOAD:
// NOPERM; a load refused otherwise), the backend says so once, at Info level, and runs
// each script by EVALSHA from then on, prefixed with the declarations of prelude.lua it
// uses. Each script of a mutex gets KEYS[1] = "{mutex}", from which it makes every name
// above. On a Redis Cluster it also gets KEYS[2..7] = simba:{mutex},
// simba:{mutex}:contender, simba:{mutex}:token, simba:{mutex}:grant,
// simba:{mutex}:stopped and simba:{mutex}:retrievers, which it never reads: they are
// named so that while the Cluster moves the slot a call runs only where all of them are,
// and is otherwise told to try again (TRYAGAIN); a standalone or Sentinel server, which
// moves no slots, is spared them (a contention keeps a seventh of the memory for its
// keys, and a call is shorter). claim_slot gets KEYS[2] = simba:{mutex}:slot alone;
// renew_many gets the keys of each mutex it renews, one mutex after the other. The
// arguments:
//
//	Script      Run by                    ARGV[1], ARGV[2], ...                               Answer
//	acquire     Acquire (not the owner)   id, lease, listed, nonce, ttl, heard, fresh, value  owner
//	guard       Acquire (the owner)       id, lease                                           owner
//	renew_many  Acquire (owners, batched) keys per mutex, then id, lease of each mutex        owner of each
//	release     Release, ReleaseOwner,    id, listed, exact[, raiseTo[, tenure]]              1 or 0
//	            StopContend
//	watch       Lookup (a retriever)      for: how long its mark outlasts the owner key, ms   owner
//	lookup      Lookup, the server        none                                                owner
//	            refusing watch's write
//	stop        StopContend, after an     nonce prefix, px, id                                the ID's
//	            unanswered acquire                                                            token or ""
//	waiting     OthersWaiting             id, exact                                           1 or 0
//	raise       a Quorum's first renewal  id, token                                           1 or 0
//	claim_slot  ClaimSlot                 at, token                                           1 or 0
//	waiters     Waiters                   none                                                waiters
//	hand_off    HandOff                   id, tenure, to, exact, nonce, lease, ttl, heard,    1, 0 or -1
//	                                      value
//
//	id       the contender ID
//	lease    ttl + transition, in ms: the owner key's PX
//	ttl      the contender's ttl, in ms
//	listed   "1": the contender may be in the waiting set (and registered), so an owner
//	         takes itself off; "0": it is not. A new contention starts with "1", in case
//	         an earlier lifecycle of the ID left an entry (a process that ended without a
//	         release and started again), unless the ID's last contention on the same
//	         Backend ended out of the waiting set (the Backend remembers up to 1,024 such
//	         IDs)
//	fresh    "1" for the calls of a contention until one is answered: finding its own ID
//	         owning, it begins a new tenure; finding the mutex owned, it goes to the back
//	         of the queue (an entry an earlier lifecycle left keeps no place)
//	nonce    the attempt's nonce, "" for a contender that takes no grants
//	heard    "1" if the contender's own channel was subscribed when it sent the call
//	exact    "1" for a *goredis.Client (standalone or Sentinel), whose server counts
//	         every subscriber; "0" for any other client, which may reach Redis Cluster
//	         nodes, each of which counts only its own
//	raiseTo  a Quorum tenure's token to raise the contender's token key to first, or ""
//	tenure   ReleaseOwner's: the token of the tenure to free ("0": one that shows none);
//	         HandOff's: the caller's tenure's
//	to       the waiter a hand-off makes the owner
//	token    a Quorum tenure's token, for the token key
//	value    the contender's owner value, "" for none; written only when a tenure begins
//	owner    {"<owner>@@<remaining ms>" or "@@" for no owner, the owner's token, its
//	         value}: JVM Simba's reply, the fencing token ("0" when no Go tenure of that
//	         owner shows one) and the tenure's owner value ("" when it has none or the
//	         token is "0")
//	at       a slot's instant in Unix nanoseconds
//	1 or 0   release: the caller owned the mutex and released it; waiting: someone else
//	         waits; raise: the token key is the caller's; claim_slot: the slot was
//	         recorded (it is later than the recorded slot and its token not less)
//	waiters  {"<waiter>", "<value>", ...}: the waiters a hand-off can serve, first come
//	         first, each with its owner value
//	1, 0 or -1  hand_off: the mutex was handed to the waiter; the caller's tenure does not
//	         hold it; the waiter does not wait
//
// Acquire runs guard once an answer named the contender the owner, so that an owner
// whose key lapsed learns that its tenure ended instead of silently starting another.
// An acquire that finds the caller already the owner renews (its earlier answer was
// lost, or it was granted the mutex and has not heard), so retries are harmless; JVM
// contenders never see the difference.
//
// # Hand-over, end to end
//
// In the timelines below, m is the mutex; A and B are Go contenders (services or Lockers)
// on Backends of their own, each with one subscription connection whose hub routes
// every message to the contentions listening on its channel (see Subscriptions); J is a
// JVM Simba contender, subscribed to simba:{m} and simba:{m}:J from its start.
//
// An uncontended acquisition and release:
//
//  1. A's service calls Acquire. Its first attempt runs acquire with fresh "1", a new
//     nonce (A notes its number and send time) and heard "0". The script reads the owner
//     key and the token key (MGET) and finds no owner, takes the mutex (SET NX PX, as
//     JVM Simba does), makes a token (TIME, and the previous token from the token key),
//     writes the token key (SET PX) and publishes "acquired@@A" on simba:{m}. With
//     listed "1" (A's first contention on its Backend) it also drops any entry an
//     earlier lifecycle of A left (ZREM, HDEL); a Locker that acquires again on the same
//     Backend sends listed "0" and skips that. It answers "A@@<lease>" and the token: A's
//     service believes until its send time + ttl, less simba's drift margin. A
//     subscribes nothing. J hears "acquired@@A" and takes A for the owner.
//  2. A renews with guard (MGET; SET XX PX; TIME and the token key written again, with
//     the new expiry). At its first renewal it subscribes its channels, so as to hear at
//     once if its key is lost and another takes the mutex.
//  3. A's service calls Release. The release script reads the owner and the retrievers
//     key (MGET) and finds A, finds the waiting set empty (ZRANGE) and deletes simba:{m};
//     while a retriever watches, it publishes "released@@A" on simba:{m}:@@released. J
//     hears nothing and finds the mutex free at its next attempt (SET NX PX).
//
// A hand-over: A owns the mutex, B waits for it, A releases.
//
//  1. B's attempt runs acquire, which finds A the owner (MGET, which also reads A's
//     token and when A's key expires). It reads TIME, adds B to the waiting set (ZADD CH
//     while fresh, ZADD NX after that, so that B keeps its place), looks for JVM waiters
//     of the same second (ZRANGEBYSCORE, when B was added), registers B in the grant
//     hash (HSET) with the attempt's nonce n1 and heard "0" (B listens on nothing yet),
//     makes sure the hash and the waiting set outlive the registration (PTTL, and
//     PEXPIRE when they would not), and answers "A@@<remaining ms>" with A's token: B's
//     service takes A for the owner. J hears nothing.
//  2. B subscribes, on its hub: simba:{m}:B and simba:{m}:@@released, and simba:{m}
//     too unless B is a Locker's waiter, which needs to hear of its turn, not of every
//     owner. When the server has confirmed them all, the hub wakes B, which attempts
//     again at once: acquire keeps B's place and replaces its registration with one for
//     the new nonce n2, heard "1". B now waits for a message; it attempts on its contend
//     period (after the transition of the owner it saw, with jitter) only in case none
//     comes.
//  3. A's service calls Release. The release script finds A the owner (MGET), takes the
//     oldest waiter, B, off the waiting set (ZRANGE, ZREM), reads TIME, and takes B's
//     registration out of the grant hash (HGET, HDEL). The registration is live (until
//     is ahead), has a nonce, and was made less than nine tenths of B's ttl ago, so A
//     grants B the mutex: a new token, "granted@@n2@@<token>@@A" on simba:{m}:B (PUBLISH
//     counts B's subscription), simba:{m} set to B with PX a lease less the
//     registration's age, the token key naming B with the same expiry, and
//     "acquired@@B" on simba:{m}. The script answers 1.
//  4. B's hub receives the granted message and hands it to B's contention, which finds
//     n2 among the nonces of its latest two attempts and calls Participant.Grant with
//     the tenure (owner B, B's ttl and lease, the token) and n2's send time. B's service
//     applies it as the answer to that attempt: B owns the mutex, its local TTL end is
//     that send time + ttl (less the drift margin), which came before the registration
//     and so before the key expires, as after any answer, and its next call is a
//     renewal (guard). An answer to an earlier attempt that arrives afterwards and names
//     A changes nothing. A nonce that is not among the latest two (or a garbled message)
//     makes B attempt at once instead, and so does, later, a granted message that was
//     lost (B's subscription connection was down): either way acquire finds B the owner,
//     while the grant lasts, and renews, and B believes from that attempt's send time.
//  5. Everyone on simba:{m} hears "acquired@@B": a waiting service takes B for the owner
//     without a store call (instants estimated from its own ttl and transition, as JVM
//     Simba does, and no token, until its next attempt answers), and a retriever looks
//     up. J takes B for the owner, and keeps its place in the waiting set.
//
// When the waiter taken off is J, or a Go waiter without a nonce (a Quorum's) or whose
// registration is nine tenths of its ttl old or more, the release does JVM Simba's
// hand-over instead: "released@@A" on simba:{m}:J, DEL simba:{m}, and "released@@A@@J"
// on simba:{m}:@@released. J attempts at once and takes the mutex (SET NX PX, then
// "acquired@@J"). The Go waiters hear that another waiter was woken: a waiting service
// reports no owner until it hears of J. When J releases, JVM Simba's release deletes
// the key, takes the oldest waiter (B, say) off the waiting set and publishes
// "released@@J" on simba:{m}:B; B's hub wakes B, which attempts at once, takes the
// mutex and drops its own registration.
//
// A waiter that is gone: B registered as in step 2 and then ended without a release (its
// process crashed, or its Backend was closed), so its entry and registration stay and
// nobody listens on simba:{m}:B. A's release takes B off as in step 3 but passes it by,
// drops its entry and registration and serves the next waiter instead, when
//
//   - B's registration has expired (until is past: B has not attempted long after it
//     would have), without a message; or
//   - PUBLISH on simba:{m}:B counts no subscriber although B would listen: counts are
//     exact and B registered listening, or more than a second ago. A grant already made
//     to B is then void: nobody heard its token, and neither simba:{m} nor the token key
//     is written. J, listening from its start, is passed by the same way if its process
//     has ended.
//
// With nobody left to serve, the release deletes the key and publishes "released@@A" on
// simba:{m}:@@released. A release looks at 16 waiters at most; gone ones further back
// are dropped by later releases, or expire with the waiting set. OthersWaiting applies
// the same tests (with PUBSUB NUMSUB) to the waiters ahead and drops the gone ones, so
// that they do not keep it true. Two cases escape the tests, and a grant to a waiter
// that is gone then stands, keeping the mutex from everyone until it lapses, a lease
// after the waiter's last registration: a client whose counts are not exact (a
// ClusterClient), where only expiry tells; and a waiter that ended within a second of
// its first registration, which it made before its subscription was confirmed. A live
// waiter taken for gone (its subscription connection was down at that moment) loses its
// place and queues again at its next attempt, which its reconnection brings forward.
// J's release, which tests nothing, takes a gone B off and publishes to nobody: the
// waiters behind find the mutex free on their contend period.
//
// Without grants, a woken waiter would race the releaser's next attempt, and a process
// that releases and asks again at once usually wins: with 8 Lockers taking turns, the
// least served got 0.6 of the sections of the most served in a test, 0 in a 10-second
// benchmark. With grants, every waiter gets its turn.
//
// # Hand-offs
//
// A contention is a backend.HandOffer: the owner may give the mutex to a waiter it names
// (simba's Service.HandOff, WithPreference) instead of the one that waited longest.
//
// Waiters runs the waiters script, which changes nothing: the waiting set, first come
// first (TIME, ZRANGE), with each waiter's owner value from its registration (an HGET
// per waiter). It leaves out the waiters a hand-off cannot serve: those whose
// registration has lapsed (gone), JVM Simba's (which register nothing, and would not
// learn that they own the mutex), and those of versions before this one whose
// registration it cannot read (see Mixing versions). They still wait, and releases serve
// them in their turn.
//
// HandOff runs the hand_off script, with the token of the caller's tenure:
//
//  1. It checks that the owner key names the caller and the token key that tenure's token
//     (otherwise ErrNotOwner: a later tenure of the same ID does not count), and that to
//     is another contender, in the waiting set with a registration Waiters would list
//     (otherwise ErrNotWaiting).
//  2. It makes to the owner with a new token and to's owner value, as a release grants the
//     mutex (see Hand-over, end to end): a registration younger than nine tenths of its
//     ttl gets "granted@@<nonce>@@<token>@@<caller>" on to's channel and an owner key that
//     expires a lease after the registration; an older one a tenure of a lease from now
//     and "released@@<caller>", which makes to attempt at once: its acquire finds it the
//     owner and renews, and answers the token. Either way "acquired@@<to>" goes out on
//     simba:{mutex}. When nobody heard the message although to would have (see
//     silenceMeansGone in prelude.lua: never on a Cluster), to is gone: ErrNotWaiting,
//     and nothing is written.
//  3. It takes to off the waiting set and deletes its registration, and puts the caller at
//     the back of the waiting set (scored as an attempt would be), registered for a grant
//     with a nonce of its own, so that the release that serves it later grants it the
//     mutex at once. A caller that never renewed subscribes its channels then, as a
//     waiter's first attempt does.
//
// The check and the change are one script: a failed check writes nothing. A hand-off is
// one script of 17 commands (TestHandOffCommands), Waiters one of 3 and an HGET per
// waiter. If to dies after the hand-off, its tenure lapses as any crashed owner's: its key
// expires a lease after its registration (or after the hand-off), and the other waiters
// take the mutex then. A Quorum hands nothing off (see Quorum).
//
// # Subscriptions
//
// Each Backend has one subscription connection, opened the first time one of its
// contentions needs it and kept until Close; it carries the channels of all its
// contentions. A contender subscribes when an attempt finds the mutex owned by someone
// else (a Locker's leaves simba:{mutex} out until it renews as the owner), or at its
// first renewal as owner: an uncontended critical section that ends before its first
// renewal never subscribes. A retriever subscribes simba:{mutex} and
// simba:{mutex}:@@released when it starts, and once the server has confirmed them each
// of its lookups marks the mutex watched (see Keys and channels), so that a release with
// nobody waiting tells it too.
// A channel stays subscribed for a second after its last listener left: a Locker that
// asks again at once (or another contention of the same contender) finds its channels
// subscribed, listens from before its first attempt and registers heard "1" at once, so
// that waiting costs no SUBSCRIBE and UNSUBSCRIBE and no second attempt. Leaving
// simba:{mutex} out while a Locker waits means that a hand-over wakes the waiter it
// serves, not every waiter of the mutex: with 8 Lockers on one mutex, a third more
// sections per second.
//
// What a message makes a contention do, besides the grant above: a release on its own
// channel, or another contender's on simba:{mutex}:@@released that woke nobody or woke
// this contender, makes a waiter contend at once (its own release's, which a yielding
// owner's waiting contention hears, leaves the mutex to the waiter it woke); a release
// that woke another waiter makes a waiting service report no owner. An owner that
// believes it still owns checks at once at an acquisition by another and at any release
// on simba:{mutex}:@@released (its key lapsed or was lost, and another contender took the
// mutex). A retriever looks up at every message. Every confirmation that completes a
// contention's channels, the first and each one after go-redis reconnected (or the
// backend replaced a connection that stopped answering its pings, see WithPingInterval),
// makes a waiting contention try once more and a retriever look up, so that nothing
// published before it is missed for long; an owner learns of anything it missed at its
// next renewal.
//
// Correctness never depends on messages: every contender still contends on its contend
// period, so a lost message (the connection was down, the waiter was not subscribed yet)
// only slows a hand-over down to that period. In a Redis Cluster, PUBLISH reaches every
// node, so the connection may be to any of them.
//
// # Cost
//
// Every store call is one script (FCALL, or EVALSHA); what the server processes is counted below in
// commands, the scripts' inner calls included, as INFO commandstats counts them
// (TestUncontendedCycleCommands and TestContendedSectionCommands hold them to these
// counts):
//
//   - An uncontended Locker cycle (acquire, release) takes two scripts and 10 commands:
//     the acquisition reads the owner, token and stopped keys (MGET), takes the mutex
//     (SET NX PX), reads the clock (TIME), writes the token key (SET PX) and announces
//     itself (PUBLISH); the release reads the owner (MGET, with the retrievers key),
//     finds nobody waiting (ZRANGE) and deletes the key (DEL). While a retriever
//     watches the mutex it also announces the release (PUBLISH). A contention that
//     stops after an unanswered acquire call adds the stop script (GET, SET, MGET). The
//     first contention of a contender ID on a Backend adds two (ZREM, HDEL: an entry an
//     earlier lifecycle of the ID may have left), and a call that finds no token key
//     (no Go tenure began within a lease) one: a GET, which refuses another program's
//     data under that name (WRONGTYPE), as MGET reads it as nothing.
//   - A renewal is the guard script's 5 commands (MGET, SET XX PX, TIME, SET PX); a
//     retriever looks up (MGET, PTTL, and SET for its mark) at every message. simba
//     renews every mutex held with the same ttl and lead at the same instants, and on a
//     standalone or Sentinel client the renewals that reach the backend together (none
//     for 2 ms, the first at most 50 ms old) go in one renew_many script, up to 1,000
//     in one: the guard script for each mutex, whose reply, or error, is that mutex's
//     alone (TestHeldMutexesRenewInBatches: 200 held mutexes, about 2 scripts per
//     renewal period). On a Cluster, where the keys of one script must share a hash
//     slot, each renewal is a guard script of its own.
//   - A Scheduler's slot claim is one claim_slot script of 3 commands (GET, SET; 2 when
//     it records nothing), LastSlot a GET (TestClaimSlotCommands); a hand-off: see
//     Hand-offs.
//   - Under contention, with grants, each critical section costs one attempt that finds
//     the mutex owned and registers (7 commands: MGET, TIME, ZADD, ZRANGEBYSCORE, HSET,
//     PTTL) and one release that grants (11: MGET, ZRANGE, ZREM, TIME, HGET, HDEL,
//     PUBLISH, SET, SET, PUBLISH): 18 commands and one lost attempt per section (8
//     Lockers on one mutex; BenchmarkEightContenders reports it). No SUBSCRIBE or
//     UNSUBSCRIBE while a contender waits again within a second.
//
// Of a contended section's 18, JVM Simba's format takes 10: the two scripts, the owner
// key read by each and written by the grant, the waiting set's ZADD, ZRANGE and ZREM, the
// clock for its scores and the acquisition message. The guarantees take the other 8: the
// token (the clock in the release and the token key's write; its read shares the owner's
// MGET), the registration that matches a grant to the attempt it answers and lets a
// release pass dead waiters by (HSET, HGET, HDEL, and PTTL for the expiry of the grant
// hash and the waiting set), the grant message, and first come, first served with JVM
// waiters of the same second (ZRANGEBYSCORE). Of an uncontended cycle's 10, JVM Simba's
// format takes 7 (the two scripts, SET NX PX and the acquisition message; the release's
// owner read, ZRANGE and DEL) and the token 3: the acquisition's MGET, which reads the
// previous token (and the stopped key) before it takes the mutex, TIME and SET PX.
//
// On the test machine (two cores shared with other work) a hand-over's scripts cost
// Redis 1.8 to 1.9 times the CPU of the bench's reference lock's (INFO cpu, the two
// alternated): with a Redis shared by a busy host, the server's time, not the network,
// bounds the sections per second.
//
// # Clock
//
// The only clock in the stored data is the Redis server's: owner keys expire by it, and
// the waiting set is ordered by it. Replies report the time left until the owner key
// expires (PTTL, or, for a Go owner, the expiry its token key records less the server's
// TIME); simba adds that duration to the local monotonic time at which it sent the
// request and never turns a Redis time into a local instant. Redis keeps a single
// expiry, at transitionAt; the TTL end is derived by subtracting the contender's own
// transition, which is exact for its own tenures and for other owners configured alike.
// How long an owner has held the mutex is not stored (Record.Held is zero).
//
// # Fencing tokens
//
// A tenure's token is the Redis server's clock, in microseconds since the Unix epoch,
// read by the script that began the tenure, or the previous tenure's token + 1 if that is
// not larger. Renewals keep it. A new contention whose first call finds its own contender
// ID owning the mutex (a key an earlier lifecycle left, or one a failover brought back)
// begins a new tenure with a new token rather than resuming the old one. It is stored in
// the token key and read back with every answer. While the token key exists, tokens
// increase whatever the clock does; when it is gone (it expired, or Redis ran without
// persistence and restarted empty) the clock alone keeps them increasing, because it has
// moved on since the last tenure began, and so it does when the key holds an older token
// than the last one issued (a replica promoted before it received the latest). The token
// therefore relies on the server's clock not stepping back, at a moment when the token
// key is gone or behind, to before the start of the last tenure: for example after a
// failover to a replica whose clock is behind and which had not yet received the token
// key. An answer naming an owner whose tenure no Go contender began (a JVM contender)
// carries token 0.
//
// A contention that sees a token smaller than one it saw before logs it at Error level
// and counts it (Backend.TokenRegressions): a regression is detected, not silent. The
// protected resource must still compare tokens itself; see the simba package
// documentation for what fencing does.
//
// With a ClusterClient, a call that no server answered (a refused or broken connection, a
// deadline) or that was told CLUSTERDOWN makes the backend ask the client to reload its
// slot map: go-redis would otherwise go on dialing a primary that died, after its replica
// took its slots over, until its periodic reload (60 s by default; go-redis issue #3979).
//
// Redis replication is asynchronous: after a failover the new master may lack the last
// acquisition, and a second contender may then acquire while the first still believes it
// owns the mutex, until its next renewal. That is inherent to a single Redis deployment;
// fencing tokens are what protects the resource then. With Sentinel (go-redis's
// FailoverClient) the fault suite measures it (internal/chaos, store redis-sentinel,
// down-after 500 ms, failovers of about 2 s): a hand-over the replica never received,
// then the primary killed, with a 5 s TTL, gave the promoted replica the former owner's
// key back; that contender contended again and began a new tenure while the lost
// successor still believed, for about 1.2 s, and the fenced resource rejected the
// successor's writes after the new token (0 stale writes accepted). The new tenure's
// token was larger because the promoted replica's clock had moved on since the lost
// tenure began; on hosts whose clocks differ by more than the time between those two
// tenures, it can be smaller, and only the contention that sees it smaller than one it
// saw before detects it (TokenRegressions).
//
// # Mixing versions
//
// Versions before this one kept the fencing token in a hash, simba:{mutex}:fence; this one
// keeps it in the string simba:{mutex}:token (one MGET reads it with the owner key), and
// neither version reads the other's. Processes of both versions on one mutex, as in a
// rolling upgrade, still exclude each other, queue in one waiting set and grant each
// other the mutex (registrations kept their format), and each shows the other's owners
// with token 0, as it shows a JVM contender. A tenure's token exceeds the one before when
// that ran the other version by the server's clock alone, as after a restart that lost
// the key. One case shows a wrong token: a contender ID whose tenure under one version is
// followed, within a lease, by a tenure of the same ID under the other is shown, by
// processes of the first version, with the earlier tenure's token (and, by this version,
// its expiry); the owner it names is right.
//
// Owner values came later: a tenure without one writes the token key as before; one with
// a value adds a fourth field. Versions before values read it as part of the owner's ID,
// so they show that owner with token 0 (as a JVM one) and read its key's time left with
// PTTL, while its token still counts for the next tenure's; and they cannot read the
// registration of a waiter with a value, so instead of granting it the mutex they wake it
// (JVM Simba's hand-over) and it takes the mutex itself. A Quorum keeps no values (it does
// not implement backend.ValueKeeper): simba refuses WithOwnerValue for one.
//
// The stopped key came later still: earlier versions neither read nor write it, so their
// acquire calls that arrive after their contention stopped can still take a free mutex.
// The retrievers key came last: earlier versions announce every release, and their
// retrievers do not mark the mutex, so a release by this version with nobody waiting
// reaches them only at their next lookup.
//
// # Semaphores and read-write locks
//
// A Backend keeps simba.Semaphore and simba.RWMutex names too (backend.Holder); a Quorum
// keeps mutexes only (Holds is not implemented). Their keys are apart from the mutex
// format, which JVM Simba never reads: simba:sem:{name}:* for a semaphore and
// simba:rw:{name}:* for a read-write lock, never simba:{..., which begins every key of a
// mutex, so that a mutex, a semaphore and a read-write lock of one name are different
// things. The hash tag {name} keeps all the keys of a name in one cluster slot. Each
// script gets them all as KEYS (see holds_prelude.lua); with p = simba:sem:{name} or
// simba:rw:{name}:
//
//   - p:holders, a sorted set: each holder's ID, scored by the server time in ms at which
//     its transition window ends (a lease after its latest admission or renewal).
//   - p:holds, a hash: for each holder "<token>@@<ms at its ttl end>@@<ms of its
//     admission>"; under "@@writer", a read-write lock's write holder; and under
//     "<waiter>@@grant", each waiter's registration for a grant, "<nonce>@@<at>@@<lease>@@<ttl>":
//     its latest attempt's nonce, the server time of that attempt in ms, and its lease
//     and ttl in ms.
//   - p:queue, a sorted set: the waiters, scored by their arrival (server time in µs);
//     p:writers, a read-write lock's waiting writers with the same scores.
//   - p:alive, a sorted set: each waiter's deadline (ms): the soonest hold's transition
//     end, plus a second of jitter and the waiter's lease, after its latest attempt. A
//     waiter silent that long (its process died, or it is cut off) is dropped, so a dead
//     waiter keeps those behind it out for that long at most, not forever.
//   - p:permits, a string: a semaphore's permit count. An attempt with another count is
//     refused (simba.ErrRefused) while anyone holds or waits; the count goes with them.
//   - p:fence, a string: the latest token of the name, expiring no sooner than a lease
//     after the latest admission or renewal.
//   - p:stopped, a string: as simba:{mutex}:stopped for a mutex (the holds_stop script
//     writes it); the acquire script of holds reads it first, and a call of a contention
//     it names admits, renews and queues nobody. A hold such a call began before the
//     stop is released by it, as a mutex's tenure is (holds_release_holder).
//   - channel p: "admitted@@<id>@@<waiter>@@<nonce>@@<token>@@<waiter>@@<nonce>@@<token>..."
//     when <id> left (released, or was dropped by a script of <id>) and the named waiters,
//     which now fit, were granted their holds (below); "released@@<id>@@<waiter>..." names
//     the waiters that now fit but registered for no grant, or too long ago; and
//     "released@@<id>" wakes every waiter when more than 64 fit.
//
// Every script reads TIME first and drops the holds whose transition ended and the
// waiters past their deadline; the keys of a name expire with its last hold or waiter
// and are deleted when none is left, but for the fence and the stopped record.
// Admission is first come, first served: a waiter is admitted when it and every waiter
// ahead of it fit, that is, for a semaphore, the holders and the waiters up to it
// number at most the permits; for a read-write lock, a reader when no writer holds and
// no writer waits ahead of it, a writer when nobody holds and it is first. A
// downgrade's read hold (backend.Hold.Beside) is admitted at once while its write
// holder holds alone. An admitted or renewed holder is answered with its own record; a
// waiter with the hold whose transition ends first, or none. A hold's token is the
// server clock in µs, or the fence + 1 if that is not larger, as for a mutex (see
// Fencing tokens); the first call of a contention whose ID still holds (its release was
// lost) begins a new hold with a new token, and a waiter's first call goes to the back
// of the queue.
//
// A waiter that has to wait subscribes the name's channel on the Backend's hub (see
// Subscriptions), and registers for a grant with each attempt; holders subscribe nothing.
// A script that lets waiters in (a release, or any script that dropped a lapsed hold or
// a waiter) admits, in the same script, the waiters that now fit, first come, first
// served, up to 64: each gets a new token and a hold whose ttl and transition end a ttl
// and a lease after its registration, and one "admitted" message tells them. A waiter
// that finds itself in it with the nonce of one of its latest two attempts owns at once
// (backend.Participant.Grant, from that attempt's send time, as for a mutex: see
// Hand-over, end to end), without another script; one whose registration is nine tenths
// of its ttl old or more is woken instead and attempts, and so is every waiter once its
// subscription is confirmed. A grant nobody heard (the waiter died, or its subscription
// was down) is an ordinary hold: the waiter's next attempt renews it, or it lapses a
// lease after the registration, sooner than the dead waiter would have left the queue.
// A hand-over is thus the release and its message, with no polling: with eight clients
// on three permits, a critical section costs 2 scripts and about 54 commands
// (BenchmarkSemaphoreEightOnThree; TestSemaphoreContendedSectionScripts holds it to 2.5
// scripts), the release and the releaser's next attempt, which queues, against a
// contended mutex's 2 and 17; a fifth of them are the expiries every script sets on the
// name's keys. Besides the commands of the mutex scripts, an ACL user needs ZCARD, ZRANK,
// ZSCORE, HEXISTS and INCR for them.
//
// # Names and limits
//
// Besides simba's own rules, mutex names may not contain "{" or "}" and are at most
// MaxMutexLength bytes; contender IDs may not contain "@@" or end with "@" (both would
// break the parsing of replies and messages, here or in JVM Simba) and are at most
// MaxContenderIDLength bytes. The checks run before any I/O.
//
// # An unreachable server, a refused client
//
// The first start of a service or Locker on a Backend checks that the server answers and
// accepts the client, with a PING, and that it lets the client do what the scripts do,
// with a script that deletes a key that does not exist and publishes to a channel nobody
// hears (the key and channel "simba:{simba}:@@check"), both bounded by the start's
// context: Service.Start then fails with a one-line error wrapping ErrRefused for a
// refusal (a wrong or missing password: "simba/redis: server refused the client:
// WRONGPASS ..."; a read-only replica: "READONLY ..."; an ACL user that may not run
// scripts, write simba's keys or publish on its channels, which Redis 7 gives no new
// user: "NOPERM ..." or "... can't publish to the channel ...") or ErrUnreachable for an
// outage (a wrong address, the server down: "simba/redis: server 127.0.0.1:6380
// unreachable: dial tcp ..."; a server still loading: "server 127.0.0.1:6380
// unavailable: LOADING ..."), and the client's error. An ACL user needs FCALL and
// FUNCTION LOAD, or EVAL and EVALSHA, and
// the commands the scripts call (GET, MGET, SET, DEL, PTTL, PEXPIRE, TIME, PUBLISH,
// PUBSUB, HGET, HSET, HDEL, ZADD, ZRANGE, ZRANGEBYSCORE, ZREM, and ZSCORE for
// hand-offs), the keys "simba:*" and the channels "simba:*", and SUBSCRIBE. The check is
// remembered after its first success, so later starts cost no I/O; a failed check is
// not, so a start after the configuration was fixed succeeds. A Quorum checks each instance it has not left out,
// leaves out those that do not answer, and fails when one refuses the client or fewer
// than WithMinAvailable remain.
//
// # Refusals and outages
//
// Every error of the backend that carries a refusal matches ErrRefused and
// simba.ErrRefused, the start-up check's and every later call's alike (a password
// changed, a permission taken away, a primary turned into a replica after the start):
// simba then ends Start and acquisitions at once instead of retrying until their
// deadline. Nothing else matches it: an outage is retried. The server's answer decides:
//
//	Answer                                 Class    Why
//	NOAUTH, WRONGPASS                      refusal  the credentials are wrong or missing
//	ERR Protocol error: unauthenticated    refusal  NOAUTH, for a command of more than 10 arguments
//	ERR invalid password, ERR Client sent  refusal  the credentials are wrong (Redis 5 and
//	  AUTH, but no password is set                  older)
//	NOPERM, ERR The user executing the     refusal  the ACL user lacks a command, key or channel
//	  script can't ...                              of the scripts
//	ERR unknown command                    refusal  EVALSHA or EVAL renamed away (or Redis < 3.2),
//	                                                where FCALL is too (or Redis < 7)
//	ERR DB index is out of range, ERR      refusal  the client's DB option
//	  invalid DB index, ERR SELECT is not
//	  allowed in cluster mode
//	WRONGTYPE                              refusal  another program's data under a simba key:
//	                                                someone must delete it
//	READONLY, MOVED, ASK                   refusal  with a standalone client: a replica, or a
//	                                                Cluster node, until the configuration
//	                                                changes (go-redis has already retried
//	                                                READONLY on new connections)
//	READONLY, MOVED, ASK                   outage   with a Sentinel or Cluster client, which
//	                                                follows the failover or the slot's move
//	LOADING                                outage   the server is starting or resynchronising
//	BUSY                                   outage   a script runs; it ends or is killed
//	MASTERDOWN, NOREPLICAS                 outage   a replica lost its primary, or the primary
//	                                                its replicas, for now
//	TRYAGAIN, CLUSTERDOWN                  outage   a slot moves or a Cluster fails over
//	ERR max number of clients reached      outage   other clients hold the connections
//	OOM                                    outage   the server is full now; keys expire or are
//	                                                evicted and other clients delete theirs
//	MISCONF                                outage   the last background save failed; Redis
//	                                                keeps trying and accepts writes again
//	                                                after one succeeds
//	any other answer                       outage   not known to be lasting
//	no answer (dial refused, timeout,      outage   the server or the network is down or slow
//	  reset, EOF)
//
// OOM and MISCONF need an operator as surely as a wrong password may, but they are states
// of the whole server, which it can leave by itself, not of this client: a Start that
// fails at once on them would fail where a retry a moment later succeeds. The service
// logs the errors of its store calls either way.
//
// Scripts do not roll back: a permission taken away after the start (channels, say) can
// fail an acquire script after it wrote the owner key, which then names the contender
// whose call failed, until that contender's next call or the key's expiry. A Quorum's call is a refusal
// when the instances that refused leave fewer than a quorum (see Quorum). A refused
// subscription connection fails no call: the backend's logger (WithLogger) gets it at
// Error level, wrapped in ErrRefused, and waiters poll on their contend period meanwhile.
//
// # Requirements
//
// Redis 3.2 or later (tested with 7.0), or a Redis Cluster of such nodes. Create the
// client with ContextTimeoutEnabled, so that the service's call timeout bounds every call
// (see New).
package redis
