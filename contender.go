package simba

import "context"

// Contender is a participant in the contention for a mutex, for NewService. OnAcquired and
// OnReleased strictly alternate, starting with OnAcquired; renewals are not reported. A
// service's callbacks run one at a time, in order, off the goroutine that talks to the
// store; a panic is recovered and logged. A callback may call Stop or Close of its own
// service: belief ends at once, and OnReleased follows when the callback returns.
type Contender interface {
	// Mutex returns the name of the mutex to contend for. It must not change.
	Mutex() string
	// ContenderID returns the contender's ID, unique among the mutex's contenders on the
	// store (see HostContenderID). It must not change.
	ContenderID() string
	// OnAcquired is called when the contender has become the owner. ctx is the tenure
	// context: it ends, with a cause, as soon as the contender stops believing it owns
	// the mutex (see Lease.Context), possibly before OnReleased.
	OnAcquired(ctx context.Context, s State)
	// OnReleased is called when the contender has stopped being the owner.
	OnReleased(s State)
}

// Retriever observes who owns a mutex without contending, for NewRetrievalService; it is
// called as a Contender is, one change at a time.
type Retriever interface {
	// Mutex returns the name of the mutex to observe. It must not change.
	Mutex() string
	// NotifyOwner is called whenever the owner ID changes, to and from "no owner".
	NotifyOwner(s State)
}

// ContenderFuncs adapts plain functions to the Contender interface. Nil functions are
// skipped.
type ContenderFuncs struct {
	MutexName string                             // returned by Mutex
	ID        string                             // returned by ContenderID
	Acquired  func(ctx context.Context, s State) // called by OnAcquired
	Released  func(s State)                      // called by OnReleased
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
	MutexName string        // returned by Mutex
	Notify    func(s State) // called by NotifyOwner
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
