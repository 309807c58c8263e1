package jdbc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// An owner without a value clears its ID's value row once, at its tenure's beginning, and
// its renewals then clear nothing, however many pairs the backend has cleared since: it
// remembered 4,096 and then forgot them all, so that with 10,000 mutexes held every
// renewal went with a DELETE.
func TestRenewalsClearValueOnce(t *testing.T) {
	needServer(t)
	var s statements
	b, err := jdbc.New(countedDB(t, "mysql", server.DSN(), &s))
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	const ttl = 2 * time.Second
	l, err := simba.NewLocker(b, mutexName(t), simba.WithTTL(ttl))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Release(t.Context()) })
	b.RememberClearings(jdbc.MaxCleared) // other tenures'
	s.take()
	require.Eventually(t, func() bool { return s.count("acquire") >= 2 }, time.Minute, 10*time.Millisecond, "two renewals")
	counts := s.take()
	require.NoError(t, lease.Context().Err())
	assert.Zero(t, counts["delete"], "value rows cleared by renewals: %v", counts)
}

// count returns how many statements of kind s has counted so far.
func (s *statements) count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[kind]
}
