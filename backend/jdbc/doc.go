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
// trips instead of one. The two statements of every cycle (the acquire and the release on
// the hand-over's pinned connection) are prepared by the backend itself, once per
// connection, which spares the server parsing them at every cycle; a server or proxy that
// refuses to prepare them turns that off by itself, and WithPreparedStatements(false) does
// so from the start. PostgreSQL takes the dialect as an option (see PostgreSQL below);
// the package imports no driver.
//
// The sections up to PostgreSQL describe the format and the protocol, shared by both
// dialects, in MySQL's terms; PostgreSQL says what differs there. Hand-over, end to end
// follows a mutex through both dialects' statements.
//
// # Storage
//
// One row per mutex in table simba_mutex (WithTable names another): mutex varchar(66),
// the primary key; acquired_at, ttl_at and transition_at, bigint unsigned epoch
// milliseconds; owner_id varchar(128), empty when there is no owner; version int
// unsigned, bumped by every change. This is JVM Simba's format, and acquisition, renewal
// and release are JVM Simba's statements: one conditional UPDATE takes the row if its
// transition window has ended, or renews it if it is this contender's and the window has
// not; the release sets the times to 0 and the owner to the empty string where the owner
// is this contender. What this backend writes besides (a floor row, acquired_at at
// creation and release, a renewal mark in ttl_at, versions above a floor, renewals and
// releases conditioned on the version) is listed column by column in Hand-over, end to
// end. JVM services are affected by none of it: they read acquired_at only to report it,
// and treat a row whose transition window has ended as free whatever its other columns
// say.
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
// tenure, with a new token, even by the contender that owned it before (by its statement
// after the renewal that found the row free: a renewal takes no free row, see Bounded
// statements, and statements that arrive late). When an answer is lost, the statements
// that follow still expect the version of the last answer, so none of them renews again; the next one that does not match reads the row, and the row's
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
// Every call of the backend and of its contentions returns by its context's deadline
// (backend.DeadlineKeeper), so a Locker makes its calls on its caller's goroutine.
// A statement the caller abandoned may still reach the server later (it sat in a socket
// buffer, or MySQL, which has no such prefix for UPDATE, kept it waiting for a row lock).
// That is harmless: an acquisition is one UPDATE that only renews this contender's own at
// the version its contention last saw or, in a contention that knows no tenure of its
// own, takes a free row (a late one renews nothing that changed since, or takes a row
// nobody protects). A renewal takes no free row, not even one its own release has just
// freed: one that finds the row free ends its tenure, and the contention's next statement
// takes the row. A release names the exact version its contention last saw, or read just
// before, so a release that arrives after the row was acquired again, by this contender
// ID included, finds another version and changes nothing.
//
// One case is not harmless by itself: an acquisition (not a renewal) abandoned as its
// contender stops (Stop cuts the round under way short) that the server runs after the
// release which followed it found the row free. It takes the row for a contender that has stopped, and
// the mutex would stay held until that lease lapsed. StopContend therefore leaves a sweep
// behind whenever one of the contention's UPDATEs may still run: once the statement's
// deadline has passed (and with it the server's limit, on MariaDB and PostgreSQL), the
// sweep reads the row and releases it if it names the stopped contender, unless a
// contention of the same contender ID has started since on the same backend (that one
// takes such a row over as its own). Backend.Close waits for the sweeps, at most the call
// timeout and a little more; close the backend before the pool. On MySQL and MariaDB an
// acquisition made while the contention's pinned session holds the named lock (a waiter
// the lock woke) begins a tenure only while that session still holds the lock
// (mysqlAcquireHolding): abandoned, and run after the contention let the lock go, it
// takes nothing, and leaves the row to the waiter the lock woke next.
//
// # Hand-over, end to end
//
// JVM Simba's contenders learn that a mutex was released only when they next poll, up to
// ttl + transition + 1 s later. Here a waiting contender learns of a graceful release
// within a round trip or two, without polling the table more often (WithHandOver turns
// this off): the server's named locks (MySQL's GET_LOCK, PostgreSQL's session-level
// advisory locks) serve as a queue beside the table. This section follows one mutex
// through the table and its lock, statement by statement, on both dialects. Statements
// are named as in the source (statements.go): mysql... for MySQL and MariaDB, pg... for
// PostgreSQL.
//
// The row is JVM Simba's; what this backend writes besides, column by column:
//
//	column         JVM Simba writes                 this backend writes besides
//	mutex          the name                         a floor row, mutex '' (a name neither
//	                                                allows), whose version is the highest
//	                                                Prune deleted (see Pruning)
//	acquired_at    now, at an acquisition or a      now at the row's creation and at a
//	               renewal; 0 at creation and at    release too: Prune counts a row's age
//	               a release                        from it
//	ttl_at         now + ttl; 0 at a release        up to 1 ms less, so that
//	                                                transition_at - ttl_at is odd after a
//	                                                renewal and even after a new tenure's
//	                                                first write: the renewal mark (see
//	                                                Fencing token), which ReleaseOwner reads
//	transition_at  now + ttl + transition; 0 at a   -
//	               release; the row is free once
//	               it is before now
//	owner_id       the owner's contender ID; ''     -
//	               at creation and at a release
//	version        version + 1 at every change;     a new row at the highest version known
//	               0 at creation                    (the backend's, the floor row's); an
//	                                                acquisition writes max(version, floor)
//	                                                + 1, and none past 4,294,967,295;
//	                                                renewals and releases match only the
//	                                                exact version last seen
//
// Times are epoch milliseconds of the database's clock (MySQL: UTC_TIMESTAMP(3);
// PostgreSQL: statement_timestamp()), read once per statement. In a MySQL session time
// zone with daylight-saving folds, the acquisition may shift its three times so that JVM
// Simba's clock reads the lease right (see Clock). Beside the row, and never in it, are:
//
//   - The mutex's named lock. On MySQL and MariaDB, GET_LOCK's name: "simba:" and 40 hex
//     digits of a SHA-256 of the database, table and mutex (named locks are server-wide,
//     and their names at most 64 characters). On PostgreSQL, an advisory lock's bigint
//     key: the first 8 bytes of a SHA-256 of the database, schema, table and mutex. A
//     session holds it until it lets it go or ends; JVM Simba neither takes it nor waits
//     for it.
//   - Pinned connections: a contention that may win, owns, waits or heads the queue keeps
//     a connection of the pool, and its server session, to itself (see Connections).
//   - What a backend remembers: per mutex, the highest version seen (the floor: see
//     Fencing token); per contention, the version and the database's now of its last
//     answer, its tenure's token, and another owner's row as first seen (see When the
//     database's clock steps).
//
// What each connection holds:
//
//   - The owner's pinned connection holds the named lock, taken by the tenure's first
//     UPDATE itself (or by the read just before it), so before that UPDATE commits
//     (whoever reads the row naming the owner finds the lock taken), and let go by the
//     release. While it holds the lock it runs only the release: a
//     statement cut short by its context closes its connection, and the server would let
//     the lock go with the session ahead of the release, waking a waiter that finds the
//     row still owned. Renewals and reads borrow a connection from the pool.
//   - A waiter's pinned connection is blocked in mysqlWaitLock or pgWaitLock, 30 s at a
//     time; the waiter's polls borrow from the pool meanwhile. A waiter that stops has
//     its wait interrupted from a pool connection (mysqlInterrupt, KILL QUERY;
//     pgInterrupt, pg_cancel_backend), which leaves the pinned one usable.
//   - The head of the queue (a contender that holds the lock while someone without it
//     owns the row) holds the lock on its pinned connection and polls through the pool.
//   - Every other statement borrows a pool connection for its length.
//
// A contention's statements and their parameters, in order. The table, the ttl, ttl +
// transition and the transition's parity are in the statement's text. floor is the
// highest version the backend has seen for the mutex; expected, the version of the
// contention's last answer while it knows its tenure (NULL: renew nothing; only then is a
// free row taken); stale, the
// version of another owner's row watched unchanged for longer than its lease (NULL:
// none). On MariaDB a statement on the table begins with SET STATEMENT max_statement_time
// = s FOR (mysqlBoundPrefix; s is nine tenths of the time left, to two significant digits
// of milliseconds, so that successive calls send the same text); on PostgreSQL its first parameter, limit, is its
// lock_timeout in ms (pgBound; NULL: the session's).
//
//	statement            parameters
//	mysqlAcquire         contender, expected, floor, contender, mutex, floor, contender,
//	                     expected, expected, stale
//	mysqlAcquireLocking  mysqlAcquire's, then lock name twice
//	mysqlAcquireHolding  mysqlAcquire's, then lock name, the pinned session's ID
//	mysqlReadLocking     lock name, mutex
//	mysqlReadTrying      lock name three times, mutex
//	mysqlEnsureRow       mutex, floor
//	mysqlRelease         mutex, contender, version
//	mysqlReleaseUnlock   lock name, mutex, contender, version
//	mysqlWaitLock        lock name, timeout in s (30)
//	mysqlUnlock          lock name
//	mysqlInterrupt       none: the waiter's session ID (CONNECTION_ID) is in the text
//	pgAcquire            limit, floor, contender, expected, mutex, stale
//	pgAcquireLocking     limit, floor, contender, expected, mutex, stale, key
//	pgReadLocking        limit, key, mutex
//	pgEnsureRow          limit, mutex, floor
//	pgRelease            limit, mutex, contender, version
//	pgReleaseUnlock      limit, mutex, contender, version, key
//	pgWaitLock           key, timeout in s (30)
//	pgUnlock, pgSettle   key
//	pgInterrupt          none: the waiter's pg_backend_pid() is in the text
//
// Without the hand-over, contentions read with mysqlRead and pgRead (the same columns, no
// lock); so do retrievers (Lookup) and ReleaseOwner.
//
// (1) Alone: A acquires, renews and releases. On MySQL and MariaDB:
//
//  1. A pins a connection of the pool and runs mysqlAcquireLocking on it, with expected
//     NULL: the row is free (its transition_at is before now; a released row's is 0), so
//     the condition goes on to take the lock: IS_USED_LOCK(name) is not A's session, and
//     GET_LOCK(name, 0) answers 1 (A's session holds the lock now, before the UPDATE
//     commits; GET_LOCK is re-entrant, so it is never called on a session that holds the
//     lock already). The UPDATE sets version to max(version, floor) + 1, acquired_at to
//     now, ttl_at to now + ttl, less 0 or 1 ms (a new tenure's even mark), transition_at
//     to now + ttl + transition and owner_id to A. The answer says that 1 row changed,
//     and its LAST_INSERT_ID holds the version found (bits 32 and up), 0 for a new tenure
//     (bit 31) and the low 31 bits of now. A's token is the new version; no read follows.
//     At the mutex's first use there is no row: the UPDATE changes nothing,
//     mysqlReadLocking finds nothing, mysqlEnsureRow creates the row (no owner,
//     acquired_at now, version the highest known), and mysqlAcquireLocking runs again.
//  2. A renews at its contend period, a little before ttl_at: mysqlAcquire (the same
//     UPDATE, which does not touch the lock) on a pool connection, with A's last version
//     as expected. The row is A's at that version and its transition_at is after now: the
//     same writes, but ttl_at carries a renewal's odd mark, and LAST_INSERT_ID's bit 31
//     is set. The tenure goes on with its token; the version is one more.
//  3. A releases on its pinned connection: mysqlReleaseUnlock, at A's last version, sets
//     acquired_at to now, ttl_at and transition_at to 0, owner_id to the empty string and
//     version to one more, and RELEASE_LOCK(name) in its SET lets the lock go: 1 row
//     changed, LAST_INSERT_ID 1. The connection goes back to the pool.
//
// A cycle is two statements, each with its commit. Where the session logs statements as
// text (binlog_format=STATEMENT, for which GET_LOCK and RELEASE_LOCK in an UPDATE are
// unsafe), it is four: A begins with mysqlReadTrying on its pinned connection (a SELECT,
// which is not logged: it tries the lock as step 1 does, then reads IS_USED_LOCK(name)
// and CONNECTION_ID(), and the row), then mysqlAcquire on a pool connection; the release
// is mysqlRelease (the same UPDATE without RELEASE_LOCK) and then mysqlUnlock (SELECT
// RELEASE_LOCK(name), with CONNECTION_ID(): a tenure begun with mysqlAcquireLocking did
// not learn its session's ID, which a later wait needs to be interrupted).
//
// On PostgreSQL a cycle is two statements too. Step 1 is pgAcquireTaking on the pinned
// connection, whose MATERIALIZED CTE runs pg_try_advisory_lock(key) and pg_backend_pid()
// once, and whose UPDATE begins a new tenure only if the try took the lock (a renewal
// does not need it). It answers whether it did, the pid, and the new version, the mark (1
// for a renewal, 0 for a new tenure, read back from ttl_at), now and the version found
// (which the SET clause kept in the transaction's setting simba.found; RETURNING reads
// only the new row), or NULLs when the UPDATE matched nothing, after which a read of the
// row follows. Where the mutex was contended at the contention's last try, step 1 is
// pgAcquireLocking, which also answers the row as its snapshot has it when the UPDATE
// matched nothing (see (2)); its plan costs the server more even when that part does not
// run. A renewal is pgAcquire, the same UPDATE with the same answer,
// on a pool connection. The release is pgReleaseUnlock on the pinned connection: pgRelease,
// whose RETURNING takes the lock again at transaction level
// (pg_try_advisory_xact_lock(key), at once: the session holds it) and then lets the
// session-level hold go (pg_advisory_unlock(key)). The lock is free once the release's
// transaction has ended; its commit does not wait for the disk (see PostgreSQL), while
// the acquisition's does.
//
// (2) Contended: A owns, B waits, A releases, B takes over. On MySQL and MariaDB:
//
//  1. A owns the row, and its pinned session holds the lock, as in (1).
//  2. B pins a connection and runs mysqlAcquireLocking: the row is A's, so it matches
//     nothing, and tries no lock. Its answer tells no more, so B reads on its pinned
//     connection: mysqlReadLocking answers owner A, the times, the version, now, the
//     session that holds the lock (A's, from IS_USED_LOCK) and B's own (CONNECTION_ID). B's
//     Acquire answers that A owns until transition_at, and B starts waiting on its pinned
//     connection: mysqlWaitLock, GET_LOCK(name, 30), which the server queues (1 when
//     taken; 0 after 30 s, and B waits again). B's service still contends at its contend
//     period, as any non-owner does; each such attempt reads the row on a pool connection
//     (mysqlReadLocking).
//  3. A renews as in (1); neither the lock nor B notices.
//  4. A releases: mysqlReleaseUnlock on A's pinned connection. InnoDB locks the row
//     before the SET runs RELEASE_LOCK, which grants the lock to a waiter: B's GET_LOCK
//     answers 1 while A's UPDATE commits.
//  5. B's waiting goroutine records that B holds the lock and wakes B's service, which
//     contends at once: mysqlAcquireHolding on a pool connection (mysqlAcquire that
//     begins a tenure only while B's pinned session holds the lock). If A's release has not
//     committed yet, the UPDATE waits for the row's lock and then reads the row as
//     committed: free. It takes the row as in (1), a new tenure, whose token is the
//     version it writes: A's renewals wrote up to some version r, A's release r + 1, and
//     B's token is r + 2 (or floor + 1, if larger).
//  6. B owns and holds the lock, as A did. Other waiters stay queued in GET_LOCK; the
//     next release grants the lock to one of them.
//  7. A contends again (a Locker that acquires again as soon as it released, say). Its
//     turn was contended: it came through a wait (or, in another case, a try found the
//     lock taken), which the backend remembers for the mutex. So A begins with
//     mysqlReadTrying on its pinned connection rather than mysqlAcquireLocking:
//     GET_LOCK(name, 0) answers 0, B holds the lock, and the read answers the row, B's
//     session as the holder and A's own. The row is B's, or still free if B's UPDATE has
//     not committed (then the first rule of the queue, below, applies); either way no
//     UPDATE of A's locks the row in B's way, and A waits as B did in step 2. An
//     acquisition whose try takes the lock at once (nobody held it) ends the contended
//     spell: the next one begins with mysqlAcquireLocking again.
//
// A hand-over is a section of four statements when contenders take turns: the waiter's
// wait, its acquire and its release, and the next contender's read. Two of them commit,
// and those two are in series: the waiter's acquire waits for the release to commit.
//
// A B without a pinned connection (the budget spent: see Connections; or
// WithHandOver(false)) does not wait for the lock: it polls on its contend period, as J
// does in (3), and takes the row at its first attempt after A's release, up to ttl +
// transition + 1 s later.
//
// On PostgreSQL, B's first statement is pgAcquireLocking: the try fails, so the UPDATE
// leaves the row alone (a new tenure needs the lock, and the row is not B's to renew),
// and it answers 0, the pid, NULLs for the UPDATE, and the row as the statement's
// snapshot has it, with the columns of pgReadLocking (the lock's holder when the row is
// free, from pg_locks): no read follows. B waits with pgWaitLock: pg_advisory_lock(key)
// under a lock_timeout of 30 s, whose error makes B let the lock go with pgSettle, in
// case it was granted at that very moment, and wait again. A's release is one statement
// on A's pinned connection, pgReleaseUnlock: it lets the session-level hold go, but the
// transaction-level hold it took just before keeps the lock taken until the release's
// transaction ends, and PostgreSQL lets a transaction's locks go after its commit is
// visible to every new snapshot. So B is granted the lock only once the release has
// committed. It must not be earlier: a PostgreSQL UPDATE checks its WHERE against the
// row as its snapshot has it and passes over a row whose change is not committed yet
// (it waits for, and checks again, only a row whose old version matched), so a B woken
// before the release committed would find A's row and not wait for it. B's pgAcquire,
// on a pool connection, finds the row free. A, contending again, runs pgAcquireLocking as
// B did in step 2 (one statement answers all MySQL's read would). A hand-over is a
// section of four statements, as on MySQL; one of its two commits waits for the disk.
// Advisory locks are not transactional: PostgreSQL may grant a waiter the lock and then
// fail its statement on a cancellation or lock_timeout that struck at that moment, and an
// acquire that tried the lock keeps it when its UPDATE then fails. So after a wait or an
// acquire that ended in an error, the contention lets the lock go if its session holds it
// (pgSettle), before it tries the lock again or returns the connection to the pool: a
// session that kept it would take it again at once, re-entrantly, and starve the queue. Advisory locks are
// shared by every application of a database: a key another application happens to use
// costs hand-overs their speed, never safety. (LISTEN/NOTIFY would need the driver's own
// API to receive notifications, which database/sql does not have.)
//
// Two rules keep the queue in order when the row and the lock disagree:
//
//   - A contender that finds the row free while another session holds the lock (most
//     likely a waiter just woken to take it) joins the queue and, within the same
//     acquisition, leaves the row to that session for 25 ms, or four of its round trips
//     if longer, so that newcomers do not take the row from the head of the queue. The
//     lock coming its way ends the wait. Otherwise, when that time is up, it reads the
//     row again (mysqlReadLocking, pgReadLocking, which tell the lock's holder when the
//     row is free): a row the holder took ends the acquisition; if the lock has changed
//     hands, the new holder was woken in turn and gets the same, up to four holders; a
//     holder that kept the lock all that time without taking the row is slow, and the
//     contender runs its UPDATE.
//   - A contender that holds the lock but finds another owner in the row heads the queue:
//     it polls on its contend period, and the others wait behind it instead of polling.
//     That owner provably holds no lock (a JVM contender, or one that won the row while
//     the head was slow), so the head passes its place on (mysqlUnlock, then
//     mysqlWaitLock again), once per such owner (and again after ttl + transition if it
//     is still there), until the lock reaches the owner and the chain of hand-overs is
//     whole again. Nobody spins: every pass costs one attempt per waiter and change of
//     owner.
//
// (3) What a JVM Simba contender J of the same mutex sees. Each of J's attempts is one
// transaction: its UPDATE (take the row if its transition_at is before now, or renew it
// if it is J's and after now), then a read of the row and the database's now. J takes no
// named lock and waits for none; it polls on its contend period, transition_at - now and
// a jitter of -200 ms to +1 s.
//
//   - While A owns, J's UPDATE matches nothing, and its read shows A, ttl_at (perhaps a
//     millisecond early: the renewal mark, which J only reports) and transition_at. A
//     renews before ttl_at, so each of J's attempts finds a later transition_at, and J
//     waits again. B's wait changes nothing J sees.
//   - A's release (step 4 of (2)) tells J nothing. J's next attempt comes after A's last
//     transition_at, up to ttl + transition + 1 s after the release; by then B owns (step
//     5 follows within a round trip or two), and J sees B as it saw A.
//   - If J's attempt falls between A's release and B's UPDATE, J takes the free row with
//     a write of its own: version + 1, times from its own clock, no mark. B's UPDATE then
//     matches nothing, its read shows J, an owner without the lock, and B, now the head
//     of the queue, passes its place on as above; whoever holds the lock in the end polls
//     on J's transition_at. J's release (every time 0, an empty owner_id, version + 1,
//     where owner_id is J's) wakes nobody: the head takes the row at its next attempt, up
//     to ttl + transition + 1 s later, and holds the lock as the owner; the chain is
//     whole again.
//   - A row J creates (at its first use, when there is none) starts at version 0; the
//     backend's floor keeps tokens above those handed out before (see Fencing token).
//
// (4) A dies while it owns. Its process ends, the server ends its sessions, and the named
// lock goes with A's: a session's named locks and session-level advisory locks end with
// it. Nothing is written to the table: the row names A until its transition_at.
//
//  1. The server grants the lock to a waiter, B, whose wait answers 1: B contends at
//     once. mysqlAcquire (pgAcquire) matches nothing, as the row is A's and its
//     transition window has not ended; mysqlReadLocking (pgReadLocking) shows A.
//  2. B holds the lock and finds A, who holds none: B passes its place on, once for A
//     (mysqlUnlock, then mysqlWaitLock); the next waiter does the same, and the last one
//     to get the lock keeps it and heads the queue. Everyone's next attempt is due at A's
//     transition_at, with the contend period's jitter.
//  3. Once transition_at has passed, the row is free to anyone's UPDATE. The head takes
//     it at its next attempt, with mysqlAcquire (it holds the lock); its token is the next
//     version.
//     A waiter whose attempt comes first finds the row free while the head holds the
//     lock, leaves it to the head for a while, and takes it if the head has not; the head
//     then finds an owner without the lock and passes its place on, so that the lock
//     travels to the new owner, which waits for it. J, polling on the same transition_at,
//     may win that race as well.
//
// If A's session outlives its process (a host cut off without closing its sockets, until
// the server's timeouts end the session), or A is only paused, the lock stays with A's
// session: the waits time out and start again, and nobody is woken. The lease lapses all
// the same: at transition_at a waiter's attempt finds the row free, leaves it to the
// lock's holder for a while, and takes it without the lock. A paused A that comes back
// renews at its last version, which has changed: its UPDATE matches nothing, its read
// shows the new owner, and A, holding the lock with an owner without it in the row,
// passes it on. A contender that has watched A's row unchanged for longer than its lease
// takes it even if the database's clock, stepped back, says it is still held (see When
// the database's clock steps).
//
// The lock is only a hint. Ownership, tokens and safety come from the table alone: a
// contender that holds the lock still needs the UPDATE to match, and one that waits for
// the lock still polls on its contend period, so a lost wake-up, a lock held by a paused
// process, a JVM owner or a server restart cost time, never exclusion. After a server
// restart the waiters' connections are gone; each waits again from its next attempt, and
// an owner takes the lock again at its next renewal.
//
// # Many held mutexes
//
// The backend batches renewals (backend.RenewalBatcher): simba then has the owners of a
// process renew at the same instants, and the renewals that reach the backend together
// go in one statement per ttl and transition, on a connection of the pool. On MySQL and
// MariaDB it is mysqlRenewMany, an UPDATE of the rows named by mutex, owner and version,
// which finds each by the key and so reads and locks no other row, whose LAST_INSERT_ID
// is the database's now; on PostgreSQL pgRenewMany, with the rows as one JSON argument,
// RETURNING the mutexes renewed. Each row gets the writes of the renewal in (1) step 2,
// and JVM Simba's format is unchanged. A batch goes once no renewal has come for 2 ms,
// once its first has waited 50 ms (or half its deadline), or at 2,000 renewals, under
// the latest of their deadlines; each caller returns by its own.
// A renewal the statement did not renew (its row taken over, released, or past its
// transition window) is made again with its contention's own acquire statement, which
// tells why; so is every renewal of a statement the server failed, and of a MySQL
// statement that renewed fewer rows than it was given (its answer does not tell which).
// A renewal on a pinned connection, or one that must take a row over, does not wait for
// a batch. A process holding N mutexes makes about N/2,000 statements per renewal
// period, not N.
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
//     idle, and otherwise borrow one (a waiter's pinned connection is busy waiting, and
//     an owner's runs only the release: see Hand-over, end to end); a contention makes
//     one statement at a time;
//   - one for a moment when a waiting contention stops (to interrupt its wait with KILL
//     QUERY, which keeps its connection usable), and one for each Prune transaction.
//
// The hand-over never pins the pool's last connection: with a pool of n
// (sql.DB.SetMaxOpenConns), it holds at most n-1, whatever the budget, and contentions
// beyond that poll. With the default, an application whose pool is 10 connections keeps 8
// whatever the number of mutexes it holds, less the statements in flight; a larger budget
// wakes more waiters at once on release, and costs as many connections. Retrievers pin
// nothing. Size the server's max_connections for every process's pool.
// WithHandOver(false) holds nothing: every statement borrows a connection from the pool
// and returns it. Turn the hand-over off, too, behind a proxy that multiplexes client
// sessions over server sessions (ProxySQL, MaxScale in some modes): named locks and KILL
// QUERY belong to server sessions.
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
// The acquire is one UPDATE ... RETURNING, one round trip, which also takes the advisory
// lock and, when it matches nothing on a contended mutex, reads the row; the release lets the advisory lock go
// itself once it has committed (see Hand-over, end to end); the release's statement,
// tokens, floors and pruning are otherwise MySQL's. The release's commit does not
// wait for the WAL to reach the disk (it turns synchronous_commit off for its own
// transaction, as it sets lock_timeout): one disk flush per cycle instead of two. A
// release that a crash of the database loses leaves the row to its former owner's lease,
// which delays the next owner and never makes two; the commit is visible at once all the
// same, and every acquisition's commit waits for the WAL up to its own record, and so for
// every release it could have read.
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
// Hand-over: session-level advisory locks play the part of GET_LOCK, with the same queue
// and the same rules; Hand-over, end to end gives the statements.
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
// # Semaphores and read-write locks
//
// The backend keeps simba.Semaphore and simba.RWMutex holds (backend.Holder) in a table of
// their own beside the mutex table, never in it: simba_mutex_hold (the mutex table's name
// and "_hold", in its schema), which JVM Simba does not know. CreateTable creates it with
// the mutex table; HoldDDL returns its statement for a migration. A semaphore's or
// read-write lock's start checks that it has every column, and refuses (simba.ErrRefused,
// saying how to create it) when it is missing. Its columns: kind (1: semaphore, 2:
// read-write lock: kinds apart), name varchar(66) and holder varchar(128), the primary key
// with kind; shared (a read hold); permits; place and token, bigint; acquired_at, ttl_at
// and expires_at, epoch milliseconds of the database's clock (UTC: no folds, as no JVM
// reader needs them). Its rows:
//
//   - the name's row, holder empty: permits is a semaphore's count, place the last place in
//     the queue or token handed out for the name;
//   - a holder's, holder its contender ID: place its place in the queue, token its
//     fencing token (above 0), acquired_at its admission, ttl_at and expires_at the ends
//     of its TTL and of its transition window;
//   - a waiter's: place its place in the queue, token 0, expires_at the end of its
//     patience (below).
//
// Every acquisition decides in one transaction: it locks the name's row (SELECT ... FOR
// UPDATE, created first, outside the transaction, when missing), which serializes the
// deciders of a name, reads every row of the name with the database's now, drops the
// holders whose transition window has ended and the waiters whose patience has, and then:
// renews the contender's hold if it has one (a new contention that finds its ID holding,
// an earlier release lost, begins a new hold with a new token); admits it if it fits, first
// come, first served; and queues it otherwise, at the end unless it has a place already.
// A semaphore's waiter fits when it and every waiter ahead of it fit in the permits left;
// a reader when no writer holds and none waits ahead of it; a writer when nobody holds and
// it is first. A downgrade's read hold (backend.Hold.Beside) is admitted at once beside the
// write hold of its writer while that is the only hold; a writer queued before it then
// waits until that read hold is gone too, as it waits for any reader (Curator's
// CURATOR-621 let it in). An admission's token is the name's counter, incremented in the
// same transaction: above every token of the name before, in every kind of hold. The
// name's rows are never deleted (Prune leaves the table alone), so tokens never repeat.
// A semaphore's permit count is the name's row's: an acquisition with another count is
// refused (simba.ErrRefused) while anyone holds or waits, and sets it otherwise.
//
// Answers are counted from the database's now as a mutex row's are: the contender's own
// hold, or for a waiter the hold whose transition window ends first (none when nobody
// holds). A waiter is expected back by then and retries then, as simba's contend period
// has it, so its patience is twice its TTL and transition and 2s past that end (past the
// read, when nobody holds): a waiter silent longer is taken for dead and dropped, never
// blocking live ones. The statement that locks the name's row is bounded on the server by
// the caller's deadline (MariaDB's max_statement_time; on PostgreSQL lock_timeout, for the
// whole transaction).
//
// A release wakes the waiters it lets in, in every process (Hand-over of holds). A holder
// whose answer shows the database's clock stepping forward gives its hold up at once, as a
// mutex's owner does (see When the database's clock steps); a step back is reported, but
// unlike a mutex's waiter a hold's does not bound its wait by its own clock: a holder that
// vanishes just after a step back keeps the others out for the step's length more.
//
// # Hand-over of holds
//
// A release wakes, within a few round trips, the waiters it lets in, rather than leaving
// them to try when the hold they were told of could lapse. In its own process it wakes
// the backend's contentions of the name directly. Across processes:
//
//   - A queued waiter parks: on a connection of its own, pinned from the hand-over's
//     budget (WithHandOverConnections, shared with the mutexes'), it runs a wait marked
//     with a digest of the table, the kind, the name and its contender ID, for its ttl +
//     transition (at most 30s), and again after that. On PostgreSQL the wait is a sleep,
//     SELECT /*simba-wake:<digest>*/ 0 FROM pg_sleep(s); on MySQL and MariaDB it waits
//     for the park lock, SELECT /*simba-wake:<digest>*/ GET_LOCK('simba-park:<random>',
//     s): a named lock the backend holds on one more connection of the budget while any
//     of its waiters parks. Not SLEEP(s): on MariaDB a KILL that reaches a SLEEP as it
//     ends (a second wake of one waiter, or a wake as the sleep runs out) holds up that
//     KILL and every sleep on the server for a second, which made one release of a
//     hundred take one to two and a half seconds with four processes on a semaphore
//     (TestSemaphoreWakesKeepTheCallTimeout); a KILL of a lock wait ends it within
//     milliseconds, however many arrive. A wait that takes the park lock (its holder's
//     connection is gone) ends the parking; the next holds the lock anew.
//   - Once the server shows the sleep running (information_schema.PROCESSLIST,
//     pg_stat_activity), the waiter reads the name's rows. If it fits now, by the rule a
//     release wakes by (below), it ends the sleep and tries at once; other changes, a
//     waiter queuing behind it say, leave it asleep. A release that committed after that
//     read finds the sleep running, so no wake is lost between a decision and its
//     parking.
//   - A release that removed a row reads the name's rows and ends the sleeps of the
//     waiters that fit now, in order (a semaphore's up to the permits free; a read-write
//     lock's readers up to the first writer, or that writer), found by their mark: KILL
//     QUERY ID on MariaDB (a statement's ID, never reused), KILL QUERY on MySQL (a
//     session's), pg_cancel_backend on PostgreSQL in the statement that finds them.
//     Waiters that do not fit are left asleep: no storm of retries.
//
// The wake is a hint: the table alone admits, so a wake lost or misdirected costs time,
// never safety, and polling stays the fallback: a waiter not woken tries again when the
// first hold it was told of could lapse, within ttl + transition + 1s of an early release.
// Wakes are lost where the releaser's user may not see or end the waiter's statement
// (another MySQL user, without PROCESS and CONNECTION_ADMIN; a PostgreSQL role it is not a
// member of), where the hand-over's connections are all in use (a backend parks as many
// waiters at once as WithHandOverConnections allows, less the mutexes' pinned connections
// and, on MySQL, the park lock's; the others poll), and where the server does not show
// running statements (PostgreSQL with track_activities off: the waiter then polls only).
// A waiter that dies parks no more (its session ends with it, at the latest when its wait
// does) and is dropped after its patience, as before. The parking's connection is never
// returned to the pool when the waiter is admitted or stops, as a release that found its
// wait may end the next statement of the session (MySQL's KILL QUERY names a session):
// the backend keeps one, in its place in the budget, for its next parking, where such a
// stray interruption only wakes that waiter early, and closes the others (a new
// connection for each parking cost PostgreSQL, which starts a server process for each,
// 26 ms a hand-over). A mutex's hand-over that finds the budget full takes the kept one's
// place; Close closes it. StopContend and Close interrupt the wait first (within a
// second, or close the connection under it) so that it does not go on waiting on the
// server. The wait belongs to no call and holds no caller's deadline: an acquisition that
// ends stops its contention, which ends the wait.
//
// Not taken: waiting on the holders' named locks, as a mutex's waiters wait on the
// owner's, would need a waiter to wait on every holder's lock at once (a pinned connection
// each); database/sql has no LISTEN (pgx's WaitForNotification is a driver's API, and
// MySQL has nothing like it); and a sleep guarded in its own statement (SELECT SLEEP(s)
// FROM the hold table WHERE ...) would hold the table's metadata lock while it sleeps, so
// that an ALTER TABLE waiting for it would hold up every statement on the table.
//
// # Owner values
//
// The backend keeps owner values (simba.WithOwnerValue; backend.ValueKeeper) for mutexes
// in a table of its own beside the mutex table, never in it: simba_mutex_value (the mutex
// table's name and "_value", in its schema), which JVM Simba does not know; its columns
// stay as they are, and JVM contenders keep working. CreateTable creates it; ValueDDL
// returns its statement for a migration. Its columns: mutex varchar(66), the primary key;
// owner_id varchar(128), the tenure's owner; token, the tenure's fencing token (the version
// its first write gave the row); value varchar(1024), the value. One row per mutex, the
// value of the last tenure begun with one.
//
// A contender with a value writes it once per tenure, in one statement just before the
// acquisition that may begin the tenure (while its contention knows no tenure of its own):
// mysqlValueAhead (INSERT INTO the value table ... SELECT mutex, the contender,
// GREATEST(version, floor) + 1, the value FROM the mutex table WHERE mutex = ? AND the row
// is free or stale, as the acquire statement takes it ... ON DUPLICATE KEY UPDATE
// owner_id, token, value), pgValueAhead (the same with ON CONFLICT (mutex) DO UPDATE). Its
// token is the version the acquisition will write if nothing comes between, so the
// acquisition's commit makes the value its tenure's: no read finds the tenure without it.
// Where the row is not free it writes nothing; where someone took the row between the
// two statements, the value row names a version that went to another owner, which no
// read matches. A tenure whose acquisition found another version than the one written
// ahead (or the row missing: at the mutex's first use the write ahead is made again once
// the row is created) gets its value right after the acquisition, before any renewal,
// with mysqlKeepValue (INSERT ... SELECT mutex, owner_id, token, value FROM the mutex table
// WHERE mutex = ? AND owner_id = ? AND version = ? ON DUPLICATE KEY UPDATE ...),
// pgKeepValue, at the version of the acquisition's answer; readers meanwhile find none. A
// tenure whose write failed is not renewed before the write succeeds. Renewals write
// nothing more, and a contender without a value writes nothing (but see below): its
// statements are as they were. A contender with a value that waits pays the write ahead
// at each attempt that may begin a tenure.
//
// Every read of the row (mysqlRead, mysqlReadLocking, mysqlReadTrying, pgRead,
// pgReadLocking, pgAcquireLocking's) reads the value in the same statement, so from the
// same snapshot, with scalar subqueries (mysqlValue, pgValue): the value row's value and
// token when it names the row's owner and the row's tenure, else the empty string and 0.
// So a read tells the token of a tenure with a value (Record.Token), which the row alone
// does not (its version moves with every renewal); a tenure without one reads token 0,
// unless it is the reading contention's own. The tenure is
// told by the renewal mark (see Fencing token): the row's last write began a tenure
// (even) and the value row's token is the row's version, or it renewed one (odd) and the
// token is below it. So a value is never answered for another tenure: not for a later
// tenure of another contender (another owner_id), nor for one of the same ID (a new
// tenure's first write is at a version above the token, and a contender with a value
// writes its own before it renews). Two cases of the same contender ID need one statement
// more:
//
//   - A contender whose earlier lifecycle (a process that stopped without releasing)
//     still owns the row takes that tenure over with a renewal (see Fencing token). A
//     contender with a value first voids the earlier lifecycle's value row (token 0, no
//     value) with mysqlKeepValue at the version it read.
//   - A contender ID that had a value and comes back without one would find its earlier
//     value answered with its renewals. When a contender without a value has begun a
//     tenure (or before it takes over an earlier lifecycle's), a backend deletes the
//     value row that names the contender (mysqlClearValue, pgClearValue: DELETE ...
//     WHERE mutex = ? AND owner_id = ?), once per mutex and contender: one statement per
//     process and mutex, none for later tenures. A refusal (no DELETE privilege) is not
//     retried.
//
// JVM Simba's writes carry no renewal mark, so a JVM contender's rows read as new tenures
// and show no value, unless its transition is an odd number of milliseconds and it uses
// the ID of a simba contender that had a value. The value row is removed by nothing else:
// Prune leaves the value table alone (a row is at most a kilobyte per mutex). Start looks
// for the table once per backend; a contender with a value is refused
// (simba.ErrRefused, saying how to create the table) at its start when it is missing, or
// the session may not read it, and a backend that did not find it reads no values.
//
// # Slots
//
// A Scheduler's slots (backend.SlotRecorder) are kept in a table of their own beside the
// mutex table: simba_mutex_slot (the mutex table's name and "_slot"), which JVM Simba does
// not know. CreateTable creates it; SlotDDL returns its statement. Its columns: mutex
// varchar(66), the primary key; at bigint, the Unix nanoseconds of the last slot started;
// token, the fencing token of the tenure that started it. Nothing removes a row (a few
// bytes per mutex; Prune leaves the table alone).
//
// LastSlot reads the row (mysqlLastSlot, pgLastSlot: SELECT at, token ... WHERE mutex = ?;
// no row: the zero Slot). ClaimSlot is one statement: on MySQL and MariaDB,
// mysqlClaimSlot, INSERT ... VALUES (mutex, at, token) ON DUPLICATE KEY UPDATE, whose
// assignments take the new at and token only if at is later and the token no smaller, and
// whose LAST_INSERT_ID answers 1 when it recorded the slot (rows affected would not tell,
// with clientFoundRows, an update from a duplicate left alone); on PostgreSQL,
// pgClaimSlot, INSERT ... ON CONFLICT (mutex) DO UPDATE ... WHERE the same condition, one
// row affected when it recorded it. A retry after a lost reply finds its own slot and
// answers false. Start looks for the table once per backend: where it is missing, the
// contentions do not implement backend.SlotRecorder, and a Scheduler runs its slots
// without recording them, as before.
//
// # Hand-offs
//
// An owner hands the mutex to a contender that waits for it (Service.HandOff;
// backend.HandOffer) through a table of its own beside the mutex table: simba_mutex_wait
// (the mutex table's name and "_wait"), which JVM Simba does not know. CreateTable creates
// it; WaitDDL returns its statement. Its columns: mutex varchar(66) and contender
// varchar(128), the primary key; value, the owner value the contender would keep; place,
// its place in the queue; ttl and lease, what its acquisitions ask for (ttl and ttl +
// transition, ms); expires_at, the end of its patience (epoch ms of the database's clock).
//
// A service's contender that finds another owner queues there (waitRegister: INSERT ...
// SELECT the next place ... ON DUPLICATE KEY UPDATE, on PostgreSQL ON CONFLICT DO UPDATE;
// a row that outlived its patience goes to the end), with a patience of twice its ttl +
// transition and 2s, and writes it again once half of that has passed while it waits; it
// leaves the queue (waitRemove) when it owns the mutex, releases or stops. It queues for
// the named lock first, so that a hand-off to a contender the table lists reaches it
// through the lock (below). A Locker's acquisition (Participant.WaitsOnly) never queues
// there and hands nothing off: its statements are as they were. Waiters lists the rows
// within their patience, by place (waitList). A waiter that dies is dropped after its
// patience.
//
// HandOff(to) is one transaction: it locks the mutex's row (handOffOwner, SELECT ... FOR
// UPDATE) and checks that the caller owns it at the version of its last answer with its
// transition window not ended (else simba.ErrNotOwner); locks to's row in the queue
// within its patience (handOffWaiter; else simba.ErrNotWaiting); gives the row to to as
// to's acquisition would write a new tenure (handOffGive: version max(version, floor) + 1,
// the times from to's ttl and lease, a new tenure's renewal mark); writes to's value with
// that version as the token (mysqlKeepValue, where the value table is); takes to off the
// queue and queues the caller at its end, with its own value. Nothing is changed when a
// check fails. The caller then lets the named lock go, as a release does, which wakes the
// first contender waiting for it (see Hand-over, end to end): to itself, or a waiter that
// finds to in the row, an owner without the lock, and passes it on, until it reaches to,
// within a round trip per waiter ahead; to's contentions in the same backend are woken
// directly. A waiter that passes the lock on queues for it again, perhaps behind the
// caller, which may so be woken before it when to releases: until the caller finds
// nobody before it in the queue (the table's), it leaves a free row to the first waiter,
// lets the lock go and waits for it again, a while at a time (yieldToEarlier). to's next
// Acquire finds the row naming it at a version it does not know, and takes it over as its
// own earlier tenure (see Fencing token): a renewal, whose version is its token, larger
// than the caller's. If to dies after the hand-off, its tenure lapses at
// its transition_at as any owner's that crashed. A to without the hand-over's named lock
// (WithHandOver(false), the budget spent) is not woken: it finds the row its own at its
// next attempt, up to the caller's ttl + transition later.
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
// leases lapse after ttl + transition. The statements it prepared stay on the pool's
// connections (at most eight each, on at most 256 connections used within ten minutes;
// others run them as text) until those close. The pool recovers from a server restart by
// itself (database/sql replaces dead connections); pinned connections are checked before
// each use and replaced.
package jdbc
