// Package simbaotel exports simba's events through OpenTelemetry: metrics, and spans for
// acquisitions and renewals. It is an observe.Observer, in a module of its own, so that simba
// itself does not depend on OpenTelemetry.
//
//	obs, err := simbaotel.New() // the global MeterProvider and TracerProvider
//	...
//	locker, err := simba.NewLocker(backend, "payments", simba.WithObserver(obs))
//
// # Metrics
//
// Attributes have few values; the mutex name is an attribute of the metrics only with
// WithMutexAttribute (spans always carry it), except on the leadership metrics, which
// only Services and Schedulers update: a process has few of those.
//
//	simba.store.call.duration  histogram       s  simba.op, simba.outcome
//	simba.tenure.started       counter            simba.via (call, handover)
//	simba.tenure.ended         counter            simba.cause (released, owner_changed,
//	                                              expired, store_error)
//	simba.tenure.duration      histogram       s  simba.cause
//	simba.tenure.held          updowncounter      tenures this process believes it holds
//	simba.acquire.wait         histogram       s  simba.try, simba.outcome (acquired,
//	                                              not_acquired)
//	simba.leader.held          updowncounter      simba.mutex: 1 while a Service or
//	                                              Scheduler of this process leads the
//	                                              mutex, 0 while it contends or is stopped
//	simba.leader.started       counter            simba.mutex: leaderships begun
//
// The values of simba.op and simba.outcome are those of observe.Op and observe.Call.Outcome;
// simba.cause is observe.Tenure.Reason. Every metric but the leadership ones also has
// simba.kind, what the events concern (observe.Kind): "mutex", "semaphore" (a Semaphore's
// permits) or "rwlock" (an RWMutex's holds); a semaphore's or read-write lock's tenure is
// one hold.
//
// The counters have a point at 0 for every known attribute value before its first event:
// from New on for simba.kind "mutex", from the first event of the kind for the others, or
// with WithMutexAttribute from the first event that names its mutex and kind; the
// leadership counters from the leader's start-up, at Start, before it can lead. So a
// process that never led reports 0 rather than nothing, and a backend that computes
// increases from cumulative points (Prometheus's increase()) counts the first event. The
// histograms have no such point: OpenTelemetry records none without a measurement.
//
// # Spans
//
// "simba.acquire" spans one acquisition (Locker, Mutexes, Semaphore, RWMutex), from the call to its return, as
// a child of the span in the caller's context. simba.outcome says "acquired" or
// "not_acquired", and simba.reason why not: "held" (another contender owns the mutex),
// "deadline" or "canceled" (the caller's context ended), "lapsed" (the tenure ended before
// it could be handed out) are outcomes, with status Unset; "refused" (simba.ErrRefused),
// "timeout" (simba.ErrTimeout), "closed" (simba.ErrClosed) and "error" (any other error,
// a store's among them) are failures, with status Error and the error's message.
//
// "simba.renew" spans one renewal call of an owner; no caller waits for it, so it is the
// root of a trace of its own, with status Error when the call failed. Both carry
// simba.mutex, simba.kind, simba.contender and, when known, simba.token. simba tells its Observer of
// an event when it is over, so the spans are recorded afterwards, with their real start
// and end times.
package simbaotel

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/observe"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/simba-go/simba/observe/simbaotel"

// Observer is an observe.Observer that records OpenTelemetry metrics and spans. It is safe
// for concurrent use; one Observer serves any number of services.
type Observer struct {
	mutexAttr   bool
	tracer      trace.Tracer
	calls       metric.Float64Histogram
	started     metric.Int64Counter
	ended       metric.Int64Counter
	held        metric.Float64Histogram
	holding     metric.Int64UpDownCounter
	waits       metric.Float64Histogram
	leader      metric.Int64UpDownCounter // by mutex: 1 while a leader of this process leads it
	leaderships metric.Int64Counter       // by mutex: leaderships begun in this process
	named       sync.Map                  // the (kind, mutex) whose points exist; mutex "" without the mutex attribute
}

var _ observe.Observer = (*Observer)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	meters    metric.MeterProvider
	tracers   trace.TracerProvider
	mutexAttr bool
}

// WithMeterProvider sets where the metrics go. Default: the global MeterProvider
// (otel.GetMeterProvider); must not be nil.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.meters = mp }
}

// WithTracerProvider sets where the spans go. Default: the global TracerProvider
// (otel.GetTracerProvider); must not be nil.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tracers = tp }
}

// WithMutexAttribute adds simba.mutex to the attributes of every metric. Default: off,
// because every mutex name then makes series of its own; turn it on only for a small,
// fixed set of mutexes.
func WithMutexAttribute() Option { return func(c *config) { c.mutexAttr = true } }

// The values of the counters' attributes, each of which has a point at 0 before its first
// event.
var (
	vias   = []string{"call", "handover"}
	causes = []string{"released", "owner_changed", "expired", "store_error"} // observe.Tenure.Reason
)

// New creates the instruments and returns the Observer that records them. It fails when
// a provider is nil (the error wraps simba.ErrInvalidArgument) or an instrument cannot be
// created.
func New(opts ...Option) (*Observer, error) {
	c := config{meters: otel.GetMeterProvider(), tracers: otel.GetTracerProvider()}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.meters == nil:
		return nil, simba.InvalidArgument("meter provider", nil, "must not be nil")
	case c.tracers == nil:
		return nil, simba.InvalidArgument("tracer provider", nil, "must not be nil")
	}
	m := c.meters.Meter(ScopeName)
	o := &Observer{mutexAttr: c.mutexAttr, tracer: c.tracers.Tracer(ScopeName)}
	var errs [8]error
	o.calls, errs[0] = m.Float64Histogram("simba.store.call.duration", metric.WithUnit("s"),
		metric.WithDescription("Latency of simba's store calls, by operation and outcome."))
	o.started, errs[1] = m.Int64Counter("simba.tenure.started", metric.WithUnit("{tenure}"),
		metric.WithDescription("Tenures begun by contenders of this process."))
	o.ended, errs[2] = m.Int64Counter("simba.tenure.ended", metric.WithUnit("{tenure}"),
		metric.WithDescription("Tenures ended, by cause."))
	o.held, errs[3] = m.Float64Histogram("simba.tenure.duration", metric.WithUnit("s"),
		metric.WithDescription("How long tenures lasted, by cause of their end."))
	o.holding, errs[4] = m.Int64UpDownCounter("simba.tenure.held", metric.WithUnit("{tenure}"),
		metric.WithDescription("Tenures contenders of this process believe they hold now."))
	o.waits, errs[5] = m.Float64Histogram("simba.acquire.wait", metric.WithUnit("s"),
		metric.WithDescription("Time Locker and Mutexes acquisitions waited, by kind and outcome."))
	o.leader, errs[6] = m.Int64UpDownCounter("simba.leader.held", metric.WithUnit("{tenure}"),
		metric.WithDescription("1 while a Service or Scheduler of this process leads the mutex, 0 while it contends or is stopped."))
	o.leaderships, errs[7] = m.Int64Counter("simba.leader.started", metric.WithUnit("{tenure}"),
		metric.WithDescription("Leaderships of the mutex begun by Services and Schedulers of this process."))
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if !o.mutexAttr {
		o.name(observe.KindMutex, "")
	}
	return o, nil
}

// createPoints adds 0 to the counters for every known attribute value of kind k (for
// mutex, with the mutex attribute), so that a process that never saw an event reports 0
// rather than nothing, and a backend's increase() counts the first event. Histograms have
// no such way: their points appear with their first measurement.
func (o *Observer) createPoints(k observe.Kind, mutex string) {
	ctx := context.Background()
	for _, via := range vias {
		o.started.Add(ctx, 0, o.attrs(k, mutex, attribute.String("simba.via", via)))
	}
	for _, cause := range causes {
		o.ended.Add(ctx, 0, o.attrs(k, mutex, attribute.String("simba.cause", cause)))
	}
	o.holding.Add(ctx, 0, o.attrs(k, mutex))
}

// pointsOf names the points of one kind, and of one mutex with the mutex attribute.
type pointsOf struct {
	kind  observe.Kind
	mutex string
}

// name creates the points of kind k (and of mutex, with the mutex attribute) at their
// first event.
func (o *Observer) name(k observe.Kind, mutex string) {
	if !o.mutexAttr {
		mutex = ""
	}
	if _, seen := o.named.LoadOrStore(pointsOf{k, mutex}, struct{}{}); !seen {
		o.createPoints(k, mutex)
	}
}

// attrs returns the metric attributes kv, plus the kind, plus the mutex when it is one.
func (o *Observer) attrs(k observe.Kind, mutex string, kv ...attribute.KeyValue) metric.MeasurementOption {
	kv = append(kv, attribute.String("simba.kind", k.String()))
	if o.mutexAttr {
		kv = append(kv, attribute.String("simba.mutex", mutex))
	}
	return metric.WithAttributes(kv...)
}

// leadership returns the attributes of mutex's leadership metrics: the mutex, always.
func leadership(mutex string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("simba.mutex", mutex))
}

// OnCall records a store call's latency, and a span for a renewal. A leader's start-up
// creates the points of its mutex's leadership, at 0.
func (o *Observer) OnCall(c observe.Call) {
	ctx := context.Background()
	o.name(c.Kind, c.Mutex)
	if c.Role == observe.RoleLeader && c.Op == observe.OpStart {
		o.leader.Add(ctx, 0, leadership(c.Mutex))
		o.leaderships.Add(ctx, 0, leadership(c.Mutex))
	}
	o.calls.Record(ctx, c.Latency.Seconds(), o.attrs(c.Kind, c.Mutex,
		attribute.String("simba.op", c.Op.String()), attribute.String("simba.outcome", c.Outcome)))
	if c.Op == observe.OpRenew {
		// No caller waits for a renewal: its span is the root of a trace of its own.
		o.span(ctx, "simba.renew", c.Mutex, c.Contender, c.Token, c.Latency, c.Err,
			attribute.String("simba.outcome", c.Outcome), attribute.String("simba.owner", c.Owner),
			attribute.String("simba.kind", c.Kind.String()))
	}
}

// OnTenureBegan counts a tenure and adds it to the tenures held and, for a leader, to its
// mutex's leadership.
func (o *Observer) OnTenureBegan(t observe.Tenure) {
	ctx := context.Background()
	o.name(t.Kind, t.Mutex)
	via := "call"
	if t.Granted {
		via = "handover"
	}
	o.started.Add(ctx, 1, o.attrs(t.Kind, t.Mutex, attribute.String("simba.via", via)))
	o.holding.Add(ctx, 1, o.attrs(t.Kind, t.Mutex))
	if t.Role == observe.RoleLeader {
		o.leader.Add(ctx, 1, leadership(t.Mutex))
		o.leaderships.Add(ctx, 1, leadership(t.Mutex))
	}
}

// OnTenureEnded counts the end of a tenure by cause, records how long it lasted and takes
// it from what OnTenureBegan added it to.
func (o *Observer) OnTenureEnded(t observe.Tenure) {
	ctx := context.Background()
	o.name(t.Kind, t.Mutex)
	cause := o.attrs(t.Kind, t.Mutex, attribute.String("simba.cause", t.Reason))
	o.ended.Add(ctx, 1, cause)
	o.held.Record(ctx, t.Held.Seconds(), cause)
	o.holding.Add(ctx, -1, o.attrs(t.Kind, t.Mutex))
	if t.Role == observe.RoleLeader {
		o.leader.Add(ctx, -1, leadership(t.Mutex))
	}
}

// OnAcquire records an acquisition's span, in the caller's trace, and its wait.
func (o *Observer) OnAcquire(ctx context.Context, a observe.Acquisition) {
	o.name(a.Kind, a.Mutex)
	outcome, reason, failure := acquisition(a.Err)
	try, out := attribute.Bool("simba.try", a.Try), attribute.String("simba.outcome", outcome)
	spanned := []attribute.KeyValue{try, out, attribute.String("simba.kind", a.Kind.String())}
	if reason != "" {
		spanned = append(spanned, attribute.String("simba.reason", reason))
	}
	ctx = o.span(ctx, "simba.acquire", a.Mutex, a.Contender, a.Token, a.Wait, failure, spanned...)
	o.waits.Record(ctx, a.Wait.Seconds(), o.attrs(a.Kind, a.Mutex, try, out)) // ctx's span: the exemplar
}

// acquisition returns the outcome of an acquisition that returned err ("acquired" or
// "not_acquired"), the reason it was not acquired, and err if that reason is a failure
// rather than an outcome: "held" (another owns the mutex), "deadline", "canceled" (the
// caller's context ended) or "lapsed" (the tenure ended before it was handed out) are
// outcomes; "refused", "timeout", "closed" and "error" (any other error, a store's among
// them) are failures.
func acquisition(err error) (outcome, reason string, failure error) {
	switch {
	case err == nil:
		return "acquired", "", nil
	case !errors.Is(err, simba.ErrNotAcquired) || failed(err):
		reason = "error"
		switch {
		case errors.Is(err, simba.ErrRefused):
			reason = "refused"
		case errors.Is(err, simba.ErrTimeout):
			reason = "timeout"
		case errors.Is(err, simba.ErrClosed):
			reason = "closed"
		}
		return "not_acquired", reason, err
	case errors.Is(err, context.DeadlineExceeded):
		return "not_acquired", "deadline", nil
	case errors.Is(err, context.Canceled):
		return "not_acquired", "canceled", nil
	case errors.Is(err, simba.ErrOwnershipLost):
		return "not_acquired", "lapsed", nil
	}
	return "not_acquired", "held", nil
}

// failed reports whether err, or an error it wraps, is other than ErrNotAcquired,
// ErrOwnershipLost and a context's error: a store's error, ErrRefused, ErrTimeout,
// ErrClosed. An acquisition's error wraps the store's last error, if any, beside the
// context's.
func failed(err error) bool {
	switch err { //nolint:errorlint // the sentinels themselves, met as the tree is walked
	case simba.ErrNotAcquired, simba.ErrOwnershipLost, context.Canceled, context.DeadlineExceeded:
		return false
	}
	switch e := err.(type) { //nolint:errorlint // walks the tree
	case interface{ Unwrap() []error }:
		return slices.ContainsFunc(e.Unwrap(), failed)
	case interface{ Unwrap() error }:
		if inner := e.Unwrap(); inner != nil {
			return failed(inner)
		}
	}
	return true
}

// span records a span that ended now and lasted d, as a child of the span in ctx (if
// any), and returns the context that carries it. A failure (non-nil) sets its status to
// Error with the failure's message.
func (o *Observer) span(ctx context.Context, name, mutex, contender string, token uint64, d time.Duration, failure error, extra ...attribute.KeyValue) context.Context {
	end := time.Now()
	kv := append([]attribute.KeyValue{
		attribute.String("simba.mutex", mutex), attribute.String("simba.contender", contender),
	}, extra...)
	if token != 0 {
		kv = append(kv, attribute.String("simba.token", strconv.FormatUint(token, 10)))
	}
	ctx, s := o.tracer.Start(ctx, name, trace.WithTimestamp(end.Add(-d)),
		trace.WithAttributes(kv...), trace.WithSpanKind(trace.SpanKindClient))
	if failure != nil {
		// No exception event: its type would be one of simba's unexported error types.
		s.SetStatus(codes.Error, failure.Error())
	}
	s.End(trace.WithTimestamp(end))
	return ctx
}
