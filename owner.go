package simba

import (
	"fmt"
	"time"
)

// Owner is a mutex's owner record (the zero Owner: none); its instants are local (send
// time plus the store's durations).
type Owner struct {
	ID           string    // the owner's contender ID; empty: no owner
	AcquiredAt   time.Time // when the tenure began, as far as the store tells
	TTLAt        time.Time // until then the owner holds the mutex exclusively
	TransitionAt time.Time // until then only the owner may renew
	Token        uint64    // the tenure's fencing token; zero when the store does not tell it
	Value        string    // the tenure's WithOwnerValue; empty when none or not told
}

// IsZero reports whether o is the zero Owner ("no owner").
func (o Owner) IsZero() bool { return o == Owner{} }

// OwnedBy reports whether contenderID, not empty, names the owner.
func (o Owner) OwnedBy(contenderID string) bool { return contenderID != "" && o.ID == contenderID }

// InTTL reports whether now is before the end of the owner's TTL.
func (o Owner) InTTL(now time.Time) bool { return o.ID != "" && now.Before(o.TTLAt) }

// InTransition reports whether now is not after TransitionAt.
func (o Owner) InTransition(now time.Time) bool { return o.ID != "" && !now.After(o.TransitionAt) }

// HasOwner reports whether the record names an owner at now (InTransition).
func (o Owner) HasOwner(now time.Time) bool { return o.InTransition(now) }

// String formats the record for logs.
func (o Owner) String() string {
	if o.IsZero() {
		return "no owner"
	}
	return fmt.Sprintf("%s (token %d, ttl at %s, transition at %s)",
		o.ID, o.Token, o.TTLAt.Format(time.RFC3339Nano), o.TransitionAt.Format(time.RFC3339Nano))
}
