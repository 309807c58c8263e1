package jdbc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// ErrChangedSinceLookup is returned by ReleaseOwner when the owner has renewed its tenure
// since the lookup, or when the backend cannot tell which of its lookups the owner record
// came from: look the owner up again.
var ErrChangedSinceLookup = errors.New("simba/jdbc: the owner record is out of date")

// ReleaseOwner frees mutex in the name of owner, as simba.Lookup on this backend reported
// it, if the row still holds exactly the write that lookup read: an administrator's release
// of a stuck owner (storeurl.Release). It runs the owner's own release at the version the
// lookup read, so whatever the owner wrote since leaves the row alone, and the row's
// renewal mark (see the package doc, Hand-over, end to end) tells what that was: after a
// renewal, ReleaseOwner fails with ErrChangedSinceLookup (look again: the tenure goes on);
// after a new tenure (a JVM Simba owner's renewal counts as one), or when the row names
// another owner or none, the tenure looked up is over and it returns nil, as for the zero
// Owner.
//
// The backend knows a lookup by the instants in its record, and remembers it until the
// record's transition window ends (at most 1,024 at once). A record with another owner's
// ID in it releases nothing; one of another backend's lookup, or with other instants,
// fails with an error matching simba.ErrInvalidArgument; one the backend may have
// forgotten, or cannot tell from another lookup's, fails with ErrChangedSinceLookup. The
// owner is not told: it goes on believing until its next renewal finds the row changed.
func (b *Backend) ReleaseOwner(ctx context.Context, mutex string, owner simba.Owner) error {
	if ctx == nil {
		return simba.InvalidArgument("ctx", nil, "must not be nil")
	}
	if err := simba.ValidateMutex(mutex); err != nil {
		return err
	}
	if err := b.ValidateMutex(mutex); err != nil {
		return err
	}
	if owner.IsZero() {
		return nil
	}
	if err := b.usable(ctx); err != nil {
		return err
	}
	version, live, err := b.lookups.versionOf(mutex, owner)
	if err != nil {
		return err
	}
	s, err := b.checkedSchema(ctx)
	if err != nil {
		return err
	}
	if live {
		released, err := b.release(ctx, b.db, s, mutex, owner.ID, version)
		if err != nil {
			return b.refused(fmt.Errorf("simba/jdbc: release for %s: %w", owner.ID, err))
		}
		if released {
			return nil
		}
	}
	// Not released: has the owner written the row since, or does the row name another
	// owner, or none?
	r, err := b.read(ctx, b.db, s, mutex)
	switch {
	case errors.Is(err, errNoRow):
		return nil
	case err != nil:
		return b.refused(fmt.Errorf("simba/jdbc: release for %s: read the row: %w", owner.ID, err))
	case r.record().Owner == owner.ID && renewalMark(r):
		return fmt.Errorf("%w: %s renewed since the lookup: look again", ErrChangedSinceLookup, owner.ID)
	}
	return nil // a new tenure since, another owner, or none
}

// maxLookups bounds how many lookups' reads a backend remembers for ReleaseOwner.
const maxLookups = 1024

// lookups remembers the rows that retrievers' first lookups read (simba.Lookup's, and a
// retrieval service's first), so that ReleaseOwner can tell the version of the row an
// owner record reported. Safe for concurrent use.
type lookups struct {
	mu   sync.Mutex
	seen []lookedUp // oldest first
	// forgot is the latest end of the window of a lookup forgotten before its record's
	// transition window ended; a record whose tenure was written before it may be of a
	// forgotten lookup.
	forgot time.Time
}

// lookedUp is a row a lookup read. The record it reported was made at an instant between
// from (the contention's start) and to (the read's sending): the service adds the
// record's durations to the time it sent the request.
type lookedUp struct {
	mutex, owner string
	version      uint64
	rec          backend.Record
	from, to     time.Time
}

// add remembers a lookup's read.
func (l *lookups) add(e lookedUp) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(time.Now())
	if len(l.seen) == maxLookups {
		if end := l.seen[0].to; end.After(l.forgot) {
			l.forgot = end
		}
		l.seen = l.seen[1:]
	}
	l.seen = append(l.seen, e)
}

// expire forgets the lookups whose records' transition windows have ended by now: a record
// whose window has ended is not matched (versionOf).
func (l *lookups) expire(now time.Time) {
	kept := l.seen[:0]
	for _, e := range l.seen {
		if !now.After(e.to.Add(e.rec.Transition)) {
			kept = append(kept, e)
		}
	}
	clear(l.seen[len(kept):])
	l.seen = kept
}

// versionOf returns the version of the row that the lookup which reported o read. live
// is false when there is no such tenure to release: o's transition window has ended (the
// lookup is forgotten by then, and the row is free or written again since), or o is a
// record a lookup reported with another owner's ID in it.
func (l *lookups) versionOf(mutex string, o simba.Owner) (version uint64, live bool, _ error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.After(o.TransitionAt) {
		return 0, false, nil
	}
	l.expire(now)
	found, other := 0, false
	for _, e := range l.seen {
		switch {
		case e.mutex != mutex || !e.reported(o):
		case e.owner != o.ID:
			other = true
		case found == 0 || e.version != version:
			version = e.version
			found++
		}
	}
	switch {
	case !l.forgot.IsZero() && !o.AcquiredAt.After(l.forgot):
		return 0, false, fmt.Errorf("%w: the backend may have forgotten the lookup: look again", ErrChangedSinceLookup)
	case found > 1:
		return 0, false, fmt.Errorf("%w: lookups at different versions reported the same record: look again", ErrChangedSinceLookup)
	case found == 1:
		return version, true, nil
	case other:
		// The instants of a lookup that found another owner: o names no tenure the row
		// held then, and none to release.
		return 0, false, nil
	}
	return 0, false, simba.InvalidArgument("owner", o.ID, "must be an owner record that simba.Lookup on this backend reported")
}

// reported reports whether o is the record e's lookup reported: o's instants are e's
// durations from one sending instant within e's window.
func (e lookedUp) reported(o simba.Owner) bool {
	sent := o.TransitionAt.Add(-e.rec.Transition)
	if sent.Before(e.from) || sent.After(e.to) || !o.TTLAt.Equal(sent.Add(e.rec.TTL)) {
		return false
	}
	if e.rec.Held == 0 {
		return o.AcquiredAt.IsZero()
	}
	return o.AcquiredAt.Equal(sent.Add(-e.rec.Held))
}
