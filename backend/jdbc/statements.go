package jdbc

// Every SQL statement of the backend, for the MySQL/MariaDB dialect. %[1]s stands for the
// table name, already validated and quoted; ? are the statement's arguments. The storage
// format and the meaning of each statement are SPEC §6, shared with JVM Simba.

// mysqlNow is the database's clock in epoch milliseconds. UTC_TIMESTAMP(3), like
// CURRENT_TIMESTAMP(3), is read once per statement (its start), so every use in one
// statement sees the same instant; unlike UNIX_TIMESTAMP(CURRENT_TIMESTAMP(3)) it does not
// pass through the session time zone, so it is not ambiguous in a daylight-saving fold.
const mysqlNow = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)"

const (
	// mysqlEnsureRow creates a mutex's row with no owner if it is missing. SPEC §6
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

	// mysqlAcquire is SPEC §6's one conditional UPDATE: it takes a free row (its
	// transition window has ended) or renews the contender's own, but only at the exact
	// version the contention last saw (mysqlRenewal). ttl_at is assigned first and version
	// second, so that both read the row as it was whether the server assigns left to right
	// (the MySQL default) or simultaneously (MariaDB's SIMULTANEOUS_ASSIGNMENT). A renewal
	// writes ttl_at one millisecond short of a new tenure's, which leaves in the row which
	// of the two its last write was (see contention.seen). Through LAST_INSERT_ID the
	// statement hands back, in its OK packet, the new version times two plus 1 for a
	// renewal or 0 for a new tenure. The new version is one more than the row's or than
	// the floor, the highest version the backend saw, whichever is larger: after the row
	// was deleted and created again from a lower version, tokens go on above the earlier
	// ones. The version guard keeps int unsigned from overflowing or, in non-strict mode,
	// from sticking at its maximum and repeating a token.
	// Arguments: ttl ms, renewal (2), floor, ttl+transition ms, contender, mutex, floor,
	// renewal (2), where each renewal is a contender and an expected version (NULL: none).
	mysqlAcquire = "UPDATE %[1]s SET " +
		"ttl_at = " + mysqlNow + " + ? - " + mysqlRenewal + ", " +
		"version = LAST_INSERT_ID((GREATEST(version, ?) + 1) * 2 + " + mysqlRenewal + ") DIV 2, " +
		"acquired_at = " + mysqlNow + ", " +
		"transition_at = " + mysqlNow + " + ?, " +
		"owner_id = ? " +
		"WHERE mutex = ? AND GREATEST(version, ?) < 4294967295 " +
		"AND (" + mysqlFree + " OR " + mysqlRenewal + ")"

	// mysqlFree holds when a row has no owner: its transition window has ended (a
	// released row's is 0).
	mysqlFree = "transition_at < " + mysqlNow

	// mysqlRenewal holds when the row is the contender's, its transition window has not
	// ended, and it is at the version the contention expects: nothing has changed it
	// since the contention's last answer, so the tenure it knows goes on. Arguments:
	// contender, expected version.
	mysqlRenewal = "(owner_id = ? AND transition_at > " + mysqlNow + " AND version <=> ?)"

	// mysqlRead reads a row and the database's now in one statement.
	// Arguments: mutex.
	mysqlRead = "SELECT owner_id, acquired_at, ttl_at, transition_at, version, " + mysqlNow +
		" FROM %[1]s WHERE mutex = ?"

	// mysqlRelease is SPEC §6's release, further conditioned on the exact version the
	// releasing contention knows: a release that reaches the server late (abandoned by
	// its caller, delayed in a socket buffer or behind a row lock) cannot erase a later
	// tenure, whose acquisition changed the version.
	// Arguments: mutex, contender, version.
	mysqlRelease = "UPDATE %[1]s SET acquired_at = " + mysqlNow + ", ttl_at = 0, transition_at = 0, owner_id = '', " +
		"version = version + 1 WHERE mutex = ? AND owner_id = ? AND version = ?"
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
		" AND GREATEST(acquired_at, transition_at) + ? < " + mysqlNow + " AND version < 4294967295" +
		" ORDER BY mutex LIMIT ? FOR UPDATE"

	// mysqlRaiseFloor raises the floor row's version. Arguments: version.
	mysqlRaiseFloor = "UPDATE %[1]s SET version = GREATEST(version, ?) WHERE mutex = " + mysqlFloor

	// mysqlDelete deletes the rows named; %[2]s stands for as many placeholders.
	mysqlDelete = "DELETE FROM %[1]s WHERE mutex IN (%[2]s)"
)

// Named locks: hints for a fast hand-over, never a condition of ownership (see doc.go).
const (
	// mysqlTryLock takes the named lock if it is free and returns the session's ID, with
	// which a waiting GET_LOCK of the same session can later be interrupted.
	// Arguments: lock name.
	mysqlTryLock = "SELECT GET_LOCK(?, 0), CONNECTION_ID()"

	// mysqlWaitLock waits until the named lock is free and takes it: 1 when taken, 0
	// after the timeout, NULL when interrupted. Arguments: lock name, timeout s.
	mysqlWaitLock = "SELECT GET_LOCK(?, ?)"

	// mysqlUnlock lets a named lock go. Arguments: lock name.
	mysqlUnlock = "DO RELEASE_LOCK(?)"

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
	// MariaDB from MySQL), the character sets strings travel in, and whether the server
	// refuses writes (a replica).
	mysqlServer = "SELECT COALESCE(DATABASE(), ''), VERSION(), @@character_set_client, @@character_set_connection, @@read_only"

	// mysqlColumns describes a table's columns. Arguments: schema, table.
	mysqlColumns = "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), " +
		"COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''), COLUMN_KEY, IS_NULLABLE " +
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?"
)
