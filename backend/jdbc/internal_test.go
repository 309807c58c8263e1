package jdbc

import (
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

func TestDecodeAcquire(t *testing.T) {
	enc := func(found uint64, renewed bool, now uint64) int64 {
		return int64(found<<32 | boolBit(renewed)<<31 | now)
	}
	got, err := decodeAcquire(0, 0, 0)
	require.NoError(t, err)
	assert.False(t, got.matched)

	got, err = decodeAcquire(1, enc(6, false, 12345), 3)
	require.NoError(t, err)
	assert.Equal(t, acquireResult{matched: true, found: 6, version: 7, now: 12345}, got, "a new tenure at version 7")

	got, err = decodeAcquire(1, enc(6, true, nowBits), 0)
	require.NoError(t, err)
	assert.Equal(t, acquireResult{matched: true, found: 6, version: 7, renewed: true, now: nowBits}, got, "a renewal at version 7")

	got, err = decodeAcquire(1, enc(2, false, 5), 100001)
	require.NoError(t, err)
	assert.Equal(t, acquireResult{matched: true, found: 2, version: 100002, now: 5}, got, "found below the floor, taken above it")

	got, err = decodeAcquire(1, enc(0, false, 5), 0)
	require.NoError(t, err)
	assert.Equal(t, acquireResult{matched: true, found: 0, version: 1, now: 5}, got, "a row just created")

	got, err = decodeAcquire(1, enc(maxVersion-1, true, 0), 0)
	require.NoError(t, err)
	assert.Equal(t, uint64(maxVersion), got.version, "the largest version, past int64's sign")

	_, err = decodeAcquire(2, enc(7, false, 1), 0)
	assert.Error(t, err, "two rows changed")
	_, err = decodeAcquire(1, enc(maxVersion, true, 5), 0)
	assert.Error(t, err, "past the largest version")
	_, err = decodeAcquire(1, enc(5, true, 5), maxVersion)
	assert.Error(t, err, "a floor past the largest version")
}

// The token is the version of the tenure's first UPDATE; renewals keep it. The latest
// version (the latest-version-token mutation) would change with every renewal.
func TestTokenIsTheFirstVersionOfTheTenure(t *testing.T) {
	c := &contention{id: "me", ttl: time.Second, lease: 2 * time.Second}
	rec := c.won(acquireResult{matched: true, version: 5})
	assert.Equal(t, uint64(5), rec.Token, "new tenure")
	for v := uint64(6); v < 9; v++ {
		rec = c.won(acquireResult{matched: true, version: v, renewed: true})
		assert.Equal(t, uint64(5), rec.Token, "renewal to version %d", v)
	}
	rec = c.won(acquireResult{matched: true, version: 12})
	assert.Equal(t, uint64(12), rec.Token, "a new tenure, say after the row was freed behind the owner's back")

	// Someone else owned the row in between: the next acquisition is a new tenure.
	other, known := c.seen(row{owner: "other", ttlAt: 100, transitionAt: 200, version: 20, now: 50})
	assert.True(t, known)
	assert.Equal(t, "other", other.Owner)
	assert.Zero(t, other.Token, "no token for another owner's tenure")
	rec = c.won(acquireResult{matched: true, version: 22})
	assert.Equal(t, uint64(22), rec.Token)
}

// A row of this contender read after its acquire statement did not match: the row's last
// write tells a renewal from a new tenure by the parity of transition_at - ttl_at, odd
// after a renewal, whatever the transition's parity.
func TestTokenOfARowWrittenByALostStatement(t *testing.T) {
	for _, transition := range []uint64{1000, 1001} {
		const transitionAt = 3000
		p := transition & 1
		mine := func(version uint64, renewal bool) row {
			shortened := p
			if renewal {
				shortened ^= 1
			}
			return row{owner: "me", ttlAt: transitionAt - transition - shortened, transitionAt: transitionAt, version: version, now: 500}
		}
		c := &contention{id: "me", ttl: time.Second, lease: time.Second + time.Duration(transition)*time.Millisecond}
		rec := c.won(acquireResult{matched: true, version: 5})
		assert.Equal(t, time.Second-clockStep-time.Duration(p)*time.Millisecond, rec.TTL, "transition %d: no longer than ttl_at", transition)
		assert.False(t, renewalMark(mine(5, false)))
		assert.True(t, renewalMark(mine(6, true)))

		rec, known := c.seen(mine(5, false))
		assert.True(t, known)
		assert.Equal(t, uint64(5), rec.Token, "unchanged: the last millisecond of the window")
		rec, known = c.seen(mine(6, true))
		assert.True(t, known)
		assert.Equal(t, uint64(5), rec.Token, "transition %d: the contention's own renewal, whose answer was lost", transition)
		rec, known = c.seen(mine(9, false))
		assert.True(t, known)
		assert.Equal(t, uint64(9), rec.Token, "transition %d: a new tenure begun by a statement whose answer was lost", transition)
		_, known = c.seen(mine(11, true))
		assert.False(t, known, "a renewal it could not have made: taken over")
		assert.Zero(t, c.token)
		rec = c.won(acquireResult{matched: true, version: 12, renewed: true})
		assert.Equal(t, time.Second-clockStep-time.Duration(p^1)*time.Millisecond, rec.TTL, "transition %d: no longer than ttl_at", transition)
	}
}

// A new contention (a later lifecycle) that finds its own contender's tenure still on the
// store cannot name that tenure's token: it takes the row over with a renewal, whose
// version is its token.
func TestTokenOfAnInheritedTenure(t *testing.T) {
	c := &contention{id: "me", ttl: time.Second, lease: 2 * time.Second}
	_, known := c.seen(row{owner: "me", ttlAt: 1000, transitionAt: 2000, version: 9, now: 500})
	assert.False(t, known)
	rec := c.won(acquireResult{matched: true, version: 10, renewed: true})
	assert.Equal(t, uint64(10), rec.Token)
	rec = c.won(acquireResult{matched: true, version: 11, renewed: true})
	assert.Equal(t, uint64(10), rec.Token)
}

func TestRecordOfRow(t *testing.T) {
	assert.Equal(t, backend.Record{}, row{}.record(), "a new row has no owner")
	assert.Equal(t, backend.Record{}, row{owner: "a", transitionAt: 99, now: 100}.record(), "transition ended")
	r := row{owner: "a", acquiredAt: 1000, ttlAt: 3000, transitionAt: 4000, now: 2000}.record()
	assert.Equal(t, backend.Record{Owner: "a", TTL: 999 * time.Millisecond, Transition: 1999 * time.Millisecond, Held: time.Second}, r)
	r = row{owner: "a", acquiredAt: 1000, ttlAt: 1500, transitionAt: 2000, now: 2000}.record()
	assert.Equal(t, "a", r.Owner, "at the last millisecond of its transition window")
	assert.Equal(t, -501*time.Millisecond, r.TTL)
}

func TestParseTable(t *testing.T) {
	for _, ok := range []string{"simba_mutex", "db.simba_mutex", "T1", "_x$", strings.Repeat("a", 64)} {
		_, err := parseTable(ok, MySQL.maxIdentifier())
		assert.NoError(t, err, ok)
	}
	for _, bad := range []string{"", ".", "a.", ".a", "a.b.c", "1abc", "$a", "a-b", "a b", "a`b", "tàble", strings.Repeat("a", 65), "a;DROP"} {
		_, err := parseTable(bad, MySQL.maxIdentifier())
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, bad)
	}
	_, err := parseTable(strings.Repeat("a", 64), Postgres.maxIdentifier())
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "PostgreSQL truncates identifiers to 63 bytes")
}

func TestBound(t *testing.T) {
	maria := schema{mariaDB: true}
	prefix := func(s schema, d time.Duration) string {
		q, args := MySQL.bound(s, d, "SELECT ?", 1)
		assert.Equal(t, []any{1}, args)
		return strings.TrimSuffix(q, "SELECT ?")
	}
	assert.Empty(t, prefix(schema{}, time.Second), "MySQL has no statement prefix")
	assert.Empty(t, prefix(maria, 0))
	assert.Equal(t, "SET STATEMENT max_statement_time = 0.220 FOR ", prefix(maria, 250*time.Millisecond))
	assert.Equal(t, "SET STATEMENT max_statement_time = 2.200 FOR ", prefix(maria, 2499*time.Millisecond),
		"two significant digits: the same text from one call to the next")
	assert.Equal(t, prefix(maria, 2500*time.Millisecond), prefix(maria, 2480*time.Millisecond))
	assert.Equal(t, "SET STATEMENT max_statement_time = 0.090 FOR ", prefix(maria, 100*time.Millisecond))
	assert.Equal(t, "SET STATEMENT max_statement_time = 0.001 FOR ", prefix(maria, 10*time.Microsecond))

	// PostgreSQL: the limit is the statement's first argument, lock_timeout in ms.
	q, args := Postgres.bound(schema{}, 250*time.Millisecond, "SELECT $2", 1)
	assert.Equal(t, "SELECT $2", q)
	assert.Equal(t, []any{"225", 1}, args)
	_, args = Postgres.bound(schema{}, 0, "SELECT $2", 1)
	assert.Equal(t, []any{nil, 1}, args, "no limit of its own: the session's lock_timeout")
	_, args = Postgres.bound(schema{}, 10*time.Microsecond, "SELECT $2")
	assert.Equal(t, []any{"1"}, args)
}

func TestLockName(t *testing.T) {
	s := schema{database: "simba"}
	a := MySQL.lockName(s, tableName{name: "simba_mutex"}, "m")
	assert.LessOrEqual(t, len(a), 64, "MySQL limits lock names to 64 characters")
	assert.NotEqual(t, a, MySQL.lockName(s, tableName{name: "simba_mutex"}, "M"))
	assert.NotEqual(t, a, MySQL.lockName(s, tableName{name: "other"}, "m"))
	assert.NotEqual(t, a, MySQL.lockName(schema{database: "other"}, tableName{name: "simba_mutex"}, "m"))
}

func TestDDLRendersTheTableName(t *testing.T) {
	def, err := DDL()
	require.NoError(t, err)
	assert.Equal(t, mysqlDDL, def, "the default table is the embedded DDL as is")
	custom, err := DDL(WithTable("db.locks"))
	require.NoError(t, err)
	assert.Contains(t, custom, "CREATE TABLE IF NOT EXISTS `db`.`locks` (")
	assert.NotContains(t, custom, "`simba_mutex`")
}

func TestNoRowNeverLeaves(t *testing.T) {
	err := noRow(errNoRow)
	assert.False(t, errors.Is(err, errNoRow))
	other := errors.New("x")
	assert.Same(t, other, noRow(other))
}

func FuzzDecodeAcquire(f *testing.F) {
	f.Add(int64(0), int64(0), uint64(0))
	f.Add(int64(1), int64(7<<32|1<<31|99), uint64(3))
	f.Add(int64(1), int64(2<<32|99), uint64(100001))
	f.Add(int64(1), int64(-1), uint64(0))
	f.Add(int64(3), int64(1<<40), uint64(0))
	f.Fuzz(func(t *testing.T, affected, lastID int64, floor uint64) {
		got, err := decodeAcquire(affected, lastID, floor)
		if err != nil {
			return
		}
		if !got.matched {
			if affected != 0 {
				t.Fatalf("affected %d but not matched", affected)
			}
			return
		}
		if got.version != max(got.found, floor)+1 || got.version > maxVersion ||
			got.found<<32|boolBit(got.renewed)<<31|got.now != uint64(lastID) || got.now > nowBits {
			t.Fatalf("decode(%d) = %+v", lastID, got)
		}
	})
}

func boolBit(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func FuzzRowRecord(f *testing.F) {
	f.Add("a", uint64(1000), uint64(3000), uint64(4000), uint64(2000))
	f.Add("", uint64(0), uint64(0), uint64(0), uint64(1))
	f.Add("b", uint64(0), ^uint64(0), ^uint64(0), uint64(0))
	f.Add("c", ^uint64(0), uint64(0), uint64(5), uint64(5))
	f.Fuzz(func(t *testing.T, owner string, acquired, ttlAt, transitionAt, now uint64) {
		r := row{owner: owner, acquiredAt: acquired, ttlAt: ttlAt, transitionAt: transitionAt, now: now}.record()
		if r.Owner != "" && (owner == "" || transitionAt < now) {
			t.Fatalf("owner %q reported for a free row", r.Owner)
		}
		if r.Owner == "" && r != (backend.Record{}) {
			t.Fatalf("a free row reported as %+v", r)
		}
		for _, d := range []time.Duration{r.TTL, r.Transition, r.Held} {
			if d > maxSpan || d < -maxSpan-clockStep {
				t.Fatalf("duration %v out of bounds", d)
			}
		}
		if r.Held < 0 {
			t.Fatalf("negative Held %v", r.Held)
		}
		if r.Owner != "" && r.Transition < -clockStep {
			t.Fatalf("owner with transition %v", r.Transition)
		}
	})
}

func FuzzParseTable(f *testing.F) {
	for _, s := range []string{"simba_mutex", "db.t", "a.b.c", "", "`x`", "x; DROP TABLE y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tn, err := parseTable(s, Postgres.maxIdentifier()+1)
		if err != nil {
			return
		}
		q := mysqlDialect{}.quote(tn)
		if strings.Count(q, "`") != 2*len(strings.Split(s, ".")) {
			t.Fatalf("%q quoted as %q", s, q)
		}
		if q := (postgresDialect{}).quote(tn); strings.Count(q, `"`) != 2*len(strings.Split(s, ".")) {
			t.Fatalf("%q quoted as %q for PostgreSQL", s, q)
		}
		if tn.String() != s {
			t.Fatalf("%q parsed as %q", s, tn.String())
		}
	})
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"m", strings.Repeat("é", 66), strings.Repeat("é", 67), "\xff"} {
		f.Add(s)
	}
	b := &Backend{}
	f.Fuzz(func(t *testing.T, s string) {
		err := b.ValidateMutex(s)
		if err != nil && !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("error %v does not wrap ErrInvalidArgument", err)
		}
		if err == nil && len([]rune(s)) > MaxMutexLength {
			t.Fatalf("%d characters accepted", len([]rune(s)))
		}
	})
}

func TestMayFold(t *testing.T) {
	for _, tz := range [][2]string{{"SYSTEM", "UTC"}, {"+00:00", "CET"}, {"-05:00", ""}, {"+5:30", ""}, {"UTC", "CEST"}, {"Etc/UTC", ""}} {
		assert.False(t, mayFold(tz[0], tz[1]), tz)
	}
	for _, tz := range [][2]string{{"SYSTEM", "CET"}, {"SYSTEM", "EST"}, {"Europe/Berlin", "UTC"}, {"America/New_York", ""}} {
		assert.True(t, mayFold(tz[0], tz[1]), tz)
	}
}

// The database's clock between two answers moves by what the local clock allows, within
// the margin, or it stepped; moves past the 31 bits the acquire statement hands back wrap.
func TestClockSteps(t *testing.T) {
	c := &contention{b: &Backend{}, log: slog.New(slog.DiscardHandler)}
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	c.clock(at(0), at(time.Millisecond), nowBits-500) // close to the wrap
	c.clock(at(time.Second), at(time.Second+time.Millisecond), 499)
	assert.Zero(t, c.b.ClockSteps(), "a second on both clocks, across the wrap")
	c.clock(at(2*time.Second), at(2*time.Second+time.Millisecond), 499+1000+40)
	assert.Zero(t, c.b.ClockSteps(), "within the margin")
	c.clock(at(3*time.Second), at(3*time.Second+time.Millisecond), 499+1040+1000+200)
	assert.Equal(t, uint64(1), c.b.ClockSteps(), "200 ms ahead")
	assert.True(t, c.stepped)
	c.stepped = false
	c.clock(at(4*time.Second), at(4*time.Second+time.Millisecond), (499+1040+1200+1000-30000)&nowBits)
	assert.Equal(t, uint64(2), c.b.ClockSteps(), "30 s back")
	assert.False(t, c.stepped, "a step back is no reason to give the mutex up")
}

// A contention that knows another session holds the named lock runs the plain acquire:
// the one that takes the lock cannot begin a tenure then, and a row another owner left
// unchanged for longer than its lease (stale: its owner, paused, may hold the lock still)
// must be taken all the same.
func TestLockingAcquireOnlyWithoutAnotherHolder(t *testing.T) {
	c := &contention{locking: "the acquire that takes the lock"}
	c.hand.conn = &sql.Conn{}
	assert.True(t, c.lockable(), "pinned, idle, nobody known to hold the lock")
	c.hand.other = true
	assert.False(t, c.lockable(), "another session holds the lock")
	c.hand.other, c.hand.holds = false, true
	assert.False(t, c.lockable(), "the session holds the lock already")
}
