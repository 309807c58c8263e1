package simba

import (
	"github.com/simba-go/simba/backend"

	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/await"
)

// Lookup reads once who owns mutex on b. What a store does not keep is zero: Redis and
// ZooKeeper keep no acquisition time, SQL shows no token.
func Lookup(ctx context.Context, b Backend, mutex string, opts ...Option) (Owner, error) {
	if ctx == nil {
		return Owner{}, invalid("ctx", nil, "must not be nil")
	}
	cfg, err := configure(b, opts, Option.applyService)
	if err != nil {
		return Owner{}, err
	}
	if err := validateNames(b, mutex, "", false); err != nil {
		return Owner{}, err
	}
	if ctx.Done() == nil {
		return lookup(ctx, b, mutex, cfg, new(atomic.Bool)) // no deadline to keep: no goroutine is needed to keep it
	}
	if err := ctx.Err(); err != nil {
		return Owner{}, fmt.Errorf("simba: look up %q: %w", mutex, err) // the store is not asked
	}
	type looked struct {
		o   Owner
		err error
	}
	out := make(chan looked, 1)
	var opened atomic.Bool // the contention is open: what is left is the read
	go func() {
		o, err := lookup(ctx, b, mutex, cfg, &opened)
		out <- looked{o, err}
	}()
	if l, ok := await.Answer(ctx, out); ok {
		return l.o, l.err // a backend that honours ctx says what it was waiting for
	}
	stage := "while starting (connecting, subscribing or checking the schema)"
	if opened.Load() {
		stage = "to the read of the owner"
	}
	return Owner{}, fmt.Errorf("simba: look up %q: no answer from the store %s: %w", mutex, stage, ctx.Err())
}

// lookup is Lookup's store work: it opens a retriever's contention (then sets opened),
// reads the owner and closes the contention again.
func lookup(ctx context.Context, b Backend, mutex string, cfg config, opened *atomic.Bool) (Owner, error) {
	var (
		mu       sync.Mutex
		reported Owner
	)
	p := backend.Participant{
		Mutex:      mutex,
		TTL:        cfg.ttl,
		Transition: cfg.transition,
		Logger:     cfg.logger.With("mutex", mutex),
		Wake:       func() {},
		Report: func(rec backend.Record, at time.Time) {
			mu.Lock()
			defer mu.Unlock()
			reported = ownerAt(rec, at)
		},
		Grant: func(backend.Record, time.Time) {},
	}
	cctx, cancel := context.WithTimeout(ctx, cfg.callTimeout)
	defer cancel()
	c, err := b.StartContend(cctx, p)
	if err != nil {
		return Owner{}, wrapf(callError(err, cctx, ctx, cfg.callTimeout), "simba: look up %q", mutex)
	}
	if isNil(c) {
		return Owner{}, fmt.Errorf("simba: look up %q: backend returned no contention", mutex)
	}
	opened.Store(true)
	var (
		o       Owner
		readErr error
	)
	if lc, ok := c.(backend.LeaseContention); ok {
		sent := cfg.now()
		rec, err := lc.Lookup(cctx)
		if err != nil {
			readErr = wrapf(callError(err, cctx, ctx, cfg.callTimeout), "simba: look up %q", mutex)
		} else if o = ownerAt(rec, sent); rec.Held == 0 {
			o.AcquiredAt = time.Time{}
		}
	} else {
		mu.Lock()
		o = reported
		mu.Unlock()
		o.AcquiredAt = time.Time{} // the time it was first seen, by this read: not the store's
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.callTimeout)
	defer scancel()
	if err := c.StopContend(sctx); err != nil && readErr == nil {
		cfg.logger.Warn("simba: ending a lookup's contention failed", "mutex", mutex, "err", err)
	}
	return o, readErr
}
