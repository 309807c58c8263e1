package simba

import (
	"time"

	"github.com/simba-go/simba/backend"
)

// Backend is a store, as the New of each package under backend/ returns, whose contract
// is in package backend.
type Backend = backend.Backend

// ownerAt converts rec to an Owner whose instants count from sent, the local time at which
// the request was sent. The store read its clock after sent, so the owner's instants come
// out no later than the store's own.
func ownerAt(rec backend.Record, sent time.Time) Owner {
	if rec.Owner == "" {
		return Owner{}
	}
	return Owner{
		ID:           rec.Owner,
		AcquiredAt:   sent.Add(-rec.Held),
		TTLAt:        sent.Add(rec.TTL),
		TransitionAt: sent.Add(rec.Transition),
		Token:        rec.Token,
		Value:        rec.Value,
	}
}
