package simba_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
)

// errWrongPassword stands for a store's refusal, as a backend reports it.
var errWrongPassword = fmt.Errorf("%w: WRONGPASS invalid username-password pair", simba.ErrRefused)

// errUnreachable stands for an outage.
var errUnreachable = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")

// logRecorder is a slog.Handler that keeps the records it is given.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
	level   slog.Level
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.level }

func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}

func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *logRecorder) WithGroup(string) slog.Handler      { return r }

// lines returns "LEVEL message" for every record so far.
func (r *logRecorder) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		out = append(out, rec.Level.String()+" "+rec.Message)
	}
	return out
}

// has reports whether a record of level whose message contains text was logged.
func (r *logRecorder) has(level slog.Level, text string) bool {
	for _, l := range r.lines() {
		if strings.HasPrefix(l, level.String()+" ") && strings.Contains(l, text) {
			return true
		}
	}
	return false
}

// returnsWithin runs f and fails the test if it has not returned within d.
func returnsWithin[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	out := make(chan T, 1)
	go func() { out <- f() }()
	select {
	case v := <-out:
		return v
	case <-time.After(d):
		t.Fatalf("still waiting after %s", d)
		panic("unreachable")
	}
}

func TestAcquisitionEndsAtOnceOnARefusal(t *testing.T) {
	for _, op := range []string{opStart, opAcquire} {
		for _, kind := range []string{"Locker.Acquire", "Locker.TryAcquire", "Mutexes.Acquire", "Mutexes.TryAcquire"} {
			t.Run(op+"/"+kind, func(t *testing.T) {
				_, b := newFaultyStore()
				b.fail(op, errWrongPassword)
				logs := &logRecorder{}
				opts := []simba.Option{simba.WithTTL(time.Second), simba.WithLogger(slog.New(logs))}
				lockerOpts, mutexesOpts := optionsFor[simba.LockerOption](opts...), optionsFor[simba.MutexesOption](opts...)
				var acquire func(context.Context) (*simba.Lease, error)
				switch kind {
				case "Locker.Acquire", "Locker.TryAcquire":
					l, err := simba.NewLocker(b, "m", lockerOpts...)
					require.NoError(t, err)
					defer l.Close()
					acquire = l.Acquire
					if kind == "Locker.TryAcquire" {
						acquire = l.TryAcquire
					}
				default:
					m, err := simba.NewMutexes(b, mutexesOpts...)
					require.NoError(t, err)
					defer m.Close()
					acquire = func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "m") }
					if kind == "Mutexes.TryAcquire" {
						acquire = func(ctx context.Context) (*simba.Lease, error) { return m.TryAcquire(ctx, "m") }
					}
				}
				// A context that never ends: a refusal must end the acquisition by itself.
				err := returnsWithin(t, 5*time.Second, func() error {
					_, err := acquire(context.Background())
					return err
				})
				require.Error(t, err)
				assert.ErrorIs(t, err, simba.ErrNotAcquired)
				assert.ErrorIs(t, err, simba.ErrRefused)
				assert.Contains(t, err.Error(), "WRONGPASS", "the store's message says what to fix")
				// The error is returned, not logged as well; and a start-up that failed is
				// not reported as a stop.
				if op == opStart {
					assert.False(t, logs.has(slog.LevelInfo, "simba: stopped"), "logs: %q", logs.lines())
				}
			})
		}
	}
}

func TestAcquisitionRetriesAnOutage(t *testing.T) {
	for _, op := range []string{opStart, opAcquire} {
		for _, kind := range []string{"Locker", "Mutexes"} {
			t.Run(op+"/"+kind, func(t *testing.T) {
				_, b := newFaultyStore()
				b.fail(op, errUnreachable)
				opts := []simba.Option{simba.WithTTL(time.Second), simba.WithLogger(slog.New(slog.DiscardHandler))}
				lockerOpts, mutexesOpts := optionsFor[simba.LockerOption](opts...), optionsFor[simba.MutexesOption](opts...)
				var acquire func(context.Context) (*simba.Lease, error)
				if kind == "Locker" {
					l, err := simba.NewLocker(b, "m", lockerOpts...)
					require.NoError(t, err)
					defer l.Close()
					acquire = l.Acquire
				} else {
					m, err := simba.NewMutexes(b, mutexesOpts...)
					require.NoError(t, err)
					defer m.Close()
					acquire = func(ctx context.Context) (*simba.Lease, error) { return m.Acquire(ctx, "m") }
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() {
					_, err := acquire(ctx)
					done <- err
				}()
				// Retried: still waiting after several attempts, until the store is back.
				waitFor(t, func() bool { return b.count(op) >= 3 })
				select {
				case err := <-done:
					t.Fatalf("an outage ended the acquisition: %v", err)
				default:
				}
				b.fail(op, nil)
				select {
				case err := <-done:
					require.NoError(t, err, "acquired once the store answers")
				case <-time.After(10 * time.Second):
					t.Fatal("not acquired after the store came back")
				}
				cancel()
			})
		}
	}
}

func TestRunningServiceRetriesARefusalAtErrorLevel(t *testing.T) {
	_, b := newFaultyStore()
	logs := &logRecorder{}
	acquired := make(chan struct{}, 10)
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "a",
		Acquired: func(context.Context, simba.State) { acquired <- struct{}{} }},
		simba.WithTTL(time.Second), simba.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	defer svc.Close()
	require.NoError(t, svc.Start(context.Background()))
	<-acquired

	b.fail(opAcquire, errWrongPassword) // the password was rotated under the running service
	waitFor(t, func() bool { return errors.Is(svc.Err(), simba.ErrRefused) })
	assert.False(t, svc.Health().Healthy(), "the health check fails while the store refuses")
	waitFor(t, func() bool { return logs.has(slog.LevelError, "refused") })
	assert.Equal(t, simba.StatusRunning, svc.Status(), "a running service keeps retrying")

	b.fail(opAcquire, nil)
	waitFor(t, func() bool { return svc.Err() == nil && svc.IsOwner() })
}

func TestStartFailsAtOnceOnARefusal(t *testing.T) {
	_, b := newFaultyStore()
	b.fail(opStart, errWrongPassword)
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "a"}, simba.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	defer svc.Close()
	err = returnsWithin(t, 5*time.Second, func() error { return svc.Start(context.Background()) })
	assert.ErrorIs(t, err, simba.ErrRefused)
	assert.Equal(t, simba.StatusInitial, svc.Status())
}

// waitFor waits until cond holds, failing the test after 10s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLossIsAWarningAndAReleaseIsNot(t *testing.T) {
	_, b := newFaultyStore()
	logs := &logRecorder{}
	acquired, released := make(chan struct{}, 10), make(chan struct{}, 10)
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "a",
		Acquired: func(context.Context, simba.State) { acquired <- struct{}{} },
		Released: func(simba.State) { released <- struct{}{} }},
		simba.WithTTL(300*time.Millisecond), simba.WithTransition(0), simba.WithLogger(slog.New(logs)))
	require.NoError(t, err)
	defer svc.Close()
	require.NoError(t, svc.Start(context.Background()))
	<-acquired
	b.hang(opAcquire, true) // renewals go unanswered: the lease expires locally
	select {
	case <-released:
	case <-time.After(10 * time.Second):
		t.Fatal("the lease did not expire")
	}
	assert.True(t, logs.has(slog.LevelWarn, "lost"), "a loss is a warning: %q", logs.lines())
	assert.False(t, logs.has(slog.LevelInfo, "released"), "a loss is not a release: %q", logs.lines())

	b.hang(opAcquire, false)
	<-acquired
	require.NoError(t, svc.Stop(context.Background()))
	assert.True(t, logs.has(slog.LevelInfo, "released"), "a graceful release: %q", logs.lines())
}

// TestDefaultLoggerShowsWarnings: without WithLogger, warnings and errors reach the
// process's default logger (slog.Default), so that a refused or failing contender is
// visible without a code change; Info and Debug stay out.
func TestDefaultLoggerShowsWarnings(t *testing.T) {
	var buf syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)

	_, b := newFaultyStore()
	acquired := make(chan struct{}, 10)
	svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "default-logger", ID: "a",
		Acquired: func(context.Context, simba.State) { acquired <- struct{}{} }}, simba.WithTTL(time.Second))
	require.NoError(t, err)
	defer svc.Close()
	require.NoError(t, svc.Start(context.Background()))
	<-acquired
	b.fail(opAcquire, errWrongPassword)
	waitFor(t, func() bool {
		return strings.Contains(buf.String(), "mutex=default-logger") && strings.Contains(buf.String(), "level=ERROR")
	})
	assert.Contains(t, buf.String(), "WRONGPASS")
	assert.NotContains(t, buf.String(), "level=INFO", "acquisitions are not logged by default")
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHeldIsToldFromAStoreError: an acquisition that finds the mutex held says so
// (ErrHeld), and one that the store failed does not, so that a caller can skip a held
// mutex quietly and report a failing store.
func TestHeldIsToldFromAStoreError(t *testing.T) {
	_, b := newFaultyStore()
	holder, err := simba.NewLocker(b, "m", simba.WithContenderID("holder"))
	require.NoError(t, err)
	defer holder.Close()
	lease, err := holder.Acquire(t.Context())
	require.NoError(t, err)

	l, err := simba.NewLocker(b, "m", simba.WithContenderID("other"))
	require.NoError(t, err)
	defer l.Close()
	m, err := simba.NewMutexes(b, simba.WithContenderID("others"))
	require.NoError(t, err)
	defer m.Close()

	_, err = l.TryAcquire(t.Context())
	assert.ErrorIs(t, err, simba.ErrHeld)
	assert.ErrorIs(t, err, simba.ErrNotAcquired)
	_, err = m.TryAcquire(t.Context(), "m")
	assert.ErrorIs(t, err, simba.ErrHeld)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	_, err = l.Acquire(ctx)
	cancel()
	assert.ErrorIs(t, err, simba.ErrHeld)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, lease.Release(t.Context()))
	b.fail(opStart, errUnreachable)
	_, err = l.TryAcquire(t.Context())
	assert.ErrorIs(t, err, simba.ErrNotAcquired)
	assert.NotErrorIs(t, err, simba.ErrHeld, "an outage is no hold")
	b.fail(opStart, errWrongPassword)
	_, err = m.TryAcquire(t.Context(), "m")
	assert.NotErrorIs(t, err, simba.ErrHeld, "a refusal is no hold")
}
