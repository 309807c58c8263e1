package tck

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// checkHandOff: a backend.HandOffer lists the waiters first come first, with their values;
// the owner's HandOff makes the named waiter the owner with a greater token and queues the
// old owner behind those waiting; a HandOff by a non-owner, or to a non-waiter, fails with
// ErrNotOwner or ErrNotWaiting and changes nothing. Contentions are driven by hand, each
// on a backend of its own. Skipped for contentions that are no HandOffer.
func checkHandOff(e *env) error {
	mutex := e.mutex()
	b := e.factory(e.t)
	keeps := false
	if v, ok := b.(backend.ValueKeeper); ok {
		keeps = v.KeepsValues(backend.Mutex)
	}
	value := func(role string) string {
		if keeps {
			return "value of " + role
		}
		return ""
	}
	a, err := e.handOffParty(b, mutex, "a", value("a"))
	if err != nil {
		return err
	}
	if _, ok := a.c.(backend.HandOffer); !ok {
		return fmt.Errorf("%w (the contentions implement no backend.HandOffer)", errUnsupported)
	}
	first, err := a.own(e.ctx)
	if err != nil {
		return fmt.Errorf("a: %w", err)
	}
	var parties []*handOffParty // b, then c: the waiting order
	for _, role := range []string{"b", "c"} {
		p, err := e.handOffParty(e.factory(e.t), mutex, role, value(role))
		if err != nil {
			return err
		}
		if err := p.wait(e.ctx, a.id); err != nil {
			return fmt.Errorf("%s: %w", role, err)
		}
		parties = append(parties, p)
	}
	pb, pc := parties[0], parties[1]

	var f findings
	// unchanged records a finding when a failed hand-off (what) changed the waiters or
	// the owner.
	unchanged := func(what string) {
		f.expectWaiters(e.ctx, a, "after "+what, pb, pc)
		if rec, ok, err := a.lookup(e.ctx); err != nil {
			f.addf("after %s: Lookup: %v", what, err)
		} else if ok && (rec.Owner != a.id || rec.Token != first.Token) {
			f.addf("after %s: Lookup names %q with token %d, want %q with token %d", what, rec.Owner, rec.Token, a.id, first.Token)
		}
	}
	f.expectWaiters(e.ctx, a, "before any hand-off", pb, pc)
	f.expect("HandOff by the non-owner b", pb.c.(backend.HandOffer).HandOff(e.ctx, pc.id), simba.ErrNotOwner)
	unchanged("a non-owner's hand-off")
	f.expect("HandOff to a contender that does not wait", a.c.(backend.HandOffer).HandOff(e.ctx, e.id("absent")), simba.ErrNotWaiting)
	unchanged("a hand-off to a non-waiter")

	if err := a.c.(backend.HandOffer).HandOff(e.ctx, pc.id); err != nil {
		return f.join(fmt.Errorf("HandOff by the owner to c: %w", err))
	}
	second, err := pc.own(e.ctx)
	if err != nil {
		return f.join(fmt.Errorf("c after the hand-off: %w", err))
	}
	if second.Token <= first.Token {
		f.addf("c's tenure has token %d, a's had %d: want a greater one", second.Token, first.Token)
	}
	if second.Value != pc.value {
		f.addf("c's tenure shows value %q, want %q", second.Value, pc.value)
	}
	if rec, ok, err := a.lookup(e.ctx); err != nil {
		f.addf("after the hand-off: Lookup: %v", err)
	} else if ok && (rec.Owner != pc.id || rec.Token != second.Token) {
		f.addf("after the hand-off: Lookup names %q with token %d, want %q with token %d", rec.Owner, rec.Token, pc.id, second.Token)
	}
	f.expectWaiters(e.ctx, pc, "after the hand-off", pb, a)
	return f.join()
}

// handOffParty is a contention driven by hand: a lease contention's answers and grants, or
// a session contention's reports, are the records it keeps.
type handOffParty struct {
	id, value string
	c         backend.Contention
	changed   signal

	mu   sync.Mutex
	last backend.Record // the last record reported or granted
}

// handOffTTL is the unscaled TTL of a hand-off party's leases.
const handOffTTL = 30 * time.Second

// handOffParty opens a contention for mutex on b as a new contender of role.
func (e *env) handOffParty(b backend.Backend, mutex, role, value string) (*handOffParty, error) {
	p := &handOffParty{id: e.id(role), value: value}
	keep := func(rec backend.Record, _ time.Time) {
		p.mu.Lock()
		p.last = rec
		p.mu.Unlock()
		p.changed.notify()
	}
	// Nothing renews these leases, and the check tests no lapse: a's must outlive the whole
	// check, which took 4.4s on a loaded CI machine where a 1.5s TTL had let c's Acquire
	// take the lapsed mutex for itself.
	c, err := b.StartContend(e.ctx, backend.Participant{
		Mutex: mutex, ContenderID: p.id, Value: value, TTL: e.cfg.d(handOffTTL), Transition: e.cfg.transition,
		Logger: e.logger(), Wake: func() {}, Report: keep, Grant: keep,
	})
	if err != nil {
		return nil, fmt.Errorf("StartContend of %s: %w", role, err)
	}
	p.c = c
	e.cleanup(func() {
		ctx := context.WithoutCancel(e.ctx)
		if l, ok := c.(backend.LeaseContention); ok {
			_ = l.Release(ctx)
		}
		_ = c.StopContend(ctx)
	})
	return p, nil
}

// own makes p the owner, or waits until it is: an Acquire (a lease store) or a report (a
// session store) that names it. It returns that record.
func (p *handOffParty) own(ctx context.Context) (backend.Record, error) {
	return p.await(ctx, "a record that names it", func(rec backend.Record) bool { return rec.Owner == p.id })
}

// wait makes p wait for owner's mutex: an Acquire (a lease store) or a report (a session
// store) that names owner.
func (p *handOffParty) wait(ctx context.Context, owner string) error {
	_, err := p.await(ctx, "a record that names "+owner, func(rec backend.Record) bool { return rec.Owner == owner })
	return err
}

func (p *handOffParty) await(ctx context.Context, what string, ok func(backend.Record) bool) (backend.Record, error) {
	if l, lease := p.c.(backend.LeaseContention); lease {
		rec, err := l.Acquire(ctx)
		if err != nil {
			return rec, fmt.Errorf("Acquire: %w", err)
		}
		if !ok(rec) {
			return rec, fmt.Errorf("Acquire named %q, want %s", rec.Owner, what)
		}
		return rec, nil
	}
	var rec backend.Record
	err := until(ctx, &p.changed, what, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		rec = p.last
		return ok(rec)
	})
	return rec, err
}

// lookup returns the owner a lease store's Lookup names; ok is false on a session store.
func (p *handOffParty) lookup(ctx context.Context) (rec backend.Record, ok bool, err error) {
	l, ok := p.c.(backend.LeaseContention)
	if !ok {
		return backend.Record{}, false, nil
	}
	rec, err = l.Lookup(ctx)
	return rec, true, err
}

// expectWaiters records a finding unless asker's Waiters lists want, in order, with their
// values.
func (f *findings) expectWaiters(ctx context.Context, asker *handOffParty, when string, want ...*handOffParty) {
	got, err := asker.c.(backend.HandOffer).Waiters(ctx)
	if err != nil {
		f.addf("Waiters %s: %v", when, err)
		return
	}
	var w []backend.Waiter
	for _, p := range want {
		w = append(w, backend.Waiter{ID: p.id, Value: p.value})
	}
	if !slices.Equal(got, w) {
		f.addf("Waiters %s = %v, want %v", when, got, w)
	}
}
