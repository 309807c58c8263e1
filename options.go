package simba

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/simba-go/simba/backend"

	"github.com/simba-go/simba/observe"

	"github.com/simba-go/simba/internal/clock"
	"github.com/simba-go/simba/internal/defaultlog"
)

// Default timing, as in JVM Simba.
const (
	// DefaultTTL is how long an acquisition or renewal holds a mutex exclusively.
	DefaultTTL = 10 * time.Second
	// DefaultTransition is the window after the TTL during which only the owner may renew.
	DefaultTransition = 6 * time.Second
)

// Fractions of the TTL from which the other timings default or derive.
const (
	// renewalLeadDivisor: the owner renews a third of the TTL before its TTL ends, so that
	// a renewal delayed by a pause or a short outage still lands before the local TTL end.
	renewalLeadDivisor = 3
	// callTimeoutDivisor: a store call may take a quarter of the TTL by default.
	callTimeoutDivisor = 4
	// driftMarginDivisor: belief ends 1% of the TTL before send time + TTL, to absorb a
	// difference in clock rate between this host and the store.
	driftMarginDivisor = 100
)

// Option configures every constructor, in order; an invalid result is an
// ErrInvalidArgument, never clamped. A misplaced option does not compile.
type Option interface {
	ServiceOption
	LockerOption
	SchedulerOption
	MutexesOption
}

// ServiceOption configures NewService: every Option, and WithInitialDelay.
type ServiceOption interface{ applyService(*config) }

// LockerOption configures NewLocker: every Option, and WithContenderID.
type LockerOption interface{ applyLocker(*config) }

// SchedulerOption configures NewScheduler: Option, WithContenderID, WithLeaderHooks.
type SchedulerOption interface{ applyScheduler(*config) }

// MutexesOption configures NewMutexes: Option, WithContenderID, WithLocalHandOvers.
type MutexesOption interface{ applyMutexes(*config) }

// IDOption configures NewLocker, NewScheduler and NewMutexes.
type IDOption interface {
	LockerOption
	SchedulerOption
	MutexesOption
}

// ValueOption configures NewService, NewLocker and NewScheduler.
type ValueOption interface {
	ServiceOption
	LockerOption
	SchedulerOption
}

// LeaderOption configures NewService and NewScheduler.
type LeaderOption interface {
	ServiceOption
	SchedulerOption
}

// option is an Option; the func types below it are the options of fewer constructors.
type (
	option          func(*config)
	idOption        func(*config)
	valueOption     func(*config)
	leaderOption    func(*config)
	serviceOption   func(*config)
	schedulerOption func(*config)
	mutexesOption   func(*config)
)

func (o option) applyService(c *config)            { o(c) }
func (o option) applyLocker(c *config)             { o(c) }
func (o option) applyScheduler(c *config)          { o(c) }
func (o option) applyMutexes(c *config)            { o(c) }
func (o idOption) applyLocker(c *config)           { o(c) }
func (o idOption) applyScheduler(c *config)        { o(c) }
func (o idOption) applyMutexes(c *config)          { o(c) }
func (o valueOption) applyService(c *config)       { o(c) }
func (o valueOption) applyLocker(c *config)        { o(c) }
func (o valueOption) applyScheduler(c *config)     { o(c) }
func (o leaderOption) applyService(c *config)      { o(c) }
func (o leaderOption) applyScheduler(c *config)    { o(c) }
func (o serviceOption) applyService(c *config)     { o(c) }
func (o schedulerOption) applyScheduler(c *config) { o(c) }
func (o mutexesOption) applyMutexes(c *config)     { o(c) }

type config struct {
	ttl          time.Duration
	transition   time.Duration
	callTimeout  time.Duration // zero: ttl / callTimeoutDivisor
	renewalLead  time.Duration // zero: ttl / renewalLeadDivisor
	initialDelay time.Duration
	logger       *slog.Logger
	contenderID  string                  // Locker, Scheduler and Mutexes only; empty: HostContenderID()
	ownerValue   string                  // published with each tenure (WithOwnerValue); empty: none
	prefer       func(value string) bool // WithPreference; nil: none

	observer       observe.Observer // nil: none
	localHandOvers int              // Mutexes only
	leaderHooks    leaderHooks      // Scheduler only

	// explicitly set, to be validated rather than defaulted
	callTimeoutSet, renewalLeadSet, loggerSet, contenderIDSet, observerSet, preferSet bool

	// for tests and the simulation: where time is read and timers are set, and the jitter
	clock  clock.Clock
	jitter func(lo, hi time.Duration) time.Duration
}

// WithTTL sets how long an acquisition or renewal holds the mutex exclusively. Default
// 10s; must be > 0 and whole milliseconds.
func WithTTL(ttl time.Duration) Option { return option(func(c *config) { c.ttl = ttl }) }

// WithTransition sets the window after the TTL in which only the owner may renew.
// Default 6s; must be >= 0 and whole milliseconds.
func WithTransition(transition time.Duration) Option {
	return option(func(c *config) { c.transition = transition })
}

// WithCallTimeout bounds every store call (a renewal also by the local TTL end). Default
// ttl/4; must be > 0 and less than the TTL.
func WithCallTimeout(d time.Duration) Option {
	return option(func(c *config) { c.callTimeout, c.callTimeoutSet = d, true })
}

// WithRenewalLead sets how long before its TTL ends an owner renews at the latest. Default
// ttl/3; must be more than 1% of the TTL and less than it.
func WithRenewalLead(d time.Duration) Option {
	return option(func(c *config) { c.renewalLead, c.renewalLeadSet = d, true })
}

// WithInitialDelay delays a service's first attempt after Start by d >= 0.
func WithInitialDelay(d time.Duration) ServiceOption {
	return serviceOption(func(c *config) { c.initialDelay = d })
}

// WithLogger sets the logger, with attributes "mutex" and "contender": renewals at Debug,
// acquisitions at Info, outages and losses at Warn, refusals and panics at Error. Default:
// Warn and above to slog.Default.
func WithLogger(l *slog.Logger) Option {
	return option(func(c *config) { c.logger, c.loggerSet = l, true })
}

// WithContenderID sets a Locker's, Scheduler's or Mutexes' contender ID (default: a new
// HostContenderID), checked by ValidateContenderID and the backend.
func WithContenderID(id string) IDOption {
	return idOption(func(c *config) { c.contenderID, c.contenderIDSet = id, true })
}

// WithOwnerValue publishes v, at most 1 KiB of text, as tenures' Owner.Value.
func WithOwnerValue(v string) ValueOption {
	return valueOption(func(c *config) { c.ownerValue = v })
}

// WithPreference makes a leader whose owner value prefer rejects hand off, at a renewal,
// to the first waiter whose value prefer accepts.
func WithPreference(prefer func(value string) bool) LeaderOption {
	return leaderOption(func(c *config) { c.prefer, c.preferSet = prefer, true })
}

// maxOwnerValue bounds an owner value, in bytes: a value is stored and read with every
// tenure, so it stays small.
const maxOwnerValue = 1024

// configure builds the configuration of a constructor from defaults and opts, which apply
// applies, and validates it.
func configure[O any](b Backend, opts []O, apply func(O, *config)) (config, error) {
	if isNil(b) {
		return config{}, invalid("backend", nil, "must not be nil")
	}
	c := config{
		ttl:            DefaultTTL,
		transition:     DefaultTransition,
		localHandOvers: DefaultLocalHandOvers,
		clock:          clock.System,
		jitter:         uniformJitter,
	}
	for _, o := range opts {
		if !isNil(o) {
			apply(o, &c)
		}
	}
	if !c.callTimeoutSet {
		c.callTimeout = c.ttl / callTimeoutDivisor
	}
	if !c.renewalLeadSet {
		c.renewalLead = c.ttl / renewalLeadDivisor
	}
	if !c.loggerSet {
		c.logger = defaultlog.New()
	}
	if err := c.validate(); err != nil {
		return config{}, err
	}
	if err := c.checkValueKept(b, backend.Mutex); err != nil {
		return config{}, err
	}
	return c, nil
}

// checkValueKept refuses an owner value that b would not keep for names of kind k: a value
// is never silently dropped.
func (c *config) checkValueKept(b Backend, k backend.Kind) error {
	if c.ownerValue == "" {
		return nil
	}
	if v, ok := b.(backend.ValueKeeper); !ok || !v.KeepsValues(k) {
		return invalid("owner value", c.ownerValue, fmt.Sprintf("the backend (%T) keeps none for a %v", b, k))
	}
	return nil
}

// ownID returns the contender ID of a Locker, Scheduler or Mutexes: WithContenderID's, or
// a new HostContenderID.
func (c *config) ownID() string {
	if c.contenderIDSet {
		return c.contenderID
	}
	return HostContenderID()
}

// validate checks the configuration as a whole. Fields that default from the TTL are only
// checked when set explicitly: their defaults are valid whenever the TTL is.
func (c *config) validate() error {
	if err := c.validateTiming(); err != nil {
		return err
	}
	switch {
	case c.initialDelay < 0:
		return invalid("initial delay", c.initialDelay, "must be >= 0")
	case c.localHandOvers < 0:
		return invalid("local hand-overs", c.localHandOvers, "must be >= 0")
	case c.loggerSet && c.logger == nil:
		return invalid("logger", nil, "must not be nil")
	case c.observerSet && isNil(c.observer):
		return invalid("observer", nil, "must not be nil")
	case c.preferSet && c.prefer == nil:
		return invalid("preference", nil, "must not be nil")
	case c.contenderIDSet:
		return ValidateContenderID(c.contenderID)
	}
	return validateOwnerValue(c.ownerValue)
}

// validateTiming checks the TTL, the transition, the call timeout and the renewal lead.
func (c *config) validateTiming() error {
	switch {
	case c.ttl <= 0:
		return invalid("ttl", c.ttl, "must be > 0")
	case c.ttl%time.Millisecond != 0:
		return invalid("ttl", c.ttl, "must be a whole number of milliseconds")
	case c.transition < 0:
		return invalid("transition", c.transition, "must be >= 0")
	case c.transition%time.Millisecond != 0:
		return invalid("transition", c.transition, "must be a whole number of milliseconds")
	case c.ttl > maxLease-c.transition:
		return invalid("ttl + transition", c.ttl.String()+" + "+c.transition.String(), "must be at most 100 years")
	case c.callTimeoutSet && c.callTimeout <= 0:
		return invalid("call timeout", c.callTimeout, "must be > 0")
	case c.callTimeoutSet && c.callTimeout >= c.ttl:
		return invalid("call timeout", c.callTimeout, "must be less than the ttl ("+c.ttl.String()+")")
	case c.renewalLeadSet && c.renewalLead <= c.driftMargin():
		return invalid("renewal lead", c.renewalLead, "must be more than 1% of the ttl ("+c.driftMargin().String()+")")
	case c.renewalLeadSet && c.renewalLead >= c.ttl:
		return invalid("renewal lead", c.renewalLead, "must be less than the ttl ("+c.ttl.String()+")")
	}
	return nil
}

// validateOwnerValue checks a WithOwnerValue value: short text, empty for none.
func validateOwnerValue(v string) error {
	switch {
	case len(v) > maxOwnerValue:
		return invalid("owner value", v, "must be at most "+strconv.Itoa(maxOwnerValue)+" bytes")
	case !utf8.ValidString(v):
		return invalid("owner value", v, "must be valid UTF-8")
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return invalid("owner value", v, "must not contain control characters")
	}
	return nil
}

// withClock makes a service read the time and set its timers on c (tests, simulation).
func withClock(c clock.Clock) Option { return option(func(cfg *config) { cfg.clock = c }) }

// now reads the configured clock.
func (c *config) now() time.Time { return c.clock.Now() }

// driftMargin is how long before send time + TTL an owner stops believing.
func (c *config) driftMargin() time.Duration { return c.ttl / driftMarginDivisor }

// maxLease bounds ttl + transition, far below where time arithmetic or a store's
// millisecond arithmetic (now + ttl + transition) could overflow.
const maxLease = 100 * 365 * 24 * time.Hour

// uniformJitter returns a duration drawn uniformly from [lo, hi).
func uniformJitter(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + rand.N(hi-lo)
}
