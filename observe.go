package simba

import "context"

// Observe follows who owns mutex on b, as etcd's Election.Observe does: the channel gets
// the owner now and at every change of owner ID, the latest one only for a slow reader, and
// is closed once ctx has ended and Observe has stopped. It fails fast as Start does.
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
