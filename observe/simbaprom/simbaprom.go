// Package simbaprom exports simba's events as Prometheus metrics: an observe.Observer that
// updates collectors registered on a prometheus.Registerer. It is a module of its own, so
// that simba itself does not depend on client_golang.
//
//	obs, err := simbaprom.New(prometheus.DefaultRegisterer)
//	...
//	sched, err := simba.NewScheduler(backend, "nightly-report", schedule, work, simba.WithObserver(obs))
//
// # Metrics
//
// Every name starts with the namespace (default "simba"). Labels have few values; the
// mutex name is a label only with WithMutexLabel, for deployments with a handful of
// mutexes (a name per user or per request would make a series per name), except on the
// leadership metrics, which only Services and Schedulers update: a process has few of
// those.
//
//	simba_store_call_duration_seconds   histogram  op, outcome  store calls: start, acquire,
//	                                                            renew, lookup, release, stop;
//	                                                            outcome ok, error or timeout
//	simba_tenures_started_total         counter    via          tenures begun: via "call" (an
//	                                                            answer to an acquire) or
//	                                                            "handover" (the store's grant)
//	simba_tenures_ended_total           counter    cause        tenures ended: released,
//	                                                            owner_changed, expired,
//	                                                            store_error
//	simba_tenure_duration_seconds       histogram  cause        how long tenures lasted
//	simba_tenures_held                  gauge                   tenures this process
//	                                                            believes it holds now
//	simba_acquire_wait_seconds          histogram  try, outcome Locker and Mutexes
//	                                                            acquisitions: outcome
//	                                                            acquired or not_acquired
//	simba_leader                        gauge      mutex        1 while a Service or Scheduler
//	                                                            of this process leads the
//	                                                            mutex, 0 while it contends
//	                                                            or is stopped
//	simba_leader_tenures_started_total  counter    mutex        leaderships of the mutex begun
//	                                                            in this process
//
// Every metric but the leadership ones also has the label "kind": what the events concern,
// "mutex" (Services, Schedulers, Lockers, Mutexes), "semaphore" (a Semaphore's permits) or
// "rwlock" (an RWMutex's read and write holds); a semaphore's or read-write lock's tenure is
// one hold. With WithMutexLabel every other metric also has the label "mutex".
//
// Every series of a known label value is there at 0 before its first event: from New on
// for kind "mutex", from the first event of the kind for the others (a process that keeps
// no semaphore has no series of one), or with WithMutexLabel from the first event that
// names its mutex and kind (a semaphore's first is its start call); the leadership series
// from the leader's start-up, at Start, before it can lead. So a process that never led
// shows simba_tenures_held and simba_leader at 0 rather than nothing, and increase() and
// rate(), which need a sample before an event to count it, count the first loss. The
// README of the repository lists the queries to alert on; the tests of this package run
// them on scrapes of real services.
package simbaprom

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe"
)

// Observer is an observe.Observer that updates Prometheus collectors. It is safe for
// concurrent use; one Observer serves any number of services.
type Observer struct {
	mutexLabel  bool
	calls       *prometheus.HistogramVec
	started     *prometheus.CounterVec
	ended       *prometheus.CounterVec
	held        *prometheus.HistogramVec
	holding     *prometheus.GaugeVec
	waits       *prometheus.HistogramVec
	leader      *prometheus.GaugeVec   // mutex: 1 while a leader of this process leads it
	leaderships *prometheus.CounterVec // mutex: leaderships begun in this process
	named       sync.Map               // the (kind, mutex) whose series exist; mutex "" without the mutex label
}

var _ observe.Observer = (*Observer)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	namespace  string
	mutexLabel bool
	buckets    []float64
}

// WithMutexLabel adds the label "mutex" to every metric. Default: off, because every
// mutex name then makes series of its own; turn it on only for a small, fixed set of
// mutexes.
func WithMutexLabel() Option { return func(c *config) { c.mutexLabel = true } }

// WithNamespace sets the prefix of the metric names. Default "simba"; must be a valid
// metric name prefix (letters, digits and underscores, not starting with a digit).
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithBuckets sets the buckets, in seconds, of the histograms of store-call latency and
// acquisition wait. Default DefaultBuckets; must be non-empty and increasing.
func WithBuckets(b ...float64) Option { return func(c *config) { c.buckets = b } }

// DefaultBuckets spans store calls of a millisecond to acquisitions of a minute.
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// The values of the labels, each series of which is created at 0 before its first event.
var (
	ops      = []observe.Op{observe.OpStart, observe.OpAcquire, observe.OpRenew, observe.OpLookup, observe.OpRelease, observe.OpStop}
	outcomes = []string{"ok", "error", "timeout"}                              // observe.Call.Outcome
	causes   = []string{"released", "owner_changed", "expired", "store_error"} // observe.Tenure.Reason
	vias     = []string{"call", "handover"}
	tries    = []string{"false", "true"}
	acquired = []string{"acquired", "not_acquired"}
)

// New creates the collectors, registers them on reg and returns the Observer that updates
// them. It fails when an option is invalid (the error wraps simba.ErrInvalidArgument) or
// when reg refuses a collector (for example, because one of the same name is registered
// already).
func New(reg prometheus.Registerer, opts ...Option) (*Observer, error) {
	if reg == nil {
		return nil, simba.InvalidArgument("registerer", nil, "must not be nil")
	}
	c := config{namespace: "simba", buckets: DefaultBuckets}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	labels := func(names ...string) []string {
		names = append(names, "kind")
		if c.mutexLabel {
			names = append(names, "mutex")
		}
		return names
	}
	o := &Observer{
		mutexLabel: c.mutexLabel,
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: c.namespace, Name: "store_call_duration_seconds",
			Help:    "Latency of simba's store calls, by operation and outcome.",
			Buckets: c.buckets,
		}, labels("op", "outcome")),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: c.namespace, Name: "tenures_started_total",
			Help: "Tenures begun by contenders of this process: via an answer to an acquire call, or a hand-over by the store.",
		}, labels("via")),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: c.namespace, Name: "tenures_ended_total",
			Help: "Tenures ended, by cause: released, owner_changed, expired, store_error.",
		}, labels("cause")),
		held: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: c.namespace, Name: "tenure_duration_seconds",
			Help:    "How long tenures lasted, by cause of their end.",
			Buckets: prometheus.ExponentialBuckets(0.01, 4, 12),
		}, labels("cause")),
		holding: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: c.namespace, Name: "tenures_held",
			Help: "Tenures contenders of this process believe they hold now (1 on the leader of one mutex).",
		}, labels()),
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: c.namespace, Name: "acquire_wait_seconds",
			Help:    "Time Locker and Mutexes acquisitions waited, by kind (try) and outcome.",
			Buckets: c.buckets,
		}, labels("try", "outcome")),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: c.namespace, Name: "leader",
			Help: "1 while a Service or Scheduler of this process leads the mutex, 0 while it contends or is stopped.",
		}, []string{"mutex"}),
		leaderships: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: c.namespace, Name: "leader_tenures_started_total",
			Help: "Leaderships of the mutex begun by Services and Schedulers of this process.",
		}, []string{"mutex"}),
	}
	for _, col := range []prometheus.Collector{o.calls, o.started, o.ended, o.held, o.holding, o.waits, o.leader, o.leaderships} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	if !o.mutexLabel {
		o.name(observe.KindMutex, "")
	}
	return o, nil
}

// createSeries creates every series of a known label value of kind k at 0 (for mutex, with
// the mutex label), so that a process that never saw an event shows 0 rather than nothing,
// and increase() and rate() count a series' first event: they need a sample before it.
func (o *Observer) createSeries(k observe.Kind, mutex string) {
	for _, op := range ops {
		for _, outcome := range outcomes {
			o.calls.WithLabelValues(o.with(k, mutex, op.String(), outcome)...)
		}
	}
	for _, via := range vias {
		o.started.WithLabelValues(o.with(k, mutex, via)...)
	}
	for _, cause := range causes {
		o.ended.WithLabelValues(o.with(k, mutex, cause)...)
		o.held.WithLabelValues(o.with(k, mutex, cause)...)
	}
	o.holding.WithLabelValues(o.with(k, mutex)...)
	for _, try := range tries {
		for _, outcome := range acquired {
			o.waits.WithLabelValues(o.with(k, mutex, try, outcome)...)
		}
	}
}

// seriesOf names the series of one kind, and of one mutex with the mutex label.
type seriesOf struct {
	kind  observe.Kind
	mutex string
}

// name creates the series of kind k (and of mutex, with the mutex label) at their first
// event.
func (o *Observer) name(k observe.Kind, mutex string) {
	if !o.mutexLabel {
		mutex = ""
	}
	if _, seen := o.named.LoadOrStore(seriesOf{k, mutex}, struct{}{}); !seen {
		o.createSeries(k, mutex)
	}
}

func (c *config) validate() error {
	if !validName(c.namespace) {
		return simba.InvalidArgument("namespace", c.namespace, "must be letters, digits and underscores, not starting with a digit")
	}
	if len(c.buckets) == 0 {
		return simba.InvalidArgument("buckets", c.buckets, "must not be empty")
	}
	for i := 1; i < len(c.buckets); i++ {
		if c.buckets[i] <= c.buckets[i-1] {
			return simba.InvalidArgument("buckets", c.buckets, "must be increasing")
		}
	}
	return nil
}

func validName(s string) bool {
	for i, r := range s {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

// with returns the label values, plus the kind, plus the mutex when it is a label.
func (o *Observer) with(k observe.Kind, mutex string, values ...string) []string {
	values = append(values, k.String())
	if o.mutexLabel {
		return append(values, mutex)
	}
	return values
}

// OnCall observes a store call's latency. A leader's start-up creates the series of its
// mutex's leadership, at 0.
func (o *Observer) OnCall(c observe.Call) {
	o.name(c.Kind, c.Mutex)
	if c.Role == observe.RoleLeader && c.Op == observe.OpStart {
		o.leader.WithLabelValues(c.Mutex)
		o.leaderships.WithLabelValues(c.Mutex)
	}
	o.calls.WithLabelValues(o.with(c.Kind, c.Mutex, c.Op.String(), c.Outcome)...).Observe(c.Latency.Seconds())
}

// OnTenureBegan counts a tenure and raises the gauges of tenures held and, for a leader,
// of leadership.
func (o *Observer) OnTenureBegan(t observe.Tenure) {
	o.name(t.Kind, t.Mutex)
	via := "call"
	if t.Granted {
		via = "handover"
	}
	o.started.WithLabelValues(o.with(t.Kind, t.Mutex, via)...).Inc()
	o.holding.WithLabelValues(o.with(t.Kind, t.Mutex)...).Inc()
	if t.Role == observe.RoleLeader {
		o.leader.WithLabelValues(t.Mutex).Inc()
		o.leaderships.WithLabelValues(t.Mutex).Inc()
	}
}

// OnTenureEnded counts the end of a tenure by cause, observes how long it lasted and
// lowers the gauges that OnTenureBegan raised.
func (o *Observer) OnTenureEnded(t observe.Tenure) {
	o.name(t.Kind, t.Mutex)
	cause := t.Reason
	o.ended.WithLabelValues(o.with(t.Kind, t.Mutex, cause)...).Inc()
	o.held.WithLabelValues(o.with(t.Kind, t.Mutex, cause)...).Observe(t.Held.Seconds())
	o.holding.WithLabelValues(o.with(t.Kind, t.Mutex)...).Dec()
	if t.Role == observe.RoleLeader {
		o.leader.WithLabelValues(t.Mutex).Dec()
	}
}

// OnAcquire observes an acquisition's wait.
func (o *Observer) OnAcquire(_ context.Context, a observe.Acquisition) {
	o.name(a.Kind, a.Mutex)
	outcome := "acquired"
	if a.Err != nil {
		outcome = "not_acquired"
	}
	try := "false"
	if a.Try {
		try = "true"
	}
	o.waits.WithLabelValues(o.with(a.Kind, a.Mutex, try, outcome)...).Observe(a.Wait.Seconds())
}
