package simba

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/simba-go/simba/internal/dispatch"
)

// Service runs one Contender (or Retriever) for one mutex through a Backend. It owns the
// lifecycle (Start, Stop, Close, Run), the contend loop of lease stores, the local TTL end
// that bounds ownership belief, and the ordered delivery of callbacks.
//
// Status moves INITIAL -> STARTING -> RUNNING -> STOPPING -> INITIAL. Start is an error
// unless the status is INITIAL, Stop unless it is RUNNING; a failed Start returns to
// INITIAL; a stopped service can be started again. Close stops a running service and makes
// every later Start or Stop fail with ErrClosed.
//
// Every lifecycle call returns by its context's deadline whatever the store does. Store
// work whose outcome is still unknown then (a release, undoing an acquisition that may have
// been applied) goes on in the background, bounded by the call timeout; the next Start
// waits for it, and Close waits for all of it.
//
// A Service is safe for concurrent use; lifecycle calls are serialised. It must not be
// copied.
type Service struct {
	backend   Backend
	contender Contender // nil for a retriever and for a Locker's service
	retriever Retriever // nil for a contender
	mutex     string
	id        string // contender ID; empty for a retriever
	role      Role
	cfg       config
	period    contendPeriod
	log       *slog.Logger

	lifecycle chan struct{} // a lock held by Start, Stop and Close (see lock)
	closed    bool          // guarded by lifecycle
	closing   atomic.Bool   // Close has been called
	status    atomic.Int32
	bg        sync.WaitGroup // finishing lifecycles and abandoned starts; Close waits for them

	mu        sync.Mutex      // guards the fields below and the ownership fields of run
	run       *run            // the current lifecycle; nil while not started
	last      *run            // the last lifecycle begun, whose callbacks may still be delivered
	settled   <-chan struct{} // closed once the store side of the last lifecycle is finished
	lastState State           // the last change of owner seen
}

// NewService returns a service that contends for c.Mutex() as c.ContenderID() through b.
// The mutex name and contender ID are validated here, before any I/O, by
// ValidateMutex, ValidateContenderID and the backend's Validator, if it has one.
// WithContenderID is not accepted: the Contender names its ID.
func NewService(b Backend, c Contender, opts ...Option) (*Service, error) {
	cfg, err := checkedConfig(b, opts, forService)
	if err != nil {
		return nil, err
	}
	if isNil(c) {
		return nil, invalid("contender", nil, "must not be nil")
	}
	mutex, id := c.Mutex(), c.ContenderID()
	if err := validateNames(b, mutex, id, true); err != nil {
		return nil, err
	}
	return newService(b, RoleLeader, c, nil, mutex, id, cfg), nil
}

// NewRetrievalService returns a service that observes who owns r.Mutex() through b without
// contending, and reports every change of owner to r. WithContenderID is not accepted.
func NewRetrievalService(b Backend, r Retriever, opts ...Option) (*Service, error) {
	cfg, err := checkedConfig(b, opts, forRetrievalService)
	if err != nil {
		return nil, err
	}
	if isNil(r) {
		return nil, invalid("retriever", nil, "must not be nil")
	}
	mutex := r.Mutex()
	if err := validateNames(b, mutex, "", false); err != nil {
		return nil, err
	}
	return newService(b, RoleObserver, nil, r, mutex, "", cfg), nil
}

func newService(b Backend, role Role, c Contender, r Retriever, mutex, id string, cfg config) *Service {
	log := cfg.logger.With("mutex", mutex)
	if id != "" {
		log = log.With("contender", id)
	}
	return &Service{
		backend:   b,
		role:      role,
		contender: c,
		retriever: r,
		mutex:     mutex,
		id:        id,
		cfg:       cfg,
		period: contendPeriod{
			ttl: cfg.ttl, transition: cfg.transition, lead: cfg.renewalLead, jitter: cfg.jitter,
		},
		log:       log,
		lifecycle: make(chan struct{}, 1),
	}
}

// Mutex returns the name of the mutex the service contends for or observes.
func (s *Service) Mutex() string { return s.mutex }

// ContenderID returns the contender's ID, or "" for a retrieval service.
func (s *Service) ContenderID() string { return s.id }

// Status returns the lifecycle status.
func (s *Service) Status() Status { return Status(s.status.Load()) }

func (s *Service) setStatus(st Status) { s.status.Store(int32(st)) }

// Owner returns the owner as the service believes it now: the record of the last answer,
// with this contender's own record dropped once its local TTL end has passed. It is the
// zero Owner while the service is not running.
func (s *Service) Owner() Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.run
	if r == nil {
		return Owner{}
	}
	if t := r.tenure; t != nil && !t.believes(s.cfg.now()) {
		return Owner{}
	}
	return r.owner
}

// State returns the last change of owner the service saw; it is kept after Stop.
func (s *Service) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastState
}

// IsOwner reports whether this contender believes it owns the mutex now: it acquired or
// renewed it, no answer since named anyone else, and its local TTL end has not passed.
func (s *Service) IsOwner() bool { return s.currentTenure() != nil }

// Err returns the error of the service's last store call while it runs: nil when that
// call succeeded, or when the service is not running. A contender that cannot reach its
// store, or that the store refuses, keeps retrying (and logs each failure at Warn level);
// Err is how a health check learns of it.
func (s *Service) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return nil
	}
	return s.run.lastErr
}

// currentRun returns the running lifecycle, or nil.
func (s *Service) currentRun() *run {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run
}

// currentTenure returns the tenure this contender believes in now, or nil.
func (s *Service) currentTenure() *tenure {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil || s.run.tenure == nil || !s.run.tenure.believes(s.cfg.now()) {
		return nil
	}
	return s.run.tenure
}

// tenureOwner returns the owner record of t as last renewed.
func (s *Service) tenureOwner(t *tenure) Owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return t.owner
}

// othersWaiting asks the store whether other contenders wait for the mutex. known is false
// when the store cannot tell or did not answer.
func (s *Service) othersWaiting(ctx context.Context) (waiting, known bool) {
	r := s.currentRun()
	if r == nil {
		return false, false
	}
	wl, ok := r.contention.(WaitList)
	if !ok {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout)
	defer cancel()
	waiting, err := wl.OthersWaiting(ctx)
	if err != nil {
		s.log.Warn("simba: asking the store for waiters failed", "err", err)
		return false, false
	}
	return waiting, true
}

// logs reports whether the logger takes records of level. Calls on the hot paths ask first:
// a disabled slog call still costs its arguments and slog's large stack frame, which can
// make a short-lived goroutine grow its stack.
func (s *Service) logs(level slog.Level) bool {
	return s.log.Enabled(context.Background(), level)
}

// recovered logs a panic of a user callback; contention goes on.
func (s *Service) recovered(v any) {
	s.log.Error("simba: callback panicked", "panic", v)
}

// run is one lifecycle of a service, from Start to the end of Stop's store work.
type run struct {
	spec       runSpec
	ctx        context.Context // ends when Stop begins: cuts a store call in flight short
	cancel     context.CancelFunc
	rounds     rounds // the store calls of a lease contention; leaving a session contention
	events     *dispatch.Queue
	contention Contention
	lease      LeaseContention // nil for a session contention
	failures   int             // consecutive failed attempts; used by one round at a time
	attempted  chan struct{}   // closed once the first attempt has been applied
	hopeless   chan struct{}   // closed once no attempt can succeed: the backend is closed, or refuses
	acquired   chan struct{}   // closed when the first tenure begins
	halted     chan struct{}   // closed when Stop begins (or the start fails)
	finished   chan struct{}   // closed once the store side of the lifecycle is finished
	finishErr  error           // what the store said when finishing; read after finished

	// guarded by Service.mu
	started       bool    // Start completed: the lifecycle ran
	stopped       bool    // Stop has begun: results and reports are dropped
	owner         Owner   // the owner as this service believes it now
	tenure        *tenure // set while this contender believes it owns the mutex
	first         *tenure // the run's first tenure
	over          bool    // spec.single: the first tenure has ended, no other begins
	contendDone   bool    // StopContend was called already (a single session contention)
	attemptedDone bool
	hopelessDone  bool
	begun         uint64        // attempts begun
	applied       uint64        // attempts whose outcome (answer or failure) was applied
	appliedCh     chan struct{} // closed and replaced whenever an attempt is applied
	lastErr       error         // the error of the last attempt, nil after a successful one
	renewBy       time.Time     // while leading: when the next attempt must have been applied
	granting      bool          // a grant is being applied (for the Observer)
	answeredSent  time.Time     // the send time of the latest answer or grant applied
	grantedSent   time.Time     // the send time of the latest grant applied
}

// runSpec says how one lifecycle contends: what Start asks for, or a Locker's acquisition.
type runSpec struct {
	// delay is the time before the first attempt of a lease store.
	delay time.Duration
	// single makes the lifecycle serve one tenure, as a Locker's acquisition does: it
	// waits only for its own turn (Participant.WaitsOnly), begins no tenure once its first
	// has ended, and then gives the mutex back (a lease store) or leaves the queue (a
	// session store) at once.
	single bool
	// once, with single, makes one attempt only (TryAcquire; Participant.Once).
	once bool
	// hopeless, if set, is called once when the lifecycle finds that no attempt can
	// succeed (markHopeless), with why, and with the service's lock held: it must not block.
	hopeless func(error)
}
