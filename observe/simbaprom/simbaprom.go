// Package simbaprom exports simba's events as Prometheus metrics: a simba.Observer that
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
// mutexes (a name per user or per request would make a series per name).
//
//	simba_store_call_duration_seconds  histogram  op, outcome  store calls: start, acquire,
//	                                                           renew, lookup, release, stop;
//	                                                           outcome ok, error or timeout
//	simba_tenures_started_total        counter    via          tenures begun: via "call" (an
//	                                                           answer to an acquire) or
//	                                                           "handover" (the store's grant)
//	simba_tenures_ended_total          counter    cause        tenures ended: released,
//	                                                           owner_changed, expired,
//	                                                           store_error
//	simba_tenure_duration_seconds      histogram  cause        how long tenures lasted
//	simba_tenures_held                 gauge                   tenures this process
//	                                                           believes it holds now
//	simba_acquire_wait_seconds         histogram  try, outcome Locker and Mutexes
//	                                                           acquisitions: outcome
//	                                                           acquired or not_acquired
//
// With WithMutexLabel every metric also has the label "mutex". The README of the
// repository lists the queries to alert on (leader flapping, lost leases, acquisition
// wait).
package simbaprom

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/simba-go/simba"
)

// Observer is a simba.Observer that updates Prometheus collectors. It is safe for
// concurrent use; one Observer serves any number of services.
type Observer struct {
	mutexLabel bool
	calls      *prometheus.HistogramVec
	started    *prometheus.CounterVec
	ended      *prometheus.CounterVec
	held       *prometheus.HistogramVec
	holding    *prometheus.GaugeVec
	waits      *prometheus.HistogramVec
}

var _ simba.Observer = (*Observer)(nil)

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
	}
	for _, col := range []prometheus.Collector{o.calls, o.started, o.ended, o.held, o.holding, o.waits} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return o, nil
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

// with returns the label values, plus the mutex when it is a label.
func (o *Observer) with(mutex string, values ...string) []string {
	if o.mutexLabel {
		return append(values, mutex)
	}
	return values
}

// OnCall observes a store call's latency.
func (o *Observer) OnCall(c simba.Call) {
	o.calls.WithLabelValues(o.with(c.Mutex, c.Op.String(), c.Outcome())...).Observe(c.Latency.Seconds())
}

// OnTenureBegan counts a tenure and raises the gauge of tenures held.
func (o *Observer) OnTenureBegan(t simba.Tenure) {
	via := "call"
	if t.Granted {
		via = "handover"
	}
	o.started.WithLabelValues(o.with(t.Mutex, via)...).Inc()
	o.holding.WithLabelValues(o.with(t.Mutex)...).Inc()
}

// OnTenureEnded counts the end of a tenure by cause, observes how long it lasted and
// lowers the gauge of tenures held.
func (o *Observer) OnTenureEnded(t simba.Tenure) {
	cause := t.Reason()
	o.ended.WithLabelValues(o.with(t.Mutex, cause)...).Inc()
	o.held.WithLabelValues(o.with(t.Mutex, cause)...).Observe(t.Held.Seconds())
	o.holding.WithLabelValues(o.with(t.Mutex)...).Dec()
}

// OnAcquire observes an acquisition's wait.
func (o *Observer) OnAcquire(_ context.Context, a simba.Acquisition) {
	outcome := "acquired"
	if a.Err != nil {
		outcome = "not_acquired"
	}
	try := "false"
	if a.Try {
		try = "true"
	}
	o.waits.WithLabelValues(o.with(a.Mutex, try, outcome)...).Observe(a.Wait.Seconds())
}
