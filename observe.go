package simba

import "context"

// Observe follows who owns mutex on b, for code that thinks in etcd's Election.Observe
// terms: it returns a channel that receives the owner whenever the owner ID changes (to
// and from "no owner"; renewals are not changes), and that is closed once ctx has ended
// and the observation has stopped. The first value is the owner when Observe starts, if
// there is one.
//
// The channel coalesces: it holds one value, and a reader that is slower than the
// changes receives the latest owner, never a backlog of stale ones. Range over it until
// it is closed: that also waits for everything Observe started.
//
// Observe runs a retrieval service (NewRetrievalService) and takes its options. Like
// Service.Start, it fails fast when the store cannot be reached or refuses this client;
// afterwards it retries store errors until ctx ends.
//
// There is no Campaign: a Locker is one. Locker.Acquire blocks until this contender owns
// the mutex, as Campaign does, and returns a Lease whose Context ends when leadership is
// lost (etcd's Session.Done), whose Token fences writes, and whose Release is Resign.
// Lookup is Leader. For long-running leadership with callbacks, use a Service; for
// leader-only periodic work, a Scheduler.
func Observe(ctx context.Context, b Backend, mutex string, opts ...Option) (<-chan Owner, error) {
	if ctx == nil {
		return nil, invalid("ctx", nil, "must not be nil")
	}
	ch := make(chan Owner, 1)
	svc, err := NewRetrievalService(b, RetrieverFunc{MutexName: mutex, Notify: func(s State) { offer(ch, s.After) }}, opts...)
	if err != nil {
		return nil, err
	}
	if err := svc.Start(ctx); err != nil {
		return nil, err
	}
	go func() {
		<-ctx.Done()
		_ = svc.Close() // returns once the last notification has been delivered
		close(ch)
	}()
	return ch, nil
}

// offer puts o in ch, which holds one value, in place of a value not yet received. It is
// the channel's only sender.
func offer(ch chan Owner, o Owner) {
	for {
		select {
		case ch <- o:
			return
		default:
		}
		select {
		case <-ch: // stale: the reader has not taken it yet
		default:
		}
	}
}
