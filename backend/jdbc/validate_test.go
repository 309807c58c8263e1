package jdbc_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/options"
)

// unreachableDB returns a pool whose server does not exist: any I/O on it would fail, so
// a call that succeeds or fails with a validation error did none.
func unreachableDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", "simba:simba@tcp(127.0.0.1:1)/simba?interpolateParams=true&timeout=100ms")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestBadInput is the catalogue of bad input for the SQL backend: every row fails with an
// error wrapping simba.ErrInvalidArgument, before any I/O and without goroutines.
func TestBadInput(t *testing.T) {
	db := unreachableDB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := jdbc.New(db)
	require.NoError(t, err)
	long := func(r string, n int) string { return strings.Repeat(r, n) }
	cases := []struct {
		name, mutex, id string
		opts            []simba.Option
	}{
		{name: "empty mutex", mutex: "", id: "c"},
		{name: "blank mutex", mutex: " \t", id: "c"},
		{name: "leading space", mutex: " m", id: "c"},
		{name: "trailing space (PAD SPACE collations fold it)", mutex: "m ", id: "c"},
		{name: "67 ASCII characters", mutex: long("m", 67), id: "c"},
		{name: "67 three-byte characters", mutex: long("界", 67), id: "c"},
		{name: "67 four-byte characters", mutex: long("😀", 67), id: "c"},
		{name: "NUL", mutex: "a\x00b", id: "c"},
		{name: "control character", mutex: "a\nb", id: "c"},
		{name: "invalid UTF-8", mutex: "a\xffb", id: "c"},
		{name: "empty contender ID", mutex: "m", id: ""},
		{name: "129-character contender ID", mutex: "m", id: long("c", 129)},
		{name: "129 four-byte characters", mutex: "m", id: long("😀", 129)},
		{name: "contender ID with a control character", mutex: "m", id: "c\x01"},
		{name: "ttl 0", mutex: "m", id: "c", opts: []simba.Option{simba.WithTTL(0)}},
		{name: "ttl not whole ms", mutex: "m", id: "c", opts: []simba.Option{simba.WithTTL(1500 * time.Microsecond)}},
		{name: "negative transition", mutex: "m", id: "c", opts: []simba.Option{simba.WithTransition(-time.Second)}},
		{name: "ttl + transition overflowing", mutex: "m", id: "c", opts: []simba.Option{simba.WithTTL(time.Duration(1<<62) / time.Millisecond * time.Millisecond), simba.WithTransition(time.Duration(1<<62) / time.Millisecond * time.Millisecond)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := simba.NewService(b, simba.ContenderFuncs{MutexName: c.mutex, ID: c.id}, options.As[simba.ServiceOption](c.opts)...)
			assert.ErrorIs(t, err, simba.ErrInvalidArgument, "NewService")
			if c.id != "" {
				_, err = simba.NewLocker(b, c.mutex, options.As[simba.LockerOption](c.opts, simba.WithContenderID(c.id))...)
				assert.ErrorIs(t, err, simba.ErrInvalidArgument, "NewLocker")
			}
		})
	}
	var arg *simba.ArgumentError
	_, err = simba.NewLocker(b, long("m", 67))
	require.ErrorAs(t, err, &arg)
	assert.Equal(t, "mutex", arg.Field)
	assert.Contains(t, arg.Rule, "66", "the error names the limit")
	_, err = simba.NewLocker(b, "m", simba.WithContenderID(long("c", 129)))
	require.ErrorAs(t, err, &arg)
	assert.Equal(t, "contender ID", arg.Field)
	assert.Contains(t, arg.Rule, "128")
}

// Names at the limits pass, counted in characters as MariaDB counts them for utf8mb4.
func TestValidatorCountsCharacters(t *testing.T) {
	b, err := jdbc.New(unreachableDB(t))
	require.NoError(t, err)
	for _, r := range []string{"m", "é", "界", "😀"} {
		assert.NoError(t, b.ValidateMutex(strings.Repeat(r, jdbc.MaxMutexLength)), r)
		assert.ErrorIs(t, b.ValidateMutex(strings.Repeat(r, jdbc.MaxMutexLength+1)), simba.ErrInvalidArgument, r)
		assert.NoError(t, b.ValidateContenderID(strings.Repeat(r, jdbc.MaxContenderIDLength)), r)
		assert.ErrorIs(t, b.ValidateContenderID(strings.Repeat(r, jdbc.MaxContenderIDLength+1)), simba.ErrInvalidArgument, r)
	}
	assert.ErrorIs(t, b.ValidateMutex("\xff"), simba.ErrInvalidArgument)
}

func TestNewRejectsBadArguments(t *testing.T) {
	_, err := jdbc.New(nil)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "nil *sql.DB")
	db := unreachableDB(t)
	for _, name := range []string{"", "a.b.c", "1t", "t;DROP TABLE x", "t`", "a b", strings.Repeat("t", 65)} {
		_, err = jdbc.New(db, jdbc.WithTable(name))
		assert.ErrorIs(t, err, simba.ErrInvalidArgument, "table %q", name)
	}
	_, err = jdbc.New(db, jdbc.WithDialect(nil))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "nil dialect")
	_, err = jdbc.New(db, jdbc.WithHandOverConnections(-1))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "negative hand-over connections")
	_, err = jdbc.New(db, jdbc.WithTable("simba.simba_mutex"), jdbc.WithDialect(jdbc.MySQL), jdbc.WithHandOver(false), nil)
	assert.NoError(t, err, "a nil option is skipped")

	var nilCtx context.Context
	assert.ErrorIs(t, jdbc.CreateTable(nilCtx, db), simba.ErrInvalidArgument)
	assert.ErrorIs(t, jdbc.CreateTable(t.Context(), nil), simba.ErrInvalidArgument)
	assert.ErrorIs(t, jdbc.CreateTable(t.Context(), db, jdbc.WithTable("x y")), simba.ErrInvalidArgument)
	_, err = jdbc.DDL(jdbc.WithTable("x y"))
	assert.ErrorIs(t, err, simba.ErrInvalidArgument)
}

// An unreachable server fails Start within the call timeout, with the driver's error and
// not a validation error; nothing is left running.
func TestStartUnreachable(t *testing.T) {
	db := unreachableDB(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := jdbc.New(db)
	require.NoError(t, err)
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c"}, simba.WithTTL(time.Second))
	require.NoError(t, err)
	began := time.Now()
	err = svc.Start(t.Context())
	require.Error(t, err)
	assert.False(t, errors.Is(err, simba.ErrInvalidArgument))
	assert.Less(t, time.Since(began), 5*time.Second)
	assert.Equal(t, simba.StatusInitial, svc.Status())
}

// Close frees what the backend holds and is final: later contentions fail with ErrClosed.
func TestClosedBackend(t *testing.T) {
	b := newBackend(t)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "Close is idempotent")
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: mutexName(t), ID: "c"})
	require.NoError(t, err)
	assert.ErrorIs(t, svc.Start(t.Context()), simba.ErrClosed)
}
