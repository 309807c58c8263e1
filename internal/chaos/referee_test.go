package chaos

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefereeFencesAndLogs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "referee.log")
	log, err := CreateLog(path, "referee")
	require.NoError(t, err)
	r, err := NewReferee(log, true)
	require.NoError(t, err)
	c, err := DialReferee(r.Addr())
	require.NoError(t, err)
	ok, err := c.Write("m", 5, "a", 1)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = c.Write("m", 4, "b", 1)
	require.NoError(t, err)
	assert.False(t, ok, "a lower token is rejected")
	ok, err = c.Write("m", 5, "a", 2)
	require.NoError(t, err)
	assert.True(t, ok, "the same token is accepted")
	ok, err = c.Write("other", 1, "c", 1)
	require.NoError(t, err)
	assert.True(t, ok, "mutexes are fenced separately")
	require.NoError(t, c.Increment("m", time.Millisecond))
	require.NoError(t, c.Increment("m", 0))
	assert.Equal(t, int64(2), r.Shadow("m"))
	require.NoError(t, c.Close())
	require.NoError(t, r.Close())
	require.NoError(t, log.Close())

	events, err := ReadLogs(path)
	require.NoError(t, err)
	kinds := []Kind{}
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	assert.Equal(t, []Kind{KindWriteOK, KindWriteStale, KindWriteOK, KindWriteOK}, kinds)
}

func TestUnfencedRefereeAcceptsStaleWrites(t *testing.T) {
	log, err := CreateLog(filepath.Join(t.TempDir(), "r.log"), "referee")
	require.NoError(t, err)
	defer log.Close()
	r, err := NewReferee(log, false)
	require.NoError(t, err)
	defer r.Close()
	c, err := DialReferee(r.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, _ = c.Write("m", 5, "a", 1)
	ok, err := c.Write("m", 4, "b", 1)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestMonotonicClockAdvances(t *testing.T) {
	a := Now()
	time.Sleep(time.Millisecond)
	assert.Greater(t, Now(), a)
}
