package simbagocron_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/simbagocron"
)

// newLocker returns a Locker on b, closed when the test ends.
func newLocker(t *testing.T, b simba.Backend, opts ...simbagocron.Option) *simbagocron.Locker {
	t.Helper()
	l, err := simbagocron.NewLocker(b, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestLockerHoldsAtLeastMinHold: a run that ends at once keeps its mutex until the minimum
// hold has passed, even when gocron's context has ended, and Unlock returns at once.
func TestLockerHoldsAtLeastMinHold(t *testing.T) {
	for name, newBackend := range stores() {
		t.Run(name, func(t *testing.T) {
			const hold = 2 * time.Second
			a := newLocker(t, newBackend(t), simbagocron.WithMinHold(hold))
			b := newLocker(t, newBackend(t))
			job := "gocron-hold-" + name

			k, err := a.Lock(t.Context(), job)
			require.NoError(t, err)
			ended, cancel := context.WithCancel(t.Context())
			cancel() // as gocron's job context is when the scheduler shuts down
			require.NoError(t, k.Unlock(ended))
			_, err = b.Lock(t.Context(), job)
			require.ErrorIs(t, err, simba.ErrNotAcquired, "the mutex is held for the minimum hold after the run")
			assert.NotErrorIs(t, err, simba.ErrRefused)

			eventually(t, "the hold ends", func() bool {
				k, err := b.Lock(t.Context(), job)
				if err != nil {
					return false
				}
				require.NoError(t, k.Unlock(t.Context())) // b's own hold: Close ends it
				return true
			})
			assert.ErrorIs(t, k.Unlock(t.Context()), simba.ErrNotOwner, "a second Unlock")
		})
	}
}

// TestLockerCloseEndsHolds: Close releases a held mutex at once rather than after the
// minimum hold.
func TestLockerCloseEndsHolds(t *testing.T) {
	newBackend := stores()["memory"]
	a, err := simbagocron.NewLocker(newBackend(t), simbagocron.WithMinHold(time.Hour))
	require.NoError(t, err)
	b := newLocker(t, newBackend(t), simbagocron.WithMinHold(0))

	k, err := a.Lock(t.Context(), "job")
	require.NoError(t, err)
	require.NoError(t, k.Unlock(t.Context()))
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("Close waits for the minimum hold")
	}
	k, err = b.Lock(t.Context(), "job")
	require.NoError(t, err, "the closed Locker's hold is over")
	require.NoError(t, k.Unlock(t.Context()))
}

func TestNewLockerInvalid(t *testing.T) {
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	for name, opt := range map[string]simbagocron.Option{
		"negative hold": simbagocron.WithMinHold(-time.Millisecond),
		"nil logger":    simbagocron.WithLogger(nil),
		"simba option":  simbagocron.WithSimbaOptions(simba.WithTTL(-time.Second)),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := simbagocron.NewLocker(b, opt)
			assert.ErrorIs(t, err, simba.ErrInvalidArgument)
		})
	}
	l := newLocker(t, b)
	k, err := l.Lock(t.Context(), "job")
	require.NoError(t, err)
	assert.ErrorIs(t, k.Unlock(nil), simba.ErrInvalidArgument) //nolint:staticcheck // a nil context is the point
	require.NoError(t, k.Unlock(t.Context()), "a rejected Unlock leaves the lock to unlock")
}

// refusingBackend is a store that refuses the client, as backends report it: every
// contention's start-up fails with an error matching simba.ErrRefused, the way a wrong
// password does.
type refusingBackend struct{}

func (refusingBackend) StartContend(context.Context, backend.Participant) (backend.Contention, error) {
	return nil, fmt.Errorf("%w: password authentication failed for user \"simba\"", simba.ErrRefused)
}

// logRecorder is a slog.Handler that keeps the records at or above a level.
type logRecorder struct {
	level   slog.Level
	mu      sync.Mutex
	records []slog.Record
	logged  chan struct{} // receives after each record, never blocking
}

func newLogRecorder(level slog.Level) *logRecorder {
	return &logRecorder{level: level, logged: make(chan struct{}, 1)}
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *logRecorder) WithGroup(string) slog.Handler                { return r }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.records = append(r.records, rec)
	r.mu.Unlock()
	select {
	case r.logged <- struct{}{}:
	default:
	}
	return nil
}

// errs returns the "err" attributes of the records kept.
func (r *logRecorder) errs() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, rec := range r.records {
		rec.Attrs(func(a slog.Attr) bool {
			if err, ok := a.Value.Any().(error); ok && a.Key == "err" {
				errs = append(errs, err)
			}
			return true
		})
	}
	return errs
}

// TestLockerLogsRefusal: a store that refuses the client makes gocron skip every run, and
// gocron drops Lock's error; the Locker logs it at Error, and its error tells it apart
// from another instance's hold, which is not logged at Error.
func TestLockerLogsRefusal(t *testing.T) {
	logged := newLogRecorder(slog.LevelError)
	refused := newLocker(t, refusingBackend{}, simbagocron.WithLogger(slog.New(logged)))
	_, err := refused.Lock(t.Context(), "report")
	require.ErrorIs(t, err, simba.ErrRefused)
	require.Len(t, logged.errs(), 1, "the refusal is logged at Error")
	assert.ErrorIs(t, logged.errs()[0], simba.ErrRefused)

	var runs atomic.Int64
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(refused))
	require.NoError(t, err)
	_, err = s.NewJob(gocron.DurationJob(10*time.Millisecond), gocron.NewTask(func() { runs.Add(1) }), gocron.WithName("report"))
	require.NoError(t, err)
	s.Start()
	eventually(t, "a scheduled run's refusal is logged", func() bool { return len(logged.errs()) >= 3 })
	require.NoError(t, s.Shutdown())
	assert.Zero(t, runs.Load(), "no run without the lock")

	busyLogged := newLogRecorder(slog.LevelError)
	b, err := memory.New(memory.NewStore())
	require.NoError(t, err)
	holder := newLocker(t, b)
	other := newLocker(t, b, simbagocron.WithLogger(slog.New(busyLogged)))
	k, err := holder.Lock(t.Context(), "report")
	require.NoError(t, err)
	_, err = other.Lock(t.Context(), "report")
	require.ErrorIs(t, err, simba.ErrNotAcquired)
	assert.NotErrorIs(t, err, simba.ErrRefused, "another holder is no refusal")
	assert.Empty(t, busyLogged.errs(), "another holder is not an error")
	require.NoError(t, k.Unlock(t.Context()))
}
