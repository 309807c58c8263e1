package jdbc

import "strings"

// Every SQL statement of the backend: first the MySQL/MariaDB dialect's, then PostgreSQL's
// (below, pg...). In the MySQL dialect %[1]s stands for the table name, already validated
// and quoted; ? are the statement's arguments; {end}, {shift}, {behind}, {writeShift} and
// {writeStart} for the clock's expressions (below). The storage format is JVM Simba's; the
// package doc (Hand-over, end to end) gives what these statements write beside it and
// their parameters.

// The clock. simba reads the database's now as mysqlNow, in UTC whatever the session's
// time zone. JVM Simba reads it as UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)): UTC turned into
// the session's local time and back, which in a daylight-saving fold (local times that
// come twice) picks one of the two instants: the earlier with a zone from the server's
// time zone tables, the later with SYSTEM. There, JVM Simba's clock reads a fold's length
// behind in its second pass, or ahead in its first. mysqlLead measures that. The acquire
// statement writes rows that JVM Simba reads right in its own clock, and every statement
// reads a row as lasting as long as its writer meant it to (mysqlEnd); the package doc
// (Clock) says under which conditions.

// A session whose time zone has no folds (UTC, a fixed offset, SYSTEM on a host in UTC)
// needs none of this, and the statements are much shorter without: mysqlPlainClock puts
// the plain expressions in their place, mysqlFoldingClock the ones below.
var (
	mysqlPlainClock = strings.NewReplacer("{end}", "CAST(transition_at AS SIGNED)", "{shift}", "0", "{behind}", "0",
		"{writeShift}", "0", "{writeStart}", mysqlNow)
	mysqlFoldingClock = strings.NewReplacer("{end}", mysqlEnd, "{shift}", mysqlShift, "{behind}", mysqlBehind,
		"{writeShift}", mysqlWriteShift, "{writeStart}", mysqlWriteStart)
)

// mysqlNow is the database's clock in epoch milliseconds. UTC_TIMESTAMP(3), like
// CURRENT_TIMESTAMP(3), is read once per statement (its start), so every use in one
// statement sees the same instant.
const mysqlNow = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)"

// mysqlLead(x), how far ahead of the instant x (epoch ms) JVM Simba's clock reads at x, in
// ms (0 outside folds), is written leadOf + x + leadMid + x + leadTo: x in seconds, read
// as local time and back. An instant the server cannot turn (past 2038 on MariaDB 10.11)
// counts as 0.
const (
	leadOf  = "(COALESCE(CAST(UNIX_TIMESTAMP(FROM_UNIXTIME(("
	leadMid = ") DIV 1000)) AS SIGNED) - CAST(("
	leadTo  = ") DIV 1000 AS SIGNED), 0) * 1000)"
)

// Writing. A row is written so that JVM Simba's clock, whatever it reads during the lease,
// finds it lasting at least as long as simba's: its times are shifted by the largest lead
// at the lease's two ends (mysqlWriteShift; the lease is assumed no longer than a fold).
// Where JVM Simba's clock reads behind for the whole lease, the row is written in that
// clock altogether (acquired_at too), as JVM Simba would write it, so that it reads it
// right; mysqlEnd then tells its readers. %[2]d and %[3]d stand for ttl and ttl +
// transition in ms.
const (
	mysqlLeadNow    = leadOf + mysqlNow + leadMid + mysqlNow + leadTo
	mysqlLeadEnd    = leadOf + mysqlNow + " + %[3]d" + leadMid + mysqlNow + " + %[3]d" + leadTo
	mysqlWriteShift = "GREATEST(" + mysqlLeadNow + ", " + mysqlLeadEnd + ")"
	mysqlWriteStart = mysqlNow + " + IF(" + mysqlLeadNow + " = " + mysqlLeadEnd + ", LEAST(" + mysqlLeadNow + ", 0), 0)"
)

// Reading. mysqlEnd is when a row's transition window really ends, in simba's clock:
// transition_at, moved by mysqlShift, which takes back what the two kinds of writers
// that do not write in simba's clock did:
//
//   - mysqlBehind: JVM Simba (or simba, above) writing while its clock read behind, in a
//     fold's second pass: acquired_at is then the first of two instants with the same
//     local time, the other one a fold's length later (30 minutes, 1 or 2 hours), and
//     the row may have been written at that later instant, unless it is still to come.
//   - mysqlAhead: simba writing around a fold whose first pass JVM Simba's clock reads
//     ahead in: acquired_at is then an instant JVM Simba's clock never reads (its lead is
//     above 0), or one within an hour before a fold whose first pass the row's
//     transition_at, less the lead, falls in (with leases no longer than an hour, no row
//     of JVM Simba's is both).
//
// Rows without an owner are not moved.
const (
	mysqlLeadAcquired = leadOf + "acquired_at" + leadMid + "acquired_at" + leadTo
	mysqlLeadHour     = leadOf + "acquired_at + 3600000" + leadMid + "acquired_at + 3600000" + leadTo
	mysqlLeadBack     = leadOf + "CAST(transition_at AS SIGNED) - " + mysqlLeadHour + leadMid +
		"CAST(transition_at AS SIGNED) - " + mysqlLeadHour + leadTo
	mysqlAhead = "IF(" + mysqlLeadAcquired + " > 0, " + mysqlLeadAcquired + ", IF(" + mysqlLeadHour + " > 0 AND " +
		mysqlLeadBack + " > 0, " + mysqlLeadHour + ", 0))"
	mysqlBehind = "IF(owner_id = '', 0, GREATEST(" +
		"IF(" + leadOf + "acquired_at + 1800000" + leadMid + "acquired_at + 1800000" + leadTo + " = -1800000 AND " +
		mysqlNow + " >= acquired_at + 1800000, 1800000, 0), " +
		"IF(" + mysqlLeadHour + " = -3600000 AND " + mysqlNow + " >= acquired_at + 3600000, 3600000, 0), " +
		"IF(" + leadOf + "acquired_at + 7200000" + leadMid + "acquired_at + 7200000" + leadTo + " = -7200000 AND " +
		mysqlNow + " >= acquired_at + 7200000, 7200000, 0)))"
	mysqlShift = "(IF(owner_id = '', 0, " + mysqlBehind + " - " + mysqlAhead + "))"
	mysqlEnd   = "(CAST(transition_at AS SIGNED) + " + mysqlShift + ")"
)

const (
	// mysqlEnsureRow creates a mutex's row with no owner if it is missing. JVM Simba
	// creates rows at version 0, which a row deleted and created again would repeat
	// tokens from; this one creates it at the highest version known for it: the
	// backend's own (an argument) or the one Prune kept in the floor row (mysqlFloor),
	// read with a shared lock so that a Prune under way is waited for. acquired_at
	// stamps the creation, so that Prune counts the row's age from then. A row created
	// meanwhile by someone else is left alone; unlike INSERT IGNORE, a value the column
	// cannot hold is an error in strict mode rather than a silent truncation.
	// Arguments: mutex, version.
	mysqlEnsureRow = "INSERT INTO %[1]s (mutex, acquired_at, ttl_at, transition_at, owner_id, version) " +
		"SELECT ?, " + mysqlNow + ", 0, 0, '', GREATEST(?, COALESCE(MAX(version), 0)) FROM %[1]s WHERE mutex = " + mysqlFloor +
		" LOCK IN SHARE MODE ON DUPLICATE KEY UPDATE version = version"

	// mysqlAcquire is JVM Simba's one conditional UPDATE, with this backend's additions
	// (see the package doc, Hand-over, end to end): it takes a free row when the
	// contention knows no tenure (mysqlTakesFree), or renews the contender's own only at
	// the exact version the contention last saw (nothing has come between, so the tenure
	// goes on). It also takes a row at the version the contention has watched unchanged
	// for longer than the row's lease, by the local clock (contention.stale): its owner
	// has stopped believing, even if the database's clock, stepped back since, says the
	// row is still held. version is assigned first, so that it reads the row as it was
	// whether the server assigns left to right (the MySQL default) or simultaneously
	// (MariaDB's SIMULTANEOUS_ASSIGNMENT). LAST_INSERT_ID hands back, in the OK packet,
	// the version found (bits 32 and up), 1 for a renewal or 0 for a new tenure (bit 31),
	// and the low 31 bits of the database's now in ms (contention.clock); ttl_at reads bit
	// 31 back (LAST_INSERT_ID without an argument) and leaves it in the row
	// (renewalMark). The new version is max(found, floor) + 1 (tokens stay above those of
	// a row deleted and created again lower); the caller, who knows the floor, works it
	// out from the version found, and so sees a version below the floor even when the
	// statement took the row above it. The version guard keeps int unsigned from
	// overflowing or, in non-strict mode, from sticking at its maximum and repeating a
	// token. %[2]d and %[3]d stand for ttl and ttl + transition in ms, %[4]d for the
	// parity of the transition.
	// Arguments: contender, expected version (NULL: none), floor, contender, mutex, floor,
	// contender, expected version, expected version, stale version (NULL: none).
	mysqlAcquire = mysqlAcquireUpdate + mysqlTakesFree + " OR version <=> ?)"

	// mysqlRenewMany renews many tenures in one UPDATE (renewals.go): each row that still
	// names its contender at the version its contention knows, within its transition
	// window, gets a renewal's writes, as mysqlAcquire's (version + 1, ttl_at marked as a
	// renewal's: renewalMark). Other rows are left alone. The batch's rows drive the
	// statement (STRAIGHT_JOIN), each finding its row by the key: the server reads, and in
	// REPEATABLE READ locks, only the rows named, whatever its statistics say. (With the
	// mutexes in an IN list instead, MariaDB 10.11 scanned the whole key, locking every
	// row of the table, once a batch named a fifth of the table's rows.) The rows come
	// sorted by mutex, the order the server reads them in as a rule; should two batches
	// still lock shared rows in opposite orders, InnoDB ends one with a deadlock error,
	// and its renewals are made one by one (sendOne). LAST_INSERT_ID hands back the low 31
	// bits of the database's now.
	// {rows} stands for " UNION ALL SELECT ?, ?, ?" for each row after the first.
	// Arguments: each row's mutex, contender and version.
	mysqlRenewMany = "UPDATE (SELECT ? AS m, ? AS o, ? AS v{rows}) AS batch STRAIGHT_JOIN %[1]s ON mutex = batch.m " +
		"SET version = version + 1 + LEAST(LAST_INSERT_ID(" + mysqlNow + " & 2147483647), 0), " +
		"ttl_at = " + mysqlNow + " + %[2]d + {writeShift} - (1 ^ %[4]d), " +
		"acquired_at = {writeStart}, " +
		"transition_at = " + mysqlNow + " + %[3]d + {writeShift} " +
		"WHERE owner_id = batch.o AND version = batch.v AND version < 4294967295 " +
		"AND {end} > " + mysqlNow

	// mysqlAcquireUpdate is the acquire's UPDATE up to the condition under which it begins
	// a new tenure: the row is free (mysqlTakesFree), or stale (the last argument).
	mysqlAcquireUpdate = "UPDATE %[1]s SET " +
		"version = GREATEST(LAST_INSERT_ID((version << 32) | " +
		"((owner_id = ? AND version <=> ? AND {end} > " + mysqlNow + ") << 31) | (" + mysqlNow + " & 2147483647)) >> 32, ?) + 1, " +
		"ttl_at = " + mysqlNow + " + %[2]d + {writeShift} - (((LAST_INSERT_ID() >> 31) & 1) ^ %[4]d), " +
		"acquired_at = {writeStart}, " +
		"transition_at = " + mysqlNow + " + %[3]d + {writeShift}, " +
		"owner_id = ? " +
		"WHERE mutex = ? AND GREATEST(version, ?) < 4294967295 " +
		"AND IF(owner_id = ? AND version <=> ?, {end} <> " + mysqlNow + ", "

	// mysqlAcquireLocking is mysqlAcquire that also takes the named lock, for a
	// contention on its pinned connection that does not hold it: one statement instead of
	// two. It begins a new tenure only if it takes the lock (mysqlTakeLock), which it does
	// before the UPDATE commits, so that anyone who reads the row naming this contender
	// finds the lock taken; a renewal does not need it, and does not try it. When it
	// matches nothing the answer does not tell whether another session holds the lock or
	// the row was not free: mysqlReadLocking, which follows, tells. GET_LOCK makes the
	// statement unsafe for statement-based binary logging, as RELEASE_LOCK does
	// mysqlReleaseUnlock's (schema.locksInUpdates).
	// Arguments: mysqlAcquire's, then lock name twice.
	mysqlAcquireLocking = mysqlAcquireUpdate + "(" + mysqlTakesFree + " OR version <=> ?) AND " + mysqlTakeLock + ")"

	// mysqlAcquireHolding is mysqlAcquire for a contention whose pinned connection holds
	// the named lock: it runs on the pool (only the release runs on the pinned connection:
	// see contention.run) and begins a new tenure only while the pinned session, whose ID
	// it is given, still holds the lock. A caller that gave it up (Stop cuts the round
	// under way short) leaves it to the server, which may run it after the contention let
	// the lock go, waking the next waiter: it then takes nothing, where mysqlAcquire would
	// take a row freed meanwhile for a contender that has stopped, and the woken waiter
	// would find it held. A renewal does not need the lock. IS_USED_LOCK makes the
	// statement unsafe for statement-based binary logging, as GET_LOCK does
	// mysqlAcquireLocking's. Arguments: mysqlAcquire's, then lock name and session ID.
	mysqlAcquireHolding = mysqlAcquireUpdate + "(" + mysqlTakesFree + " OR version <=> ?) AND IS_USED_LOCK(?) <=> ?)"

	// mysqlTakeLock takes the named lock if the session does not hold it already, and
	// holds if the session holds it then (mysqlReadTrying does the same). GET_LOCK is
	// re-entrant: on a session that held the lock already (whatever its contention
	// believes) it would hold it twice, and the one RELEASE_LOCK of the release would not
	// let it go. Arguments: lock name, lock name.
	mysqlTakeLock = "IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)) = 1"

	// mysqlFree holds when a row has no owner: its transition window has ended (a
	// released row's is 0).
	mysqlFree = "{end} < " + mysqlNow

	// mysqlTakesFree holds when the acquire statement takes a free row: only for a
	// contention that knows no tenure of its own (expected version NULL). A renewal's
	// statement may reach the row after its tenure's release (its caller gave up on it,
	// as Stop does with the round under way, and the server ran it all the same): taking
	// the row then would begin a tenure nobody believes in, and the waiters the release
	// woke would find it held. A renewal that finds the row free ends its tenure instead
	// (contention.afterUnmatched), and its contention takes the row with its next
	// statement. Arguments: expected version.
	mysqlTakesFree = "(? IS NULL AND " + mysqlFree + ")"

	// mysqlRead reads a row, its times as long as their writer meant them (mysqlEnd), and
	// the database's now, in one statement. Arguments: mutex.
	mysqlRead = "SELECT " + mysqlRowColumns + " FROM %[1]s WHERE mutex = ?"

	// mysqlRowColumns are a row's columns as mysqlRead reads them, and the owner value of
	// the row's tenure ({value}: mysqlValue, or '' without the value table).
	mysqlRowColumns = "owner_id, GREATEST(CAST(acquired_at AS SIGNED) + {behind}, 0), " +
		"GREATEST(CAST(ttl_at AS SIGNED) + {shift}, 0), GREATEST({end}, 0), version, " + mysqlNow + ", {value}"

	// mysqlReadLocking is mysqlRead that also tells the session that holds the row's
	// named lock (IS_USED_LOCK; 0 if none) and the session's own ID (CONNECTION_ID, for
	// an interruption of its wait): on a contention's pinned connection, whether it holds
	// the lock. Arguments: lock name, mutex.
	mysqlReadLocking = "SELECT " + mysqlRowColumns + ", COALESCE(IS_USED_LOCK(?), 0), CONNECTION_ID() FROM %[1]s WHERE mutex = ?"

	// mysqlReadTrying is mysqlReadLocking that first takes the named lock if it is free
	// and the session does not hold it (as mysqlTakeLock; its answer is not used): after
	// it, IS_USED_LOCK tells whether the session holds the lock, or who does. MySQL
	// evaluates the select list left to right. Nothing is tried when there is no row. A
	// SELECT is not logged, so it runs under statement-based binary logging too.
	// Arguments: lock name three times, mutex.
	mysqlReadTrying = "SELECT " + mysqlRowColumns + ", IF(IS_USED_LOCK(?) <=> CONNECTION_ID(), 1, GET_LOCK(?, 0)), " +
		"COALESCE(IS_USED_LOCK(?), 0), CONNECTION_ID() FROM %[1]s WHERE mutex = ?"

	// mysqlRelease is JVM Simba's release, further conditioned on the exact version the
	// releasing contention knows: a release that reaches the server late (abandoned by
	// its caller, delayed in a socket buffer or behind a row lock) cannot erase a later
	// tenure, whose acquisition changed the version.
	// Arguments: mutex, contender, version.
	mysqlRelease = "UPDATE %[1]s SET acquired_at = " + mysqlNow + ", ttl_at = 0, transition_at = 0, owner_id = '', " +
		"version = version + 1 WHERE mutex = ? AND owner_id = ? AND version = ?"

	// mysqlReleaseUnlock is mysqlRelease that also lets the session's named lock go, for
	// an owner holding it: one statement instead of two, and the waiter it wakes sends
	// its acquire while the release commits. InnoDB locks the row before the UPDATE
	// evaluates its SET, and an UPDATE reads the latest version of a row, waiting for its
	// lock; so that waiter's acquire waits for the release to commit and then reads the
	// row released (a consistent read meanwhile reads the owner's row, as before the
	// release began). PostgreSQL's UPDATE does not wait so: it checks its WHERE on the row
	// as of its snapshot and passes over a row whose change is not committed yet, so
	// pgReleaseUnlock keeps the lock until its commit instead. The answer's
	// LAST_INSERT_ID tells what RELEASE_LOCK said: 1 let go, 0 held by another session, 2
	// held by none (NULL); the row changed matches nothing and lets nothing go.
	// RELEASE_LOCK makes the statement unsafe for statement-based binary logging, so the
	// backend uses it only where the session logs rows or nothing (schema.locksInUpdates).
	// Arguments: lock name, mutex, contender, version.
	mysqlReleaseUnlock = "UPDATE %[1]s SET acquired_at = " + mysqlNow + ", ttl_at = 0, transition_at = 0, owner_id = '', " +
		"version = version + 1 + LEAST(LAST_INSERT_ID(COALESCE(RELEASE_LOCK(?), 2)), 0) " +
		"WHERE mutex = ? AND owner_id = ? AND version = ?"
)

// Pruning: deleting the rows of mutexes that have had no owner for a while (Prune). The
// versions of the rows deleted live on in the floor row, whose mutex is the empty string
// (a name neither simba nor JVM Simba allows): its version is the highest version of
// every row pruned, below which no row is created again.
const (
	// mysqlFloor is the mutex of the floor row.
	mysqlFloor = "''"

	// mysqlEnsureFloor creates the floor row if it is missing.
	mysqlEnsureFloor = "INSERT INTO %[1]s (mutex, acquired_at, ttl_at, transition_at, owner_id, version) " +
		"VALUES (" + mysqlFloor + ", 0, 0, 0, '', 0) ON DUPLICATE KEY UPDATE version = version"

	// mysqlLockFloor locks the floor row for a pruning transaction, before any row it
	// deletes: first uses read it with a shared lock before they create a row, so the
	// two never wait for each other in a cycle.
	mysqlLockFloor = "SELECT version FROM %[1]s WHERE mutex = " + mysqlFloor + " FOR UPDATE"

	// mysqlPrunable selects, and locks, up to a number of rows that have had no owner
	// for longer than an age: their transition window ended, or they were released or
	// created (both stamp acquired_at), more than the age ago. A row whose version
	// reached the column's maximum is kept: it can never be acquired again, and its
	// version in the floor row would leave every row created after it none to hand out.
	// Arguments: age ms, limit.
	mysqlPrunable = "SELECT mutex, version FROM %[1]s WHERE mutex <> " + mysqlFloor + " AND " + mysqlFree +
		" AND GREATEST(CAST(acquired_at AS SIGNED), {end}) + ? < " + mysqlNow + " AND version < 4294967295" +
		" ORDER BY mutex LIMIT ? FOR UPDATE"

	// mysqlRaiseFloor raises the floor row's version. Arguments: version.
	mysqlRaiseFloor = "UPDATE %[1]s SET version = GREATEST(version, ?) WHERE mutex = " + mysqlFloor

	// mysqlDelete deletes the rows named; %[2]s stands for as many placeholders.
	mysqlDelete = "DELETE FROM %[1]s WHERE mutex IN (%[2]s)"
)

// Named locks: hints for a fast hand-over, never a condition of ownership (see the package
// doc, Hand-over, end to end).
const (
	// mysqlWaitLock waits until the named lock is free and takes it: 1 when taken, 0
	// after the timeout, NULL when interrupted. Arguments: lock name, timeout s.
	mysqlWaitLock = "SELECT GET_LOCK(?, ?)"

	// mysqlUnlock lets a named lock go, and tells the session's ID (a tenure begun with
	// mysqlAcquireLocking did not learn it, and a wait that follows needs it for its
	// interruption). Arguments: lock name.
	mysqlUnlock = "SELECT RELEASE_LOCK(?), CONNECTION_ID()"

	// mysqlInterrupt interrupts the statement a session is running, if any; %[1]d is the
	// session ID (an integer from CONNECTION_ID, so the text is safe). A session that
	// runs nothing is not affected, and its next statement runs normally.
	mysqlInterrupt = "KILL QUERY %[1]d"
)

// Bounding every statement on the server.
const (
	// mysqlBoundPrefix makes a MariaDB server give a statement up, row-lock waits
	// included, after %[1]s seconds.
	mysqlBoundPrefix = "SET STATEMENT max_statement_time = %[1]s FOR "
)

// Start-up checks and the schema.
const (
	// mysqlServer tells the database the connection uses, the server's version (to tell
	// MariaDB from MySQL), the character sets strings travel in, whether the server
	// refuses writes (a replica), the session's time zone (whether it has folds),
	// whether the session logs statements as text (see mysqlReleaseUnlock), and the
	// account the session's privileges are of (for a GRANT).
	mysqlServer = "SELECT COALESCE(DATABASE(), ''), VERSION(), @@character_set_client, @@character_set_connection, @@read_only, " +
		"@@session.time_zone, @@system_time_zone, @@log_bin AND @@session.binlog_format = 'STATEMENT', CURRENT_USER()"

	// mysqlColumns describes a table's columns. Arguments: schema, table.
	mysqlColumns = "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), " +
		"COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''), COLUMN_KEY, IS_NULLABLE " +
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"

	// mysqlMayUpdate and mysqlMayInsert write nothing, but the server checks them as it
	// would a real UPDATE and INSERT of the table: a user without the privilege is refused
	// (error 1142), and so is a read-only session (error 1792), which @@read_only, the
	// server's, does not tell. Arguments: none; %[1]s is the table.
	mysqlMayUpdate = "UPDATE %[1]s SET version = version WHERE FALSE"
	mysqlMayInsert = "INSERT INTO %[1]s (mutex, acquired_at, ttl_at, transition_at, owner_id, version) " +
		"SELECT '', 0, 0, 0, '', 0 FROM DUAL WHERE FALSE"
)

// PostgreSQL. %[1]s stands for the table name, already validated and quoted; $n are the
// statement's arguments. Every table statement's first argument is its server-side limit
// (pgBound), so that the statements' texts do not change with it: the driver prepares each
// text once per connection. Times are pgNow; a session's time zone changes nothing
// (timestamptz is UTC inside), so there are no folds to work out.
const (
	// pgNow is the database's clock in epoch milliseconds: statement_timestamp(), the
	// instant the server received the statement, fixed for the whole statement (every
	// use in one statement sees the same instant, which the acquire's conditions and
	// writes rely on), and read after the client sent the statement (durations counted
	// from the client's send time never outlast the store's). now() is fixed at the
	// start of the transaction, which in Prune's transactions is earlier than their
	// statements; clock_timestamp() moves during the statement, so that a statement
	// that waited for a row lock would compare at one instant and write another.
	pgNow = "(floor(extract(epoch FROM statement_timestamp()) * 1000))::bigint"

	// pgBound makes the server give the statement up when it waits longer than $1 ms
	// for a lock (lock_timeout, set for the statement's transaction only: a statement
	// outside a transaction leaves the session as it was). It is a condition of the
	// statement's WHERE clause, evaluated before a row is passed on to be locked,
	// updated or deleted, so it bounds every row-lock wait of the statement (an admin's
	// SELECT ... FOR UPDATE, a Prune transaction). $1 NULL: the session's own
	// lock_timeout. A statement has nothing else to wait for, short of a table lock
	// taken by DDL (ALTER TABLE), which is waited for before the statement starts, and
	// which only the caller's context then bounds.
	pgBound = "set_config('lock_timeout', COALESCE($1, current_setting('lock_timeout')), true) IS NOT NULL"

	// pgOwns holds when the row is the contender's ($3) at the version the contention
	// last saw ($4; NULL: none).
	pgOwns = "owner_id = $3 AND version IS NOT DISTINCT FROM $4"

	// pgAcquire is JVM Simba's one conditional UPDATE, as mysqlAcquire, in one round trip:
	// RETURNING hands back the new version, 1 for a renewal of the tenure the contention
	// knows or 0 for a new tenure (read back from ttl_at, which leaves it in the row:
	// renewalMark), the database's now, and the version the statement found (pgFound).
	// PostgreSQL evaluates every SET expression on the row as it was. %[2]d and %[3]d stand
	// for ttl and ttl + transition in ms, %[4]d for the parity of the transition.
	// Arguments: limit, floor, contender, expected version (NULL: none), mutex, stale
	// version (NULL: none).
	pgAcquire = pgAcquireUpdate + pgTakesFree + " OR version IS NOT DISTINCT FROM $6 END " +
		"RETURNING version, (" + pgNow + " + %[2]d - ttl_at) # %[4]d, " + pgNow + ", " + pgFoundValue

	// pgFound keeps the version of the row an UPDATE changes, as its SET clause reads it,
	// in a setting of the statement's transaction, for RETURNING to hand back
	// (pgFoundValue): RETURNING reads the new row only. When the UPDATE waited for a
	// concurrent one and evaluates the row again, the SET clause reads the latest row, and
	// so does the setting.
	pgFound      = "set_config('simba.found', version::text, true) IS NOT NULL"
	pgFoundValue = "current_setting('simba.found')::bigint"

	// pgAcquireUpdate is the acquire's UPDATE up to the condition under which it begins
	// a new tenure: the row is free (pgTakesFree), or stale ($6).
	pgAcquireUpdate = "UPDATE %[1]s SET " +
		"version = CASE WHEN " + pgFound + " THEN GREATEST(version, $2) + 1 END, " +
		"ttl_at = " + pgNow + " + %[2]d - (CASE WHEN " + pgOwns + " AND transition_at > " + pgNow + " THEN 1 ELSE 0 END # %[4]d), " +
		"acquired_at = " + pgNow + ", " +
		"transition_at = " + pgNow + " + %[3]d, " +
		"owner_id = $3 " +
		"WHERE " + pgBound + " AND mutex = $5 AND GREATEST(version, $2) < 4294967295 " +
		"AND CASE WHEN " + pgOwns + " THEN transition_at <> " + pgNow + " ELSE "

	// pgRenewMany is mysqlRenewMany: the rows come as one JSON array of {"m": mutex, "o":
	// contender, "v": version} ($2), so that the text is the same for any number of rows,
	// and RETURNING names the rows renewed. An UPDATE locks only the rows it changes.
	// The transition's end is compared with now as a sub-select, whose value the planner
	// does not know: with now itself, it estimates from the table's statistics, and where
	// they were gathered while the rows were released (transition_at in the past), it
	// expects one row to match and plans a nested loop that reads the whole JSON array
	// again for every row of the table (2.7 s for 2,000 renewals among 10,000 rows).
	// Arguments: limit, rows.
	pgRenewMany = "UPDATE %[1]s AS t SET version = t.version + 1, ttl_at = " + pgNow + " + %[2]d - (1 # %[4]d), " +
		"acquired_at = " + pgNow + ", transition_at = " + pgNow + " + %[3]d " +
		"FROM json_to_recordset($2::json) AS r(m text, o text, v bigint) " +
		"WHERE " + pgBound + " AND t.mutex = r.m AND t.owner_id = r.o AND t.version = r.v AND t.version < 4294967295 " +
		"AND t.transition_at > (SELECT " + pgNow + ") RETURNING t.mutex, " + pgNow

	// pgAcquireLocking is pgAcquire that also tries the advisory lock ($7,
	// pg_try_advisory_lock), for a contention that does not hold it, and reads the row
	// when the UPDATE matches nothing: one round trip instead of three (a try, the
	// acquire, a read). The lock is taken before the UPDATE commits, so that anyone who
	// reads the row naming this contender finds the lock taken. A new tenure is begun only
	// with the lock: when another session holds it, the row is left alone and the
	// contention goes on as after a failed try (it leaves a free row to the lock's holder
	// for a while); a renewal does not need it. The CTE of the lock is materialized, and so evaluated once, and the
	// outer joins answer one row whether the UPDATE matched or not: whether the lock was
	// taken, the session's process ID, pgAcquire's answer (or NULLs), and, when the UPDATE
	// matched nothing, the row as pgReadLocking reads it, from the statement's snapshot
	// (NULLs when there is no row), where the holder is told only when the try failed: the
	// UPDATE may have found a later version, committed while it waited for the row's
	// lock, which the contention then tries again.
	// Arguments: pgAcquire's, then key.
	pgAcquireLocking = pgTakeAndAcquire + ", r.* FROM l LEFT JOIN u ON true " +
		"LEFT JOIN (SELECT " + pgRowColumns + ", CASE WHEN " + pgFree + " AND NOT l.got THEN " + pgHolderOfK + " ELSE 0 END " +
		"FROM %[1]s, l WHERE mutex = $5 AND NOT EXISTS (SELECT FROM u)) AS r ON true"

	// pgAcquireTaking is pgAcquireLocking without the read of the row, for a contention
	// whose mutex was not contended at its last try (floors.contended), whose acquire
	// most likely matches: the read's part of the plan, which does not run then, still
	// costs the server its set-up (the statement took 35-60 µs less, alternated with
	// pgAcquireLocking). When it matches nothing, the contention reads the row next.
	// Arguments: pgAcquireLocking's.
	pgAcquireTaking = pgTakeAndAcquire + " FROM l LEFT JOIN u ON true"

	// pgTakeAndAcquire is what pgAcquireLocking and pgAcquireTaking share: the try, the
	// acquire, and the answer's columns up to the row's.
	pgTakeAndAcquire = "WITH l AS MATERIALIZED (SELECT pg_try_advisory_lock(k) AS got, pg_backend_pid() AS pid, k " +
		"FROM (SELECT $7::text::bigint AS k) AS key), " +
		"u AS (" + pgAcquireUpdate + "(" + pgTakesFree + " OR version IS NOT DISTINCT FROM $6) AND (SELECT got FROM l) END " +
		"RETURNING version, (" + pgNow + " + %[2]d - ttl_at) # %[4]d AS mark, " + pgNow + " AS now, " + pgFoundValue + " AS found) " +
		"SELECT l.got::int, l.pid, u.version, u.mark, u.now, u.found"

	// pgRead reads a row and the database's now. Arguments: limit, mutex.
	pgRead = "SELECT " + pgRowColumns + " FROM %[1]s WHERE " + pgBound + " AND mutex = $2"

	// pgRowColumns are a row's columns as pgRead reads them, and the owner value of the
	// row's tenure ({value}: pgValue, or '' without the value table).
	pgRowColumns = "owner_id, GREATEST(acquired_at, 0), GREATEST(ttl_at, 0), GREATEST(transition_at, 0), version, " + pgNow +
		", {value}"

	// pgReadLocking is pgRead that also tells, when the row is free, the session that
	// holds its advisory lock (0: none; NULL when the row is not free; pgHolderOfK), and
	// the session's own process ID. A contention needs the holder only to leave a free
	// row to it for a while, and pg_locks costs a look at every lock of the server.
	// Arguments: limit, key, mutex.
	pgReadLocking = "SELECT " + pgRowColumns + ", CASE WHEN " + pgFree + " THEN " + pgHolderOfK + " END, " +
		"pg_backend_pid() FROM %[1]s, (SELECT $2::text::bigint AS k) AS key WHERE " + pgBound + " AND mutex = $3"

	// pgRelease is mysqlRelease. Arguments: limit, mutex, contender, version. Its
	// transaction commits without waiting for the WAL to reach the disk
	// (synchronous_commit off for that transaction only, set as pgBound sets
	// lock_timeout): a release lost in a crash of the database leaves the row to its
	// owner's lease, which delays the next owner and never makes a second one. Every
	// acquisition's commit waits for the WAL up to its own record, and so for every
	// release it could have read.
	pgRelease = "UPDATE %[1]s SET acquired_at = " + pgNow + ", ttl_at = 0, transition_at = 0, owner_id = '', " +
		"version = version + 1 WHERE " + pgBound + " AND " + pgAsyncCommit + " AND mutex = $2 AND owner_id = $3 AND version = $4"

	// pgReleaseUnlock is pgRelease that also lets the session's advisory lock go ($5), for
	// an owner holding it, once the release has committed: one statement instead of two.
	// A waiter woken before the commit would find the owner's row: a PostgreSQL UPDATE
	// checks its WHERE on the row as its snapshot has it, and passes over a row whose
	// change is not committed yet instead of waiting for it. So the statement first takes
	// the lock again at transaction level (pg_try_advisory_xact_lock, at once: the
	// session holds it), then lets the session-level hold go (pg_advisory_unlock): the
	// lock stays taken until the transaction ends, and PostgreSQL lets a transaction's
	// locks go after its commit is visible to every new snapshot. CASE evaluates the two
	// in that order. RETURNING answers, for a row released, whether the session-level
	// hold was let go; the row changed matches nothing and lets nothing go.
	// Arguments: pgRelease's, then key.
	pgReleaseUnlock = pgRelease + " RETURNING CASE WHEN pg_try_advisory_xact_lock($5::text::bigint) " +
		"THEN pg_advisory_unlock($5::text::bigint) ELSE false END"

	// pgAsyncCommit makes the statement's transaction commit without waiting for its WAL
	// to be flushed.
	pgAsyncCommit = "set_config('synchronous_commit', 'off', true) IS NOT NULL"

	// pgEnsureRow is mysqlEnsureRow: the floor row is read with a shared lock, which
	// waits for a Prune under way. Arguments: limit, mutex, version.
	pgEnsureRow = "INSERT INTO %[1]s (mutex, acquired_at, ttl_at, transition_at, owner_id, version) " +
		"SELECT $2::text, " + pgNow + ", 0, 0, '', GREATEST($3::bigint, COALESCE((SELECT version FROM %[1]s WHERE mutex = " +
		pgFloor + " FOR SHARE), 0)) WHERE " + pgBound + " ON CONFLICT (mutex) DO NOTHING"

	// pgFloor is the mutex of the floor row (see mysqlFloor).
	pgFloor = "''"

	// pgFree holds when a row has no owner.
	pgFree = "transition_at < " + pgNow

	// pgTakesFree is mysqlTakesFree: a free row is taken only without an expected
	// version ($4).
	pgTakesFree = "($4 IS NULL AND " + pgFree + ")"

	// The statements of Prune, as MySQL's. Arguments: limit, then as MySQL's.
	pgEnsureFloor = "INSERT INTO %[1]s (mutex, acquired_at, ttl_at, transition_at, owner_id, version) " +
		"SELECT " + pgFloor + ", 0, 0, 0, '', 0 WHERE " + pgBound + " ON CONFLICT (mutex) DO NOTHING"
	pgLockFloor = "SELECT version FROM %[1]s WHERE " + pgBound + " AND mutex = " + pgFloor + " FOR UPDATE"
	pgPrunable  = "SELECT mutex, version FROM %[1]s WHERE " + pgBound + " AND mutex <> " + pgFloor + " AND " + pgFree +
		" AND GREATEST(acquired_at, transition_at) + $2 < " + pgNow + " AND version < 4294967295" +
		" ORDER BY mutex LIMIT $3 FOR UPDATE"
	pgRaiseFloor = "UPDATE %[1]s SET version = GREATEST(version, $2) WHERE " + pgBound + " AND mutex = " + pgFloor
	pgDelete     = "DELETE FROM %[1]s WHERE " + pgBound + " AND mutex IN (%[2]s)"
)

// PostgreSQL's named locks: session-level advisory locks on a bigint key (Dialect.lockName
// gives its decimal digits), hints for a fast hand-over as with MySQL.
const (
	// pgWaitLock waits until the advisory lock is free and takes it (1). After $2
	// seconds the server ends the wait with lock_timeout's error (Dialect.timedOut); a
	// cancelled wait ends with an error too. CASE evaluates the limit first.
	// Arguments: key, timeout s.
	pgWaitLock = "SELECT CASE WHEN set_config('lock_timeout', ($2::int * 1000)::text, true) IS NULL THEN NULL " +
		"ELSE (pg_advisory_lock($1::text::bigint) IS NOT NULL)::int END"

	// pgUnlock lets an advisory lock go, and tells the session's process ID (as mysqlUnlock).
	// Arguments: key.
	pgUnlock = "SELECT pg_advisory_unlock($1::text::bigint), pg_backend_pid()"

	// pgSettle lets the advisory lock go if the session holds it, and otherwise does
	// nothing (pgUnlock would warn). A wait that ends in an error may have taken the
	// lock: advisory locks are not transactional, and PostgreSQL can grant the lock and
	// then fail the statement on a cancellation or lock_timeout that struck as it did. A
	// bigint key is classid (high 32 bits) and objid (low 32 bits) with objsubid 1 in
	// pg_locks. Arguments: key.
	pgSettle = "SELECT pg_advisory_unlock(k) FROM (SELECT $1::text::bigint AS k) AS key JOIN pg_locks l ON l.locktype = 'advisory' " +
		"AND l.pid = pg_backend_pid() AND l.granted AND l.objsubid = 1 AND l.classid::bigint = (k >> 32) & 4294967295 " +
		"AND l.objid::bigint = k & 4294967295"

	// pgHolderOfK is the process ID of the session that holds the advisory lock of key k
	// (a bigint column where it is used) in this database, 0 if none: pg_locks lists
	// every database's, and a bigint key is classid (high 32 bits) and objid (low 32
	// bits) with objsubid 1.
	pgHolderOfK = "COALESCE((SELECT h.pid FROM pg_locks h WHERE h.locktype = 'advisory' AND h.granted AND h.objsubid = 1 " +
		"AND h.classid::bigint = (k >> 32) & 4294967295 AND h.objid::bigint = k & 4294967295 " +
		"AND h.database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1), 0)"

	// pgInterrupt cancels the statement a session is running, if any; %[1]d is its
	// process ID (an integer from pg_backend_pid, so the text is safe). A session that
	// runs nothing ignores it.
	pgInterrupt = "SELECT pg_cancel_backend(%[1]d)"
)

// PostgreSQL's start-up checks.
const (
	// pgServer tells the database, the session's schema, the server's version, the
	// encodings names are stored and travel in, whether the server refuses writes (a
	// standby, or a read-only session), and the table (a quoted name, resolved on the
	// search_path if not qualified): its schema (NULL: it does not exist), whether it is
	// a table, and whether the session's role may delete from it (its other privileges are
	// pgColumns', column by column). Arguments: quoted name.
	pgServer = "SELECT current_database(), COALESCE(current_schema(), ''), current_setting('server_version_num')::int, " +
		"current_setting('server_encoding'), current_setting('client_encoding'), " +
		"current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery(), quote_ident(current_user), " +
		"n.nspname, c.relkind IN ('r', 'p'), has_table_privilege(c.oid, 'DELETE') " +
		"FROM (SELECT to_regclass($1) AS oid) AS r LEFT JOIN pg_class c ON c.oid = r.oid " +
		"LEFT JOIN pg_namespace n ON n.oid = c.relnamespace"

	// pgColumns describes the table's columns: name, type, declared type, length limit
	// (-1: none), NOT NULL, collation and whether it is deterministic (different
	// strings never equal), whether the column alone is the primary key, and whether the
	// session's role may select, insert and update it (each privilege held on the column
	// or the table: has_table_privilege with several privileges holds when any one is).
	// Arguments: quoted name.
	pgColumns = "SELECT a.attname, t.typname, format_type(a.atttypid, a.atttypmod), " +
		"CASE WHEN t.typname IN ('varchar', 'bpchar') AND a.atttypmod > 4 THEN a.atttypmod - 4 ELSE -1 END, " +
		"a.attnotnull, COALESCE(co.collname, ''), COALESCE(co.collisdeterministic, true), " +
		"EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary AND i.indnkeyatts = 1 " +
		"AND i.indkey[0] = a.attnum), " +
		"has_column_privilege(a.attrelid, a.attnum, 'SELECT'), has_column_privilege(a.attrelid, a.attnum, 'INSERT'), " +
		"has_column_privilege(a.attrelid, a.attnum, 'UPDATE') " +
		"FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid LEFT JOIN pg_collation co ON co.oid = a.attcollation " +
		"WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped"
)
