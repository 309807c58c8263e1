package simba_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

// A renewal that the store does not answer is cut short by Stop, not left to run to its call
// timeout: the lifecycle's own store calls end when it halts.
func TestStopCutsAnUnansweredRenewalShort(t *testing.T) {
	eachFaultyKind(t, func(t *testing.T, _ *memory.Store, f *faultyBackend, b simba.Backend) {
		svc, err := simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "me"},
			simba.WithTTL(time.Hour), simba.WithCallTimeout(30*time.Minute))
		require.NoError(t, err)
		defer svc.Close()
		require.NoError(t, svc.Start(context.Background()))
		require.Eventually(t, svc.IsOwner, time.Minute, time.Second)
		f.hang(opAcquire, true)
		renewals := f.count(opAcquire)
		for f.count(opAcquire) == renewals {
			time.Sleep(time.Minute) // fake time: until the renewal is due
		}
		began := time.Now()
		require.NoError(t, svc.Stop(context.Background()))
		assert.Zero(t, time.Since(began), "Stop waited for the unanswered renewal's call timeout")
	})
}
