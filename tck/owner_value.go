package tck

import (
	"context"
	"errors"
	"fmt"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// checkOwnerValue: the value a contender publishes (simba.WithOwnerValue) comes back with
// each of its tenures, in the lease, to Lookup and to Observe; a later tenure, another
// contender's without a value or the same ID's with another value, never shows an earlier
// tenure's value. A backend that keeps no values must refuse one at construction; the
// check is then skipped.
func checkOwnerValue(e *env) error {
	b := e.backend()
	if !b.KeepsValues(backend.Mutex) {
		_, err := simba.NewLocker(b, e.mutex(), simba.WithOwnerValue("10.0.0.7:8080"))
		if !errors.Is(err, simba.ErrInvalidArgument) {
			return fmt.Errorf("a backend that keeps no values took one: NewLocker returned %v, want an ErrInvalidArgument", err)
		}
		return fmt.Errorf("%w (backend.ValueKeeper keeps no mutex values)", errUnsupported)
	}
	mutex := e.mutex()
	octx, stop := context.WithCancel(e.ctx)
	seen, err := simba.Observe(octx, e.backend(), mutex, options[simba.Option](e)...)
	if err != nil {
		stop()
		return fmt.Errorf("Observe: %w", err)
	}
	e.cleanup(func() {
		stop()
		for range seen { // closed once the observer has stopped
		}
	})
	a, c := e.id("a"), e.id("c")
	tenures := []struct{ id, value string }{
		{a, "10.0.0.7:8080 v1.2.3"},
		{c, ""},                              // no value: the previous tenure's must not show
		{a, `{"addr": "ünï@@code", "v": 2}`}, // the same ID, another value
	}
	values := map[uint64]string{} // each tenure's value, by its token
	var f findings
	// check records a finding when o, seen by what, shows a value other than its tenure's.
	check := func(what string, o simba.Owner, want string) {
		if o.Value != want {
			f.addf("%s shows %q for the tenure of %s with token %d, want %q", what, o.Value, o.ID, o.Token, want)
		} else if v, ok := values[o.Token]; ok && o.Token != 0 && v != o.Value {
			f.addf("%s shows %q with token %d, whose tenure published %q", what, o.Value, o.Token, v)
		}
	}
	for i, tn := range tenures {
		opts := options[simba.LockerOption](e, simba.WithContenderID(tn.id))
		if tn.value != "" {
			opts = append(opts, simba.WithOwnerValue(tn.value))
		}
		l, err := simba.NewLocker(e.backend(), mutex, opts...)
		if err != nil {
			return f.join(fmt.Errorf("NewLocker of tenure %d: %w", i, err))
		}
		e.cleanup(func() { _ = l.Close() })
		lease, err := l.Acquire(e.ctx)
		if err != nil {
			return f.join(fmt.Errorf("Acquire of tenure %d: %w", i, err))
		}
		values[lease.Token()] = tn.value
		check(fmt.Sprintf("tenure %d's lease", i), lease.Owner(), tn.value)
		o, err := untilAnswered(e.ctx, func(ctx context.Context) (simba.Owner, error) {
			return simba.Lookup(ctx, e.backend(), mutex, options[simba.Option](e)...)
		})
		switch {
		case err != nil:
			f.addf("Lookup in tenure %d: %v", i, err)
		case o.ID != tn.id:
			f.addf("Lookup in tenure %d names %q, want %q", i, o.ID, tn.id)
		default:
			check(fmt.Sprintf("Lookup in tenure %d", i), o, tn.value)
		}
		if err := observeOwner(e, seen, tn.id, func(o simba.Owner) {
			switch o.ID {
			case tn.id:
				check(fmt.Sprintf("Observe in tenure %d", i), o, tn.value)
			case "":
			default: // an earlier tenure, sent late: its own value, or none
				if v, ok := values[o.Token]; o.Value != "" && (!ok || v != o.Value) {
					f.addf("Observe in tenure %d shows %q for %s with token %d", i, o.Value, o.ID, o.Token)
				}
			}
		}); err != nil {
			return f.join(fmt.Errorf("tenure %d: %w", i, err))
		}
		if err := lease.Release(e.ctx); err != nil {
			return f.join(fmt.Errorf("Release of tenure %d: %w", i, err))
		}
	}
	return f.join()
}

// observeOwner passes what Observe sends on seen to look until it names id.
func observeOwner(e *env, seen <-chan simba.Owner, id string, look func(simba.Owner)) error {
	ctx, cancel := e.within(e.cfg.takeoverBound() + e.cfg.slack())
	defer cancel()
	for {
		select {
		case o, ok := <-seen:
			if !ok {
				return errors.New("Observe closed its channel")
			}
			look(o)
			if o.ID == id {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("Observe did not name %s", id)
		}
	}
}
