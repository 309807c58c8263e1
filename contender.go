package simba

import "context"

// Contender contends for a mutex (NewService); Mutex and ContenderID must not change.
// Callbacks alternate, OnAcquired first, off the store's goroutine, panics logged; one may
// Stop or Close its own service (belief ends at once, OnReleased follows).
type Contender interface {
	Mutex() string
	// ContenderID is unique among the mutex's contenders on the store (see HostContenderID).
	ContenderID() string
	// OnAcquired is called on becoming the owner, with the tenure context (see
	// Lease.Context), which may end before OnReleased.
	OnAcquired(ctx context.Context, s State)
	// OnReleased is called on ceasing to be the owner.
	OnReleased(s State)
}

// Retriever observes a mutex for NewRetrievalService, told at every change of owner
// ID, to and from "no owner".
type Retriever interface {
	Mutex() string
	NotifyOwner(s State)
}

// ContenderFuncs adapts plain functions to Contender, skipping nil ones.
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

// RetrieverFunc adapts a function to Retriever; a nil one is skipped.
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
