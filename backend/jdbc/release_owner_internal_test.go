package jdbc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// The lookups ReleaseOwner matches owner records against: a record is matched by its
// instants to the lookup that reported it; two lookups at different versions that could
// both have reported it, or one the backend may have forgotten, make ReleaseOwner refuse.
func TestLookupsTellTheVersion(t *testing.T) {
	rec := backend.Record{Owner: "a", TTL: 20 * time.Second, Transition: 30 * time.Second, Held: 5 * time.Second}
	lookup := func(l *lookups, version uint64) simba.Owner {
		from := time.Now()
		sent := time.Now() // the service's send time
		l.add(lookedUp{mutex: "m", owner: "a", version: version, rec: rec, from: from, to: time.Now()})
		return ownerAt(rec, sent)
	}

	var l lookups
	o := lookup(&l, 7)
	v, live, err := l.versionOf("m", o)
	require.NoError(t, err)
	assert.True(t, live)
	assert.Equal(t, uint64(7), v)
	_, _, err = l.versionOf("other", o)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "another mutex's")
	moved := o
	moved.AcquiredAt = moved.AcquiredAt.Add(time.Nanosecond)
	_, _, err = l.versionOf("m", moved)
	assert.ErrorIs(t, err, simba.ErrInvalidArgument, "altered")

	// Another lookup whose window holds o's send time, at another version.
	now := time.Now()
	sent := o.TransitionAt.Add(-rec.Transition)
	l.add(lookedUp{mutex: "m", owner: "a", version: 9, rec: rec, from: sent.Add(-time.Millisecond), to: now})
	_, _, err = l.versionOf("m", o)
	assert.ErrorIs(t, err, ErrChangedSinceLookup, "ambiguous")

	var full lookups
	first := lookup(&full, 1)
	for i := range maxLookups {
		lookup(&full, uint64(i+2))
	}
	_, _, err = full.versionOf("m", first)
	assert.ErrorIs(t, err, ErrChangedSinceLookup, "forgotten")
	assert.Len(t, full.seen, maxLookups)

	expired := ownerAt(rec, time.Now().Add(-time.Minute))
	_, live, err = l.versionOf("m", expired)
	require.NoError(t, err)
	assert.False(t, live, "its transition window has ended")
}

// ownerAt is the owner a service makes of rec, a record read at sent.
func ownerAt(rec backend.Record, sent time.Time) simba.Owner {
	return simba.Owner{ID: rec.Owner, AcquiredAt: sent.Add(-rec.Held), TTLAt: sent.Add(rec.TTL),
		TransitionAt: sent.Add(rec.Transition), Token: rec.Token}
}
