// Package jdbc is simba's database/sql backend: mutexes kept in a table of the
// relational database a team already runs, shared with JVM Simba services (whose module
// gives the package its name) that use the same table. It has two dialects, MySQL (MySQL
// and MariaDB, the default) and Postgres (PostgreSQL 13 and later), and takes the
// caller's *sql.DB:
//
//	db, err := sql.Open("mysql", "app:secret@tcp(db:3306)/app?interpolateParams=true")
//	...
//	err = jdbc.CreateTable(ctx, db) // or run jdbc.DDL() in a migration
//	backend, err := jdbc.New(db)
//
// With go-sql-driver/mysql, set interpolateParams=true in the DSN: otherwise every
// statement with arguments costs a server-side prepare, execute and close, three round
// trips instead of one. PostgreSQL takes the dialect as an option (see PostgreSQL below);
// the package imports no driver.
//
// The sections up to PostgreSQL describe the format and the protocol, shared by both
// dialects, in MySQL's terms; PostgreSQL says what differs there.
//
// # Storage
//
// One row per mutex in table simba_mutex (WithTable names another): mutex varchar(66),
// the primary key; acquired_at, ttl_at and transition_at, bigint unsigned epoch
// milliseconds; owner_id varchar(128), empty when there is no owner; version int
// unsigned, bumped by every change. This is JVM Simba's format. JVM Simba creates a row on
// first use with zeros, an empty owner and version 0; here acquired_at stamps the creation
// and the version is the highest known for the mutex (see Fencing token). Acquisition and
// renewal are JVM Simba's one conditional UPDATE (take the row if its transition window
// has ended, or renew it if it is this contender's and the window has not); release sets
// ttl_at and transition_at to 0 and the owner to the empty string where the owner is this
// contender, and, where JVM Simba sets acquired_at to 0, stamps it with the time of the
// release (see Pruning). A renewal is further conditioned on the exact version this
// contention last saw, and every acquisition may write ttl_at a millisecond early, to mark
// renewals (see Fencing token); the release is conditioned on that version too (see
// Bounded statements). JVM services are
// affected by none of these: they read acquired_at only to report it, and treat a row
// whose transition window has ended as free whatever its other columns say.
//
// The DDL uses utf8mb4 with a binary collation. Start checks the real table through
// information_schema and fails with a *SchemaError (matching ErrSchema) when it is
// missing, lacks a column, has the wrong types, a character set that cannot hold every
// name, or a collation under which different names are equal (case- or accent-insensitive
// ones: two names would silently share a row); the error says how to ALTER the column. A
// table created by JVM Simba's DDL on a server whose default collation is insensitive
// therefore needs that ALTER once; JVM services keep working after it. Start also checks
// names against the real column lengths, which may be narrower than the format, and that
// the session may write the table, with an UPDATE and an INSERT that match no row: a user
// without those privileges, a read-only session (tx_read_only) or server (read_only) fails
// Start with the server's refusal and the GRANT to run. Each of these problems is a
// refusal (see Refusals and outages).
//
// # Names the store cannot be trusted with
//
// Mutex names longer than 66 characters and contender IDs longer than 128 (characters as
// MySQL counts them for utf8mb4), blank names, control characters, invalid UTF-8 and white
// space at either end are rejected when a service is created, before any I/O (see
// Backend.ValidateMutex). The server would not reject them reliably: in non-strict
// sql_mode it truncates an over-long name on INSERT, so that different names share a row,
// while the UPDATE that acquires compares the full name and never matches (a contender
// that never wins and never errs); it truncates an over-long owner ID on UPDATE, after
// which the owner can neither recognise, renew nor release its own lease. In strict mode
// the INSERT fails, but INSERT IGNORE truncates all the same, and an over-long value in a
// WHERE clause is no error at all: it matches nothing. Trailing spaces are equal under the
// PAD SPACE collations, binary ones included, and a case-insensitive collation folds case
// and accents; the first is rejected in names, the second refused at Start.
//
// # Clock
//
// Every time comes from the database: its now is UTC_TIMESTAMP(3) in epoch milliseconds,
// whatever the session's time zone, so a fleet of simba services alone is never affected
// by the time zone (with one exception below). The backend reports the owner's TTL and
// transition window as durations from the database's now, shortened by a millisecond for
// the clock's resolution, and simba adds them to the local time at which it sent the
// request. Database timestamps are never compared with the client's clock.
//
// JVM Simba reads now as UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)): UTC turned into the
// session's local time and back. In a daylight-saving fold, where local times come twice,
// the way back picks one of the two instants, so JVM Simba's clock reads an hour (a fold's
// length) behind UTC in the fold's second pass when the session's zone comes from the
// server's time zone tables (time_zone = 'Europe/Berlin'), and an hour ahead in its first
// pass when the zone is the server host's (time_zone = SYSTEM on a host with daylight
// saving time). The backend works that out in SQL, from the session's time zone, and:
//
//   - writes every row so that JVM Simba's clock finds it lasting at least as long as
//     simba's own, whatever that clock reads during the lease: where JVM Simba's clock
//     reads ahead, the row's times are that much later; where it reads behind for the
//     whole lease, the row is written in JVM Simba's clock, as JVM Simba would write it;
//   - reads every row as lasting as long as its writer meant it to, whoever wrote it: a
//     row whose acquired_at is the first of two instants with the same local time may
//     have been written at the second, by a clock reading behind, and then lasts that
//     much longer; a row simba wrote later than its writer's clock reads ahead (which
//     acquired_at shows) lasts that much less.
//
// Sessions in a zone without folds (UTC, a fixed offset, SYSTEM on a host in UTC) need
// none of this, and get statements without it, several kilobytes shorter. The backend
// reads the session's time zone when it first checks the table; create a new Backend
// after changing the server's time zone from such a zone to one with daylight saving time.
//
// A fleet of simba and JVM Simba services on one table never has two owners believing at
// once, provided that (the exact condition):
//
//   - every contender's database sessions use the same time zone (the server's default
//     unless a connection sets time_zone), or JVM Simba's sessions a zone without
//     daylight saving time (UTC, a fixed offset);
//   - that zone's folds are 30 minutes, 1 hour or 2 hours long (every zone's in the tz
//     database);
//   - every contender's ttl + transition is at most one hour;
//   - JVM Simba's own contenders keep to what JVM Simba guarantees: in a fold they may
//     overlap with each other (its clock steps by the fold's length), which simba cannot
//     prevent; they never overlap with simba's.
//
// The price is time, in folds only: with time_zone = SYSTEM, a lease a JVM Simba
// contender writes in a fold's first pass looks an hour longer to simba than it is, so a
// simba contender takes over from a JVM Simba owner that vanished there an hour late; with
// a zone from the tables, a lease simba wrote in a first pass and that nobody renewed or
// released looks, an hour after it was written, to have been written by JVM Simba's
// clock an hour behind, and is held again for up to ttl + transition: the one way the time
// zone touches a fleet of simba services alone, and only when an owner vanished and
// nobody took its mutex for an hour.
//
// # When the database's clock steps
//
// A step of the database's clock is outside the model, but the backend notices it. Every
// answer of the acquire statement, and every read, carries the database's now, and between
// two answers of one contention the database's clock must move by no less than the local
// monotonic clock did from the earlier answer to the later statement's sending, and by no
// more than from the earlier statement's sending to the later answer. A move outside that
// by more than 50 ms plus 0.1% is a step: it is logged at Error level with its size
// (step_ms) and counted (Backend.ClockSteps).
//
//   - Forward: the lease on the store is shorter than its owner believes, by the step, so
//     another contender may take the row before the owner's local TTL end. An owner
//     whose answer shows a forward step gives the mutex up at once: it releases the row
//     and answers "no owner", so that simba ends the tenure (its context is cancelled,
//     OnReleased follows); its next acquisition begins a new tenure, with a new token.
//     What happened between the step and that answer cannot be undone: if another
//     contender took the row meanwhile, both believed until then, and the fencing token
//     (the newer owner's is larger) is what protects the resource.
//   - Back: leases written before the step last longer on the store by the step, which is
//     safe; the owner goes on. But an owner that vanishes leaves a row that looks held
//     for that much longer. A contender that saw the row bounds the wait: it takes a row
//     whose version has not changed for longer than the row's lease (transition_at less
//     acquired_at) plus 1%, counted on its own monotonic clock from the answer that
//     first showed it, because the row's owner wrote it before then and so stopped
//     believing by then, whatever the database's clock says. The answers it gets say
//     so, so that simba contends again in time: failover after a step back takes at most
//     ttl + transition (+1%, + a contend period's jitter) from when a contender first saw
//     the row, instead of the step's length more.
//
// # Fencing token
//
// The token is the row's version as set by the tenure's first UPDATE. Renewals bump the
// version too, so the latest version is not the token. The UPDATE returns, through
// LAST_INSERT_ID in its own reply, the version it found (from which the new one follows)
// and whether it renewed the tenure the contention knows, so no read follows a successful
// acquisition. A renewal matches only at the exact version of the contention's last
// answer: a tenure goes on, and keeps its token, only while nothing has come between. A
// row freed behind its owner's back, or deleted and created again, is taken as a new
// tenure, with a new token, even by the contender that owned it before. When an answer is
// lost, the statements that follow still expect the version of the last answer, so none
// of them renews again; the next one that does not match reads the row, and the row's
// last write tells what happened: the acquisition writes ttl_at up to a millisecond short
// so that transition_at - ttl_at is odd after a renewal and even after a new tenure's
// first write (the renewal mark), so a renewal at the next version continues the tenure
// and its token, and a new tenure of this contender gives the version it wrote as the
// token. Any reader can tell the two apart (Backend.ReleaseOwner does). JVM Simba's
// renewals carry no mark: its rows read as new tenures (as simba takes them), unless its
// transition is an odd number of milliseconds. A new lifecycle that finds its contender's
// earlier tenure still on the row renews it and takes the new version as its token,
// larger than any token handed out before. Tokens of one mutex strictly increase across
// tenures; version is an int unsigned, so after 4,294,967,294 changes of one row
// acquisitions fail instead of repeating a token.
//
// A row deleted behind the backend's back and created again at version 0, as JVM Simba
// creates rows, would hand out tokens again that were handed out before. So a backend
// remembers the highest version it has seen in each mutex's row (of the mutexes its
// contentions contend for, and of up to 4,096 others), creates a missing row at that
// version, and has every acquisition take one more than the row's version or than that,
// whichever is larger. A backend that never saw a mutex's row cannot know its version and
// creates it from 0; when a backend then sees the row at a lower version than one it saw
// (in a read, or as the version an acquisition found before it took the row, whoever the
// row names), it logs that at Error level, with the version seen as the token and the
// highest seen before as the previous token, and counts it (Backend.TokenRegressions): a
// regression is detected, never silent, and the next tenure taken through that backend
// has a token larger than every one before again.
//
// # Pruning
//
// Neither acquisition nor release deletes a row, so with a mutex name per entity (one per
// invoice, say) the table grows for ever. Backend.Prune deletes the rows that have had no
// owner for longer than a given age by the database's clock: released or created that
// long ago, or left by an owner whose transition window ended that long ago. A row JVM
// Simba released carries no time and counts as released long ago. Run Prune now and then,
// from one process or several; it is safe while the mutexes are in use:
//
//   - It deletes only rows without an owner, in transactions of up to 100 rows that lock
//     them first, so a row acquired meanwhile is kept.
//   - A contender that finds its row gone creates it again and acquires it; one that
//     races a Prune retries on its next attempt at worst.
//   - Tokens never go back: each pruning transaction raises the version of the floor row,
//     a row whose mutex is the empty string (a name neither simba nor JVM Simba allows),
//     to the highest version it deletes, and every row created afterwards, for a name
//     used again or for the first time, starts at that version. A first use reads the
//     floor row with a shared lock, which waits for a pruning transaction under way; a
//     pruning transaction locks the floor row before the rows it deletes, so the two
//     never wait for each other in a cycle. A row whose version reached the column's
//     maximum is never pruned: it can never be acquired again, and the floor would
//     leave the rows created after it no version to hand out.
//
// The floor row stays in the table; do not delete it by hand (tokens of pruned mutexes
// would then start again from the versions their backends remember, or from 0).
//
// # Bounded statements, and statements that arrive late
//
// Every statement runs under the context simba passes, whose deadline (the call timeout,
// a quarter of the TTL by default) is far shorter than InnoDB's 50 s row-lock wait. On
// MariaDB each table statement also carries SET STATEMENT max_statement_time, so the server
// itself gives the statement up, row-lock waits included, shortly before the caller does.
// A statement the caller abandoned may still reach the server later (it sat in a socket
// buffer, or MySQL, which has no such prefix for UPDATE, kept it waiting for a row lock).
// That is harmless: an acquisition is one UPDATE that only takes a free row or renews this
// contender's own at the version its contention last saw (a late one renews nothing that
// changed since, or takes a row nobody protects); a release
// names the exact version its contention last saw, or read just before, so a release that
// arrives after the row was acquired again, by this contender ID included, finds another
// version and changes nothing.
//
// One case is not harmless by itself: an acquisition abandoned as its contender stops
// (Stop cuts the round under way short) that the server runs after the release which
// followed it found the row free. It takes the row for a contender that has stopped, and
// the mutex would stay held until that lease lapsed. StopContend therefore leaves a sweep
// behind whenever one of the contention's UPDATEs may still run: once the statement's
// deadline has passed (and with it the server's limit, on MariaDB and PostgreSQL), the
// sweep reads the row and releases it if it names the stopped contender, unless a
// contention of the same contender ID has started since on the same backend (that one
// takes such a row over as its own). Backend.Close waits for the sweeps, at most the call
// timeout and a little more; close the backend before the pool.
//
// # Hand-over
//
// JVM Simba's contenders learn that a mutex was released only when they next poll, up to
// ttl + transition + 1 s later. Here a waiting contender learns of a graceful release
// within a round trip or two, without polling the table more often (WithHandOver turns
// this off). It uses the server's named locks (GET_LOCK), keyed by a hash of the database,
// table and mutex, as a queue beside the table:
//
//   - A contender that may win the row takes the named lock first, without waiting, on a
//     connection it pins from the pool (within a budget: see Connections); an owner
//     holds it for its whole tenure.
//   - A contender that loses waits for the lock in a goroutine of its contention, on its
//     pinned connection (GET_LOCK with a 30 s timeout, repeated). The server queues the
//     waiters; each release of the lock goes to one of them.
//   - Release runs the table's release and lets the lock go. The contender that gets it
//     asks simba to contend at once, takes the row, and holds the lock as the new owner.
//     On MySQL and MariaDB the release lets the lock go itself (RELEASE_LOCK in the
//     UPDATE's SET): one statement, and the woken waiter's UPDATE waits on the row's lock
//     for the release to commit, overlapping it; not where the session logs statements as
//     text (log_bin with binlog_format=STATEMENT, for which RELEASE_LOCK in an UPDATE is
//     unsafe), and not on PostgreSQL, whose UPDATE would pass over the row not yet
//     committed: there DO RELEASE_LOCK or pg_advisory_unlock follows the release.
//   - A contender that finds the row free while another session holds the lock joins the
//     queue and, within the same acquisition, leaves the row to that session for 25 ms,
//     or four of its round trips if longer (the holder was most likely just woken to take
//     it), so that newcomers do not take the row from the head of the queue. If the lock
//     has changed hands when that time is up, the new holder was woken in turn and gets
//     the same (up to four holders); a holder that kept the lock all that time without
//     taking the row is slow, and the contender takes it.
//   - A contender that holds the lock but finds another owner heads the queue: it polls on
//     its contend period, and the others wait behind it instead of polling. That owner
//     provably holds no lock (a JVM contender, or one that won the row while the head was
//     slow), so the head passes its place on, once per such owner (and again after ttl +
//     transition if it is still there), until the lock reaches the owner and the chain of
//     hand-overs is whole again. Nobody spins: every pass costs one attempt per waiter and
//     change of owner.
//
// The lock is only a hint. Ownership, tokens and safety come from the table alone: a
// contender that holds the lock still needs the UPDATE to match, and one that waits for the
// lock still polls on its contend period, so a lost wake-up, a lock held by a paused
// process, a JVM owner or a server restart cost time, never exclusion. A crashed owner's
// session closes and lets the lock go; its waiters then contend, and take the row when its
// lease has lapsed. After a server restart the waiters' connections are gone; each waits
// again from its next attempt, and an owner takes the lock again at its next renewal.
//
// # Connections
//
// The hand-over holds connections of the pool, within a budget per Backend:
// WithHandOverConnections, DefaultHandOverConnections (2) by default. A contention pins
// one, if one of the budget's is free, when it contends, and keeps it while its contender
// owns the mutex, waits for it or heads its queue; it gives it back when it releases the
// mutex or stops. A contention that finds the budget spent contends without the
// hand-over: it polls on its contend period, as JVM Simba's contenders do, until a
// connection of the budget is free at one of its attempts. So a process that holds many
// mutexes at once (through Mutexes, one contention per name) holds at most the budget for
// the hand-over, whatever the number of names.
//
// The budget of one Backend on its pool is then:
//
//   - the hand-over's connections: at most WithHandOverConnections, held as long as their
//     contentions own, wait or head a queue;
//   - one connection per statement in flight, borrowed from the pool for its length:
//     every contention's statements run on its pinned connection when it has one that is
//     idle, and otherwise borrow one (a waiting contention's pinned connection is busy
//     waiting, and an owner's holds the named lock: a statement cut short by its context
//     closes the connection it runs on, and the lock must not go with it before the
//     release, so only the release that lets the lock go runs there); a contention makes
//     one statement at a time;
//   - one for a moment when a waiting contention stops (to interrupt its wait with KILL
//     QUERY, which keeps its connection usable), and one for each Prune transaction.
//
// The hand-over never pins the pool's last connection: with a pool of n
// (sql.DB.SetMaxOpenConns), it holds at most n-1, whatever the budget, and contentions
// beyond that poll. With the default, an application whose pool is 10 connections keeps 8
// whatever the number of mutexes it holds, less the statements in flight; a larger budget wakes more
// waiters at once on release, and costs as many connections. Retrievers pin nothing. Size
// the server's max_connections for every process's pool. WithHandOver(false) holds
// nothing: every statement borrows a connection from the pool and returns it. Turn the
// hand-over off, too, behind a proxy that multiplexes client sessions over server sessions
// (ProxySQL, MaxScale in some modes): named locks and KILL QUERY belong to server sessions.
//
// # PostgreSQL
//
// With pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib):
//
//	db, err := sql.Open("pgx", "postgres://app:secret@db:5432/app")
//	...
//	err = jdbc.CreateTable(ctx, db, jdbc.WithDialect(jdbc.Postgres))
//	backend, err := jdbc.New(db, jdbc.WithDialect(jdbc.Postgres))
//
// Storage: the same columns with the same meaning, in PostgreSQL's types, which have no
// unsigned integers: mutex varchar(66) and owner_id varchar(128), both COLLATE "C";
// acquired_at, ttl_at, transition_at and version bigint, with CHECK constraints for the
// ranges of the unsigned columns (DDL). Start checks the table through pg_catalog: the
// columns' types, NOT NULL, mutex alone as the primary key, a deterministic collation (a
// nondeterministic ICU collation could make different names equal), not char(n) (it pads
// an owner's ID with spaces), a UTF8 database, a writable server, and the role's
// privileges, each on its own (SELECT and INSERT on every column, UPDATE on every column
// but mutex, held on the table or the columns; DELETE, which only Prune needs, does not
// fail Start, and a Prune without it fails with a refusal); each problem comes with the
// ALTER TABLE (or GRANT) that fixes it, and a missing table with the CREATE TABLE. An
// unqualified table name is looked up on the session's search_path;
// WithTable("schema.table") names a schema. varchar limits count characters, as MySQL's
// do, and the server refuses an over-long value it would store; but in a WHERE clause an
// over-long value is no error, it matches nothing, so names are still checked before any
// I/O.
//
// Clock: statement_timestamp() in epoch milliseconds. It is read once per statement, when
// the server receives it, so every use within the acquire statement sees the same
// instant (as UTC_TIMESTAMP(3) does on MySQL), and it is read after the client sent the
// statement, so a lease counted from the local send time never outlasts the store's.
// now() is fixed when the transaction begins, earlier than the statement within
// Prune's transactions; clock_timestamp() moves while the statement runs, so a statement
// that waited for a row lock would compare at one instant and write at another. A session's
// time zone changes nothing (timestamptz is UTC inside): there are no daylight-saving
// folds to work out. Clock steps are noticed as on MySQL.
//
// The acquire is one UPDATE ... RETURNING: one round trip that hands back the new
// version, whether it renewed the tenure the contention knows (from the renewal mark in
// ttl_at), the database's now, and the version it found (kept by its SET clause in a
// setting of its transaction, simba.found, as RETURNING reads only the new row); the
// release, tokens, floors and pruning are MySQL's.
// The release's commit does not wait for the WAL to reach the disk (it turns
// synchronous_commit off for its own transaction, as it sets lock_timeout): one disk
// flush per cycle instead of two. A release that a crash of the database loses leaves
// the row to its former owner's lease, which delays the next owner and never makes two;
// the commit is visible at once all the same, and every acquisition's commit waits for
// the WAL up to its own record, and so for every release it could have read.
//
// Bounded statements: every table statement sets its own lock_timeout (set_config(...,
// true) in its WHERE clause, which the server evaluates before it locks, updates or deletes
// a row, and which lasts only as long as the statement's transaction), a little shorter
// than the caller's deadline. So the server gives a statement up when it waits for a row
// lock longer than that (an administrator's SELECT ... FOR UPDATE, a Prune transaction),
// with the connection intact. It cannot set statement_timeout for itself without a
// transaction of its own (BEGIN, SET LOCAL, the statement, COMMIT: three round trips
// instead of one); a single-row statement has nothing else to wait for, short of a table
// lock held by DDL (ALTER TABLE), which is taken before the statement starts and which
// only the caller's context then bounds. A statement that arrives late is harmless, as on
// MySQL. pgx closes the connection when a context ends; to have the server cancel the
// statement as well, configure its context watcher to send a cancel request
// (pgconn.CancelRequestContextWatcherHandler).
//
// Hand-over: session-level advisory locks (pg_try_advisory_lock, pg_advisory_lock, keyed
// by a 64-bit hash of the database, schema, table and mutex) play the part of GET_LOCK,
// with the same queue and the same rules; a wait lasts 30 s on the server (lock_timeout),
// and stopping a waiter cancels its wait with pg_cancel_backend from another connection.
// A contender that does not hold the lock tries it in its acquire statement, on its pinned
// connection (a CTE beside the UPDATE, evaluated once, before the commit): the UPDATE
// begins a new tenure only if the try took the lock, and otherwise the acquisition goes on
// as after a failed try of its own. An uncontended cycle is three statements: the acquire,
// the release and the unlock.
// Advisory locks are not transactional, and PostgreSQL may grant a waiter the lock and then
// fail its statement on a cancellation or lock_timeout that struck at that moment, and an
// acquire that tried the lock keeps it when its UPDATE then fails: after a wait or an
// acquire that ended in an error, the contention lets the lock go if its session holds it,
// before it tries the lock again or returns the connection to the pool (a session that
// kept it would take it again at once, re-entrantly, and starve the queue).
// The release lets the lock go only once it has committed: a woken waiter's UPDATE reads
// the row as its snapshot has it, and would find the old owner's row, not wait for it, if
// the release were not committed yet (InnoDB's UPDATE waits and reads the latest row).
// LISTEN/NOTIFY would need the driver's own API to receive notifications, which
// database/sql does not have. Advisory locks are shared by every application of a
// database: a key another application happens to use costs hand-overs their speed, never
// safety.
//
// Behind a proxy that pools transactions (PgBouncer with pool_mode = transaction, and
// other poolers in that mode), consecutive statements of one client connection may run in
// different server sessions: an advisory lock stays with whichever session took it (held
// for another client, and never let go by the contention that took it), a wait for it
// holds a server connection, and pg_backend_pid names a session the contention no longer
// has. Turn the hand-over off there (WithHandOver(false)): contenders then poll on their
// contend period, as JVM Simba's do, and a graceful release reaches a waiter within ttl +
// transition + jitter. Everything else works behind such a proxy provided its driver does
// not rely on prepared statements across transactions (pgx: default_query_exec_mode=exec,
// or a PgBouncer that keeps them, max_prepared_statements). Session pooling is no problem.
//
// # Refusals and outages
//
// A store's answer that no retry can cure is a refusal: the error the backend returns for
// it, from Start's checks (a *SchemaError) or from any later call (an acquisition, a
// release, a lookup, Prune, CreateTable), matches simba.ErrRefused, quotes the server and
// says what to fix, so that Start and acquisitions end at once. Anything else is an
// outage, which simba retries: no answer, a timeout, a reset or refused connection
// (driver.ErrBadConn included), a server starting up or shutting down, a resource that
// frees itself. By the server's error code:
//
//	MySQL, MariaDB            PostgreSQL         what                                kind
//	1045 1698 1130 1251 1820  class 28           credentials, or an account that     refusal
//	1862 3118 4151                               may not log in (from this host)
//	1129                                         host blocked until FLUSH HOSTS      refusal
//	1044 1049                 3D000 3F000        no such database (schema), or none  refusal
//	                                             the user may use
//	1142 1143                 42501              a privilege on the table missing    refusal
//	1146 1054                 42P01 42703        no such table, or column            refusal
//	1290 1792 1836 1036       25006              read-only server, session, table    refusal
//	1064 1305                 class 42, 0A000    SQL the server does not understand  refusal
//	                                             (another dialect, older version)
//	1040 1203 1226            53300              too many connections, or a per-     outage
//	                                             user limit: connections end
//	1053 1927                 57P01 57P03 08xxx  shutting down, starting up, in      outage
//	                                             recovery, connection lost
//	1205 1213 1317 1969       40001 40P01 55P03  lock wait, deadlock, serialization  outage
//	                          57014              failure, statement cancelled
//	any other                 any other                                              outage
//
// So are the driver's refusals to connect as configured: a DSN pgx cannot parse (it
// parses it when it connects), a certificate the client does not trust (x509, tls), a
// server without the TLS the DSN requires, an authentication method the driver will not
// use. A refusal is not retried at Start, where it is a configuration to fix; a running
// service goes on retrying it (a privilege may be granted back). A statement the server
// answered with an error, a refusal or not, has ended and changed nothing, so it leaves
// no sweep behind (see Bounded statements).
//
// # Who closes what
//
// The pool is the caller's: New never closes it, nor does anything else here. Stopping a
// service releases its mutex and returns its pinned connection. Backend.Close frees only
// what the backend holds itself (pinned connections, whose sessions let their named locks
// go, and waiting goroutines), without touching the table: stop services first, or their
// leases lapse after ttl + transition. The pool recovers from a server restart by itself
// (database/sql replaces dead connections); pinned connections are checked before each use
// and replaced.
package jdbc
