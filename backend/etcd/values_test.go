package etcd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// An owner value is the contender key's value, after its ID and a NUL: put by the join
// that creates the key, and read with the owner's key, so a record's value is always the
// tenure's its token names. A contender without a value puts its ID alone.
func TestOwnerValueInTheKey(t *testing.T) {
	b := newBackend(t)
	vk, ok := simba.Backend(b.Backend).(backend.ValueKeeper)
	require.True(t, ok, "the backend keeps owner values")
	require.True(t, vk.KeepsValues(backend.Mutex))
	assert.False(t, vk.KeepsValues(backend.Semaphore), "holds keep no values")
	const mutex = "valued"
	dir := b.MutexPrefix(mutex)

	l, err := simba.NewLocker(b, mutex, simba.WithContenderID("a"), simba.WithOwnerValue("10.0.0.7:8080"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.7:8080", lease.Owner().Value)
	_, values, revs := contenders(t, b.client, dir)
	assert.Equal(t, []string{"a\x0010.0.0.7:8080"}, values)
	assert.Equal(t, uint64(revs[0]), lease.Token())

	// A waiter on another backend reads the owner's value with its key.
	other := newBackend(t)
	waiting := acquire(t, newLocker(t, other, mutex, "c"))
	awaitKeys(t, b.client, dir, 2)
	_, values, _ = contenders(t, b.client, dir)
	assert.Equal(t, "c", values[1], "a contender without a value puts its ID alone")
	o, err := simba.Lookup(t.Context(), other, mutex)
	require.NoError(t, err)
	assert.Equal(t, simba.Owner{ID: "a", Token: lease.Token(), Value: "10.0.0.7:8080"}, simba.Owner{ID: o.ID, Token: o.Token, Value: o.Value})

	require.NoError(t, lease.Release(t.Context()))
	next := await(t, waiting, "c acquires")
	require.NotNil(t, next)
	o, err = simba.Lookup(t.Context(), b, mutex)
	require.NoError(t, err)
	assert.Equal(t, "c", o.ID)
	assert.Empty(t, o.Value, "the previous tenure's value does not show")
	require.NoError(t, next.Release(t.Context()))

	names, err := b.Mutexes(t.Context())
	require.NoError(t, err)
	assert.NotContains(t, names, mutex)
}
