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
// first come, first served; the service renews ownership,
// signals its loss through contexts and callbacks, and every tenure carries a fencing
// token.
//
// # Storage format
//
// The format is JVM Simba 3.x's, so that Go and JVM contenders of one mutex on one Redis
// see each other as contenders:
//
//   - simba:{mutex}, a string: the owner's contender ID, expiring (PX) ttl + transition
//     after the last acquisition or renewal, that is at transitionAt.
//   - simba:{mutex}:contender, a sorted set: the contenders waiting for the mutex, scored by
//     the server's time in seconds when each first found it owned. JVM Simba writes
//     whole seconds, s for a waiter that came at any time within second s; this backend
//     writes s - 1 + the fraction, which puts a Go waiter after every waiter of earlier
//     seconds and before the JVM waiters that come later within second s, and moves the
//     JVM waiters already in the set with score s, which came earlier within that second,
//     to just before it. So the oldest waiter (the lowest score, which JVM Simba's release
//     picks too) is the one that came first, whichever Simba it runs.
//   - channel simba:{mutex}: "acquired@@<id>" when <id> acquires.
//   - channel simba:{mutex}:<id>: "released@@<former owner>", sent to the waiter <id> that
//     the release took off the waiting set (the oldest one).
//
// Lua scripts (acquire.lua, guard.lua, release.lua, lookup.lua and waiting.lua, each
// prefixed with prelude.lua) do every change atomically. Their first key argument is
// "{mutex}"; its braces are the cluster hash tag, so every key of a mutex lives in one
// slot, which is why mutex names may not contain braces. The mutex's four keys are named
// as key arguments too, so that while a Redis Cluster moves the slot a script runs only
// where all of them are, and is otherwise told to try again (TRYAGAIN). Acquire reads
// the owner key and takes a free mutex with SET PX (within one script, as JVM Simba's
// SET NX PX), or records the caller as waiting (ZADD) and answers the owner; guard
// renews with SET XX PX only while the caller owns the mutex; release hands the mutex
// to the oldest waiter or deletes the caller's key and wakes that waiter.
// They answer JVM Simba's "<owner>@@<remaining ms>", or "@@" for no owner, together with
// the fencing token.
//
// The backend adds to that format without changing it:
//
//   - simba:{mutex}:fence, a hash of the owner and token of the latest tenure a Go
//     contender began, expiring like the owner key; it lingers for up to ttl + transition
//     after a release.
//   - An acquire that finds the caller already owning the mutex renews instead of adding
//     it to the waiting set: it is a retry whose answer was lost, and retries must be
//     harmless. JVM contenders never see the difference.
//   - A new owner leaves the waiting set, and so does a releasing owner, so that a release
//     never wakes the releaser itself. The first attempt of a new contention also clears
//     what an earlier lifecycle of its contender ID left (a process that ended without
//     a release and started again with the same ID): an entry is taken off if it
//     acquires, and moved to the back of the queue, with a new registration, if it waits.
//   - channel simba:{mutex}:@@released: "released@@<former owner>" when a release deleted
//     the owner key and woke nobody, "released@@<former owner>@@<waiter>" when it woke
//     that waiter (a JVM one, or one whose registration for a grant was too old). JVM
//     Simba does not subscribe it, and no contender's channel can have its name (IDs
//     never contain "@@"), so JVM peers never see these messages: on their own channels
//     they get only JVM Simba's messages, in JVM Simba's cases. Every Go subscriber of
//     the mutex hears a release within a round trip; a grant is heard as
//     "acquired@@<waiter>" on simba:{mutex}.
//   - simba:{mutex}:grant, a hash: for each Go waiter, its registration made by its
//     latest attempt, "<nonce>@@<server time in ms>@@<lease ms>@@<ttl ms>@@<until
//     ms>@@<heard>": the nonce for a grant (empty for a waiter that takes none, a
//     Quorum's), the waiter's lease and ttl, the server time until which it counts as
//     waiting without trying again (the owner key's remaining time, when it will try
//     again, plus its jitter and a lease), and 1 if it listened on its channel when it
//     registered. The waiting set and this hash expire together, twice that long after
//     the latest registration that needed it.
//   - A release that takes a registered waiter off the waiting set grants it the mutex
//     instead of deleting the key: the owner key names the waiter and expires a lease
//     after its registration, a new fencing token is made, the waiter hears
//     "granted@@<nonce>@@<token>@@<former owner>" on simba:{mutex}:<waiter>, and
//     everyone "acquired@@<waiter>" on simba:{mutex}. The waiter believes it owns the
//     mutex from the send time of its attempt with that nonce, which came before the
//     registration, so its local TTL end falls before the key expires, as after any
//     answer. A registration that would leave less than a tenth of the waiter's ttl, and
//     a JVM waiter (which never registers), get JVM Simba's release message instead. A
//     grant whose message is lost is found at the waiter's next attempt, which renews.
//
// Without grants, a woken waiter races the releaser's next attempt, and a process that
// releases and asks again at once usually wins: with 8 Lockers taking turns, the least
// served got 0.6 of the sections of the most served in a test, 0 in a 10-second
// benchmark. With grants, every waiter gets its turn.
//
// # Waiters that are gone
//
// A waiter whose process ended without a release (it crashed, or its backend was closed)
// does not keep its place. A release that reaches it passes it by and serves the next
// waiter instead, dropping its entry and registration, when
//
//   - its registration has expired: it has not tried again long after it would have; or
//   - nobody heard the message addressed to it (PUBLISH counted no subscriber) although
//     it listened on its channel when it registered, or registered more than a second
//     before; a JVM waiter, which has no registration, listens from its start. A grant
//     made to such a waiter is void, as nobody heard of it. (A Go waiter's first attempt
//     registers before its subscription is confirmed, and it registers again, listening,
//     a round trip or two later: only a release within a second of the first
//     registration of a waiter that ended at once can still grant it the mutex, which
//     then stays blocked for that waiter's lease.)
//
// OthersWaiting applies the same tests (with PUBSUB NUMSUB) to the waiters ahead and
// drops the gone ones, so that they do not keep it true. Waiters not yet reached expire
// with the waiting set. Subscriber counts are exact on a standalone or Sentinel client;
// a Redis Cluster node counts only its own subscribers, so with a ClusterClient (or any
// client other than *redis.Client) only expiry tells: a release may then grant the mutex
// to a waiter that has just died, and it stays blocked until that grant lapses, a lease
// after the waiter's last attempt. A live waiter taken for gone (its subscription
// connection was down at that moment) loses its place and queues again at its next
// attempt, which its reconnection brings forward. A release looks at 16 waiters at most.
//
// # Messages are a hint
//
// Each Backend has one subscription connection, opened the first time one of its
// contentions needs it and kept until Close; it carries the channels of all its
// contentions. A contender subscribes simba:{mutex}, simba:{mutex}:@@released and its own
// channel when an attempt finds the mutex owned by someone else, or at its first renewal
// as owner; an uncontended critical section that ends before its first renewal never
// subscribes. A Locker's waiter leaves simba:{mutex} out until it owns and renews: it
// needs to hear of its turn, not of every other owner, so a hand-over wakes the waiter
// it serves and not every waiter of the mutex (with 8 Lockers on one mutex, a third
// more sections per second). A retriever subscribes the first two when it starts. A
// channel stays subscribed for a second after its last listener left: a Locker that
// asks again at once (or another contention of the same contender) finds its channels
// subscribed and listens from before its first attempt, so that waiting costs no
// SUBSCRIBE and UNSUBSCRIBE and no second attempt.
//
// A grant makes its waiter the owner without a store call (see above); a grant that does
// not match one of the waiter's latest two attempts makes it contend at once instead. A
// release message on its own channel makes a waiter contend at once, and so does a
// release that left the mutex free without waking anyone. An acquisition message, or a
// release that woke another waiter, makes an owner that believes it still owns check at
// once (its key lapsed or was lost, and another contender took the mutex), and a
// retriever look up; a waiting service (not a Locker's) takes it as news of the owner,
// with instants estimated from its own ttl and transition (as JVM Simba does) and no
// token, until its next attempt answers: so Owner() follows hand-overs within a round
// trip without a store call per waiter. Every confirmation that completes a contention's
// channels, the first and each one after go-redis reconnected (or the backend replaced a
// connection that stopped answering its pings, see WithPingInterval), makes a waiting
// contention try once more and a retriever look up, so that nothing published before it
// is missed for long; an owner learns of anything it missed at its next renewal.
//
// Correctness never depends on messages: every contender still contends on its contend
// period, so a lost message (the connection was down, the waiter was not subscribed yet)
// only slows a hand-over down to that period. In a Redis Cluster, PUBLISH reaches every
// node, so the connection may be to any of them.
//
// # Cost
//
// Every store call is one script (EVALSHA); what the server processes is counted below in
// commands, the script's inner calls included, as INFO commandstats counts them:
//
//   - An uncontended cycle (acquire, release) takes two scripts and about 15 commands:
//     the acquisition reads the owner key, sets it, makes the token (TIME, the fence
//     read, written and given its expiry), clears any entry an earlier lifecycle of the
//     contender ID left and announces itself; the release reads the owner key, finds the
//     waiting set empty, deletes the key and announces the release.
//   - A renewal is one guard script of about 6 commands; a retriever looks up (about 4)
//     at every message.
//   - Under contention, with grants, each critical section costs one attempt that finds
//     the mutex owned and registers (about 9 commands: the owner and its remaining time
//     and token, TIME, the waiting set, the check for JVM waiters of the same second, the
//     registration and its expiry) and one release that grants (about 13: the owner, TIME,
//     the oldest waiter and its registration, the token, the owner key, the grant and the
//     acquisition message): about 22 commands and one lost attempt per section (8 Lockers
//     on one mutex; BenchmarkEightContenders reports it). No SUBSCRIBE or UNSUBSCRIBE
//     while a contender waits again within a second.
//
// On the test machine an inner call costs Redis 2 to 3 µs, so a contended critical
// section keeps it busy for about 60 µs: with a Redis shared by a busy host, the server's
// time, not the network, bounds the sections per second.
//
// # Clock
//
// The only clock in the stored data is the Redis server's: owner keys expire by it, and
// the waiting set is ordered by it. Replies report the time left until the owner key
// expires (PTTL); simba adds that duration to the local monotonic time at which it sent
// the request and never turns a Redis time into a local instant. Redis keeps a single
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
// begins a new tenure with a new token rather than resuming the old one. It is stored in the fence key and read back with every
// answer. While the fence key exists, tokens increase whatever the clock does; when it is
// gone (it expired, or Redis ran without persistence and restarted empty) the clock alone
// keeps them increasing, because it has moved on since the last tenure began. The token
// therefore relies on the server's clock not stepping back, at a moment when the fence key
// is gone, to before the start of the last tenure: for example after a failover to a
// replica whose clock is behind and which had not yet received the fence key. An answer
// naming an owner whose tenure no Go contender began (a JVM contender) carries token 0.
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
// unavailable: LOADING ..."), and the client's error. An ACL user needs EVAL, EVALSHA and
// the commands the scripts call (GET, SET, DEL, PTTL, PEXPIRE, TIME, PUBLISH, PUBSUB,
// HGET, HMGET, HSET, HMSET, HDEL, HINCRBY, ZADD, ZRANGE, ZRANGEBYSCORE, ZREM), the keys
// "simba:*" and the channels "simba:*", and SUBSCRIBE. The check is remembered after its
// first success, so later starts cost no I/O; a failed check is not, so a start after the
// configuration was fixed succeeds. A Quorum checks each instance it has not left out,
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
//	ERR unknown command                    refusal  EVALSHA or EVAL renamed away (or Redis < 3.2)
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
