package simba

import (
	"context"
	"errors"
	"time"

	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/observe"
)

// WithObserver sets an observe.Observer to tell of store calls, tenures and acquisitions,
// for metrics and tracing.
func WithObserver(o observe.Observer) Option {
	return option(func(c *config) { c.observer, c.observerSet = o, true })
}

// attemptOp is the Op of an attempt of the contend loop.
func attemptOp(id string, renewing bool) observe.Op {
	switch {
	case id == "":
		return observe.OpLookup
	case renewing:
		return observe.OpRenew
	}
	return observe.OpAcquire
}

// observeCall tells the Observer of a store call sent at sent. Callers check that there is
// an Observer first, so that nothing is built without one.
func (s *Service) observeCall(op observe.Op, sent time.Time, rec backend.Record, err error) {
	c := observe.Call{Mutex: s.mutex, Kind: s.kind(), Contender: s.id, Role: s.role, Op: op, Latency: s.cfg.now().Sub(sent), Err: err, Outcome: outcome(err)}
	if err == nil {
		c.Owner, c.Token = rec.Owner, rec.Token
	}
	s.cfg.observer.OnCall(c)
}

// call makes a store call of op that answers no record (a release, a stop) with ctx, the
// call context derived from caller's (nil: none), and tells the Observer of it.
func (s *Service) call(ctx, caller context.Context, op observe.Op, f func(context.Context) error) error {
	sent := s.cfg.now()
	err := callError(f(ctx), ctx, caller, s.cfg.callTimeout)
	if s.cfg.observer != nil {
		s.observeCall(op, sent, backend.Record{}, err)
	}
	return err
}

// observeAcquire tells the Observer of a Mutexes acquisition that began at began, with the
// caller's ctx, and returned lease or err. Callers check that there is an Observer first.
func (c *config) observeAcquire(ctx context.Context, mutex, id string, try bool, began time.Time, lease *Lease, err error) {
	c.observeAcquisition(ctx, observe.Acquisition{Mutex: mutex, Contender: id, Try: try}, began, lease, err)
}

// observeAcquire tells the Observer of the service's acquisition (a Locker's, a
// semaphore's or read-write lock's hold) that began at began. Callers check that there is
// an Observer first.
func (s *Service) observeAcquire(ctx context.Context, try bool, began time.Time, lease *Lease, err error) {
	a := observe.Acquisition{Mutex: s.mutex, Kind: s.kind(), Contender: s.id, Try: try}
	s.cfg.observeAcquisition(ctx, a, began, lease, err)
}

// observeAcquisition completes a with the wait, the token and err, and tells it.
func (c *config) observeAcquisition(ctx context.Context, a observe.Acquisition, began time.Time, lease *Lease, err error) {
	a.Wait, a.Err = c.now().Sub(began), err
	if lease != nil {
		a.Token = lease.Token()
	}
	c.observer.OnAcquire(ctx, a)
}

// kind is what the service's name names, for the Observer.
func (s *Service) kind() observe.Kind {
	switch s.hold.Kind {
	case backend.Semaphore:
		return observe.KindSemaphore
	case backend.RWLock:
		return observe.KindRWLock
	}
	return observe.KindMutex
}

// outcome names the outcome of a call whose error is err (Call.Outcome).
func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	}
	return "error"
}

// reason names the cause of a tenure's end (Tenure.Reason).
func reason(cause error) string {
	switch {
	case cause == nil:
		return ""
	case errors.Is(cause, context.Canceled):
		return "released"
	case errors.Is(cause, ErrOwnerChanged):
		return "owner_changed"
	case cause == ErrLeaseExpired: //nolint:errorlint // the bare sentinel: no store error joined
		return "expired"
	case errors.Is(cause, ErrLeaseExpired):
		return "store_error"
	}
	return "unknown"
}
