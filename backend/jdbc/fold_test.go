package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

// JVM Simba 3.x's statements (me.ahoo.simba.jdbc.JdbcMutexOwnerRepository), as it runs
// them: its "now" is unix_timestamp(current_timestamp(3)), which goes through the
// session's time zone.
const (
	jvmAcquire = "update simba_mutex " +
		"set acquired_at=cast(unix_timestamp(current_timestamp(3)) * 1000 as unsigned)," +
		"ttl_at=(cast(unix_timestamp(current_timestamp(3)) * 1000 as unsigned) + ?)," +
		"transition_at=(cast(unix_timestamp(current_timestamp(3)) * 1000 as unsigned) + ?)," +
		"owner_id= ?, version=version + 1 " +
		"where mutex = ? and ((transition_at < (unix_timestamp(current_timestamp(3)) * 1000)) " +
		"or (owner_id = ? and transition_at > (unix_timestamp(current_timestamp(3)) * 1000)))"
	jvmInit = "insert into simba_mutex (mutex, acquired_at, ttl_at, transition_at, owner_id, version) values (?, 0, 0, 0, '', 0)"
	jvmGet  = "select owner_id, transition_at >= cast(unix_timestamp(current_timestamp(3)) * 1000 as unsigned) " +
		"from simba_mutex where mutex = ?"
)

// jvm is a JVM Simba contender: it runs JVM Simba's statements on a connection of its
// own, whose clock the test sets (SET timestamp, which UTC_TIMESTAMP and CURRENT_TIMESTAMP
// both follow).
type jvm struct {
	id   string
	conn *sql.Conn
	ttl  time.Duration
	lead time.Duration // ttl + transition
}

func newJVM(t *testing.T, db *sql.DB, id, timeZone string) *jvm {
	t.Helper()
	conn, err := db.Conn(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = conn.ExecContext(t.Context(), "SET time_zone = ?", timeZone)
	require.NoError(t, err)
	return &jvm{id: id, conn: conn, ttl: 10 * time.Second, lead: 16 * time.Second}
}

// acquireAt runs JVM Simba's acquireAndGetOwner with the database's clock at epoch ms at,
// and says whether this contender owns the mutex afterwards, as JVM Simba would believe.
func (j *jvm) acquireAt(t *testing.T, mutex string, at int64) bool {
	t.Helper()
	ctx := t.Context()
	_, err := j.conn.ExecContext(ctx, fmt.Sprintf("SET timestamp = %d.%03d", at/1000, at%1000))
	require.NoError(t, err)
	_, _ = j.conn.ExecContext(ctx, jvmInit, mutex) // a duplicate key is normal
	_, err = j.conn.ExecContext(ctx, jvmAcquire, j.ttl.Milliseconds(), j.lead.Milliseconds(), j.id, mutex, j.id)
	require.NoError(t, err)
	var owner string
	var live bool
	require.NoError(t, j.conn.QueryRowContext(ctx, jvmGet, mutex).Scan(&owner, &live))
	return owner == j.id && live
}

// goAt returns a Go contention for mutex and id whose pool's sessions have the database's
// clock at epoch ms at, in time zone timeZone, on server s.
func goAt(t *testing.T, s *testserver.MariaDB, mutex, id, timeZone string, at int64) backend.LeaseContention {
	t.Helper()
	db := openOn(t, s, "time_zone="+url.QueryEscape("'"+timeZone+"'"), fmt.Sprintf("timestamp=%d.%03d", at/1000, at%1000))
	b, err := jdbc.New(db, jdbc.WithHandOver(false))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	c, err := b.StartContend(t.Context(), backend.Participant{
		Mutex: mutex, ContenderID: id, TTL: 10 * time.Second, Transition: 6 * time.Second, Wake: func() {},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.StopContend(context.Background()) })
	return c.(backend.LeaseContention)
}

// Instants around the end of daylight saving time in Europe/Berlin on 2024-10-27: the
// clocks went back from 03:00 CEST to 02:00 CET at 01:00 UTC, so local times from 02:00 to
// 03:00 came twice: first from 00:00 to 01:00 UTC (CEST), then from 01:00 to 02:00 UTC
// (CET).
const (
	foldStart  = int64(1729987200000) // 00:00 UTC: 02:00 CEST, the first pass begins
	secondPass = foldStart + 3600000  // 01:00 UTC: 02:00 CET, the second pass begins
	foldEnd    = secondPass + 3600000 // 02:00 UTC: 03:00 CET
)

var berlinOnce sync.Once

// loadBerlin loads the time zone Europe/Berlin into server s's tables, once per process.
func loadBerlin(t *testing.T) {
	t.Helper()
	needServer(t)
	var err error
	berlinOnce.Do(func() {
		var out []byte
		out, err = exec.CommandContext(t.Context(), "mariadb-tzinfo-to-sql", "/usr/share/zoneinfo/Europe/Berlin", "Europe/Berlin").Output()
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = server.Exec(ctx, "USE mysql;\n"+string(out))
		}
	})
	require.NoError(t, err)
}

// TestDaylightSavingFoldNamedZone (issue 15, item 1): the sessions' time zone is
// Europe/Berlin from the server's time zone tables. In the fold's second pass JVM Simba's
// clock reads an hour behind: a JVM contender's lease, written in that clock, must not
// look ended to a Go contender while the JVM contender believes it owns the mutex; nor
// the other way round. A Go-only fleet is not affected.
func TestDaylightSavingFoldNamedZone(t *testing.T) {
	loadBerlin(t)
	const zone = "Europe/Berlin"
	db := openDB(t)
	for _, at := range []int64{secondPass + 30*60000, foldEnd - 5000, foldStart + 30*60000, foldStart - 5000, secondPass - 5000} {
		t.Run(time.UnixMilli(at).UTC().Format("15:04:05"), func(t *testing.T) {
			mutex := mutexName(t)
			j := newJVM(t, db, "jvm", zone)
			require.True(t, j.acquireAt(t, mutex, at), "the JVM contender acquires")
			rec := acquire(t, goAt(t, server, mutex, "go", zone, at+5000))
			assert.Equal(t, "jvm", rec.Owner, "5 s into the JVM contender's 16 s lease")
			rec = acquire(t, goAt(t, server, mutex, "go", zone, at+17000))
			assert.Equal(t, "go", rec.Owner, "after the JVM contender's lease")
			assert.False(t, j.acquireAt(t, mutex, at+22000), "5 s into the Go contender's lease")
			assert.True(t, j.acquireAt(t, mutex, at+34000), "after the Go contender's lease")

			// Go alone: a lease lasts as long as it says, whatever the zone.
			other := mutexName(t)
			rec = acquire(t, goAt(t, server, other, "a", zone, at))
			require.Equal(t, "a", rec.Owner)
			assert.Equal(t, "a", acquire(t, goAt(t, server, other, "b", zone, at+15000)).Owner)
			assert.Equal(t, "b", acquire(t, goAt(t, server, other, "b", zone, at+17000)).Owner)
		})
	}
}

// TestDaylightSavingFoldSystemZone (issue 15, item 1): the server runs with TZ=
// Europe/Berlin and the sessions' time zone is SYSTEM. The server then reads the fold's
// local times as the later of their two instants, so in the first pass JVM Simba's clock
// reads an hour ahead: a Go contender's lease must not look ended to a JVM contender while
// the Go contender believes it owns the mutex; nor the other way round. A Go-only fleet is
// not affected.
func TestDaylightSavingFoldSystemZone(t *testing.T) {
	needServer(t)
	t.Setenv("TZ", "Europe/Berlin") // for the private server the test starts
	s := privateServer(t)
	os.Unsetenv("TZ")
	const zone = "SYSTEM"
	db := openOn(t, s)
	for _, at := range []int64{foldStart + 30*60000, foldStart - 5000, secondPass - 5000, secondPass + 30*60000} {
		t.Run(time.UnixMilli(at).UTC().Format("15:04:05"), func(t *testing.T) {
			mutex := mutexName(t)
			rec := acquire(t, goAt(t, s, mutex, "go", zone, at))
			require.Equal(t, "go", rec.Owner)
			j := newJVM(t, db, "jvm", zone)
			assert.False(t, j.acquireAt(t, mutex, at+5000), "5 s into the Go contender's lease")
			assert.True(t, j.acquireAt(t, mutex, at+3700000), "an hour after the Go contender's lease")

			// Go alone: a lease lasts as long as it says, whatever the zone.
			other := mutexName(t)
			require.Equal(t, "a", acquire(t, goAt(t, s, other, "a", zone, at)).Owner)
			assert.Equal(t, "a", acquire(t, goAt(t, s, other, "b", zone, at+15000)).Owner)
			assert.Equal(t, "b", acquire(t, goAt(t, s, other, "b", zone, at+17000)).Owner)

			// A JVM contender's lease does not look ended to Go while it believes.
			third := mutexName(t)
			require.True(t, j.acquireAt(t, third, at))
			assert.Equal(t, "jvm", acquire(t, goAt(t, s, third, "go", zone, at+5000)).Owner)
		})
	}
}
