package simbagocron_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
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
