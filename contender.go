package simba

import "context"

// Contender is a participant in the contention for a mutex: implement it and pass it to
// NewService. The service calls OnAcquired when the contender becomes the owner and
// OnReleased when it stops being the owner; the two strictly alternate, starting with
// OnAcquired. Renewals are not reported.
//
// Callbacks of one service run one at a time, in order, on a goroutine of the service's
// (never the one that talks to the store). A slow callback delays later callbacks of the
// same service but not contention; a panicking one is recovered and logged. A callback
// may call Stop or Close of its own service: belief ends at once, and the call returns
// without waiting for the release notification, which follows when the callback returns.
type Contender interface {
	// Mutex returns the name of the mutex to contend for. It must not change.
	Mutex() string
	// ContenderID returns the contender's ID, unique among all contenders of the mutex
	// on the store (see HostContenderID). It must not change.
	ContenderID() string
	// OnAcquired is called when the contender has become the owner. ctx is the tenure
	// context: it is cancelled, with a cause matching ErrOwnershipLost (ErrOwnerChanged,
	// ErrLeaseExpired) or context.Canceled (on Stop),
	// as soon as the contender stops believing it owns the mutex, which can be before
	// OnReleased is delivered. Work done for the tenure should use it.
	OnAcquired(ctx context.Context, s State)
	// OnReleased is called when the contender has stopped being the owner: another owner
	// was seen, the local TTL end passed, or the service stopped.
	OnReleased(s State)
}

// Retriever observes who owns a mutex without contending for it: pass it to
// NewRetrievalService. It is called, as Contender callbacks are, one change at a time.
type Retriever interface {
	// Mutex returns the name of the mutex to observe. It must not change.
	Mutex() string
	// NotifyOwner is called whenever the owner ID changes, including to and from "no
	// owner". Renewals are not reported.
	NotifyOwner(s State)
}

// ContenderFuncs adapts plain functions to the Contender interface. Nil functions are
// skipped.
type ContenderFuncs struct {
	// MutexName is returned by Mutex.
	MutexName string
	// ID is returned by ContenderID; see HostContenderID and UUIDContenderID.
	ID string
	// Acquired is called by OnAcquired.
	Acquired func(ctx context.Context, s State)
	// Released is called by OnReleased.
	Released func(s State)
}

var _ Contender = ContenderFuncs{}

// Mutex returns f.MutexName.
func (f ContenderFuncs) Mutex() string { return f.MutexName }

// ContenderID returns f.ID.
func (f ContenderFuncs) ContenderID() string { return f.ID }

// OnAcquired calls f.Acquired if it is set.
func (f ContenderFuncs) OnAcquired(ctx context.Context, s State) {
	if f.Acquired != nil {
		f.Acquired(ctx, s)
	}
}

// OnReleased calls f.Released if it is set.
func (f ContenderFuncs) OnReleased(s State) {
	if f.Released != nil {
		f.Released(s)
	}
}

// RetrieverFunc adapts a function to the Retriever interface.
type RetrieverFunc struct {
	// MutexName is returned by Mutex.
	MutexName string
	// Notify is called by NotifyOwner; nil is skipped.
	Notify func(s State)
}

var _ Retriever = RetrieverFunc{}

// Mutex returns f.MutexName.
func (f RetrieverFunc) Mutex() string { return f.MutexName }

// NotifyOwner calls f.Notify if it is set.
func (f RetrieverFunc) NotifyOwner(s State) {
	if f.Notify != nil {
		f.Notify(s)
	}
}
