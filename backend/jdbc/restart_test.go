package jdbc_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/testserver"
)

// privateServer starts a MariaDB of the test's own, to kill and restart or to run with
// extra server options, and stops it when the test ends.
func privateServer(t testing.TB, extra ...string) *testserver.MariaDB {
	t.Helper()
	needServer(t) // the programs are there
	dir, err := os.MkdirTemp("", "simba-my-")
	require.NoError(t, err)
	s, err := startServer(dir, extra...)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = s.Stop()
		_ = os.RemoveAll(dir)
	})
	return s
}

// restart starts a killed server again on the same port and data directory.
func restart(t *testing.T, s *testserver.MariaDB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, s.Start(ctx))
}

// warnings records the Warn records a service logs, with their time.
type warnings struct {
	mu   sync.Mutex
	list []warning
}

type warning struct {
	at  time.Time
	msg string
	err string
}

func (w *warnings) logger() *slog.Logger { return slog.New(w) }

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	rec := warning{at: r.Time, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" {
			rec.err = a.Value.String()
		}
		return true
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, rec)
	return nil
}

func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// since returns the warnings logged after t.
func (w *warnings) since(t time.Time) []warning {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []warning
	for _, x := range w.list {
		if x.at.After(t) {
			out = append(out, x)
		}
	}
	return out
}

// TestServerCrashShortOutage: mariadbd is killed with SIGKILL while a
// contender owns the mutex and another waits, and restarted at once. InnoDB keeps the row;
// the owner's renewals that fall into the outage are retried and succeed before its local
// TTL end, so nothing changes hands: same owner, same token, no callbacks. The pools
// recover, and the pinned connections are replaced.
func TestServerCrashShortOutage(t *testing.T) {
	s := privateServer(t)
	mutex := mutexName(t)
	ba, err := jdbc.New(openOn(t, s))
	require.NoError(t, err)
	bb, err := jdbc.New(openOn(t, s))
	require.NoError(t, err)
	var logs warnings
	// The default TTL of 10 s: an owner renews 3.3 s before its TTL ends, which a
	// restart of a second or two does not reach.
	a := newContender(t, ba, mutex, "a", simba.WithLogger(logs.logger()))
	b := newContender(t, bb, mutex, "b", simba.WithLogger(logs.logger()))
	require.NoError(t, a.svc.Start(t.Context()))
	first := wait(t, a.acquired, 10*time.Second, "acquisition by a")
	require.NoError(t, b.svc.Start(t.Context()))
	waitsBehind(t, b, bb, mutex, "a")
	check := openOn(t, s)
	before := readRow(t, check, mutex)

	require.NoError(t, s.Kill())
	restart(t, s)
	back := time.Now()

	waitUntil(t, 20*time.Second, "a renewal after the restart", func() bool {
		r, err := rowOrErr(check, mutex)
		return err == nil && r.Owner == "a" && r.Version > before.Version
	})
	assert.Empty(t, a.released, "the owner kept believing")
	assert.Empty(t, b.acquired, "nothing changed hands")
	assert.Equal(t, first.After.Token, a.svc.Owner().Token, "the same tenure, the same token")
	assert.True(t, a.svc.IsOwner())
	for _, w := range logs.since(back.Add(time.Second)) {
		t.Errorf("a store error reached the service after the server was back: %s: %s", w.msg, w.err)
	}
	require.NoError(t, a.svc.Stop(t.Context()), "the pinned connection was replaced")
	require.NoError(t, b.svc.Stop(t.Context()))
}

// TestServerCrashLongOutage: mariadbd is killed with SIGKILL and restarted only
// after 2 (ttl + transition). The owner stops believing by its local TTL end; after the
// restart, whoever acquires first gets a larger token (the version survived the crash);
// store errors stop once the server is back.
func TestServerCrashLongOutage(t *testing.T) {
	const ttl, transition = time.Second, 500 * time.Millisecond
	s := privateServer(t)
	mutex := mutexName(t)
	var logs warnings
	opts := []simba.Option{simba.WithTTL(ttl), simba.WithTransition(transition), simba.WithLogger(logs.logger())}
	ba, err := jdbc.New(openOn(t, s))
	require.NoError(t, err)
	bb, err := jdbc.New(openOn(t, s))
	require.NoError(t, err)
	a := newContender(t, ba, mutex, "a", opts...)
	b := newContender(t, bb, mutex, "b", opts...)
	require.NoError(t, a.svc.Start(t.Context()))
	first := wait(t, a.acquired, 10*time.Second, "acquisition by a")
	require.NoError(t, b.svc.Start(t.Context()))
	waitsBehind(t, b, bb, mutex, "a")

	require.NoError(t, s.Kill())
	killed := time.Now()
	lost := wait(t, a.released, ttl+time.Second, "the owner to stop believing")
	t.Logf("the owner stopped believing %v after the crash", time.Since(killed))
	assert.Empty(t, lost.After.ID)
	time.Sleep(time.Until(killed.Add(2 * (ttl + transition)))) // the outage's length
	restart(t, s)
	back := time.Now()

	var next simba.State
	select {
	case next = <-a.acquired:
	case next = <-b.acquired:
	case <-time.After(20 * time.Second):
		t.Fatal("nobody acquired after the server came back")
	}
	t.Logf("%s acquired %v after the restart", next.After.ID, time.Since(back))
	assert.Greater(t, next.After.Token, first.After.Token, "the version survived the crash")
	// A few renewals: the pools serve them without stale-connection errors.
	renewed := time.Now()
	time.Sleep(3 * ttl)
	for _, w := range logs.since(renewed) {
		t.Errorf("a store error after the server was back: %s: %s", w.msg, w.err)
	}
	require.NoError(t, a.svc.Stop(t.Context()))
	require.NoError(t, b.svc.Stop(t.Context()))
}
