package simba

import "context"

// Observe sends the owner of mutex on b now and at every change of owner ID (a slow
// reader gets the latest), until ctx ends and it closes the channel. It fails as Start.
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
