// Package simbaotel exports simba's events through OpenTelemetry: metrics, and spans for
// acquisitions and renewals. It is a simba.Observer, in a module of its own, so that simba
// itself does not depend on OpenTelemetry.
//
//	obs, err := simbaotel.New() // the global MeterProvider and TracerProvider
//	...
//	locker, err := simba.NewLocker(backend, "payments", simba.WithObserver(obs))
//
// # Metrics
//
// Attributes have few values; the mutex name is an attribute of the metrics only with
// WithMutexAttribute (spans always carry it).
//
//	simba.store.call.duration  histogram       s  simba.op, simba.outcome
//	simba.tenure.started       counter            simba.via (call, handover)
//	simba.tenure.ended         counter            simba.cause (released, owner_changed,
//	                                              expired, store_error)
//	simba.tenure.duration      histogram       s  simba.cause
//	simba.tenure.held          updowncounter      tenures this process believes it holds
//	simba.acquire.wait         histogram       s  simba.try, simba.outcome (acquired,
//	                                              not_acquired)
//
// The values of simba.op and simba.outcome are those of simba.Op and simba.Call.Outcome;
// simba.cause is simba.Tenure.Reason.
//
// # Spans
//
// "simba.acquire" spans one Locker or Mutexes acquisition, from the call to its return;
// "simba.renew" spans one renewal call of an owner. Both carry simba.mutex,
// simba.contender and, when known, simba.token, and have status Error when they failed.
// simba tells its Observer of an event when it is over, without the caller's context, so
// the spans are recorded afterwards, with their real start and end times, as roots of
// traces of their own.
package simbaotel

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/simba-go/simba"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/simba-go/simba/observe/simbaotel"

// Observer is a simba.Observer that records OpenTelemetry metrics and spans. It is safe
// for concurrent use; one Observer serves any number of services.
type Observer struct {
	mutexAttr bool
	tracer    trace.Tracer
	calls     metric.Float64Histogram
	started   metric.Int64Counter
	ended     metric.Int64Counter
	held      metric.Float64Histogram
	holding   metric.Int64UpDownCounter
	waits     metric.Float64Histogram
}

var _ simba.Observer = (*Observer)(nil)

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
	var errs [6]error
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
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return o, nil
}

// attrs returns the metric attributes kv, plus the mutex when it is one.
func (o *Observer) attrs(mutex string, kv ...attribute.KeyValue) metric.MeasurementOption {
	if o.mutexAttr {
		kv = append(kv, attribute.String("simba.mutex", mutex))
	}
	return metric.WithAttributes(kv...)
}

// OnCall records a store call's latency, and a span for a renewal.
func (o *Observer) OnCall(c simba.Call) {
	ctx := context.Background()
	o.calls.Record(ctx, c.Latency.Seconds(), o.attrs(c.Mutex,
		attribute.String("simba.op", c.Op.String()), attribute.String("simba.outcome", c.Outcome())))
	if c.Op == simba.OpRenew {
		o.span("simba.renew", c.Mutex, c.Contender, c.Token, c.Latency, c.Err,
			attribute.String("simba.outcome", c.Outcome()), attribute.String("simba.owner", c.Owner))
	}
}

// OnTenureBegan counts a tenure and adds it to the tenures held.
func (o *Observer) OnTenureBegan(t simba.Tenure) {
	ctx := context.Background()
	via := "call"
	if t.Granted {
		via = "handover"
	}
	o.started.Add(ctx, 1, o.attrs(t.Mutex, attribute.String("simba.via", via)))
	o.holding.Add(ctx, 1, o.attrs(t.Mutex))
}

// OnTenureEnded counts the end of a tenure by cause, records how long it lasted and takes
// it from the tenures held.
func (o *Observer) OnTenureEnded(t simba.Tenure) {
	ctx := context.Background()
	cause := o.attrs(t.Mutex, attribute.String("simba.cause", t.Reason()))
	o.ended.Add(ctx, 1, cause)
	o.held.Record(ctx, t.Held.Seconds(), cause)
	o.holding.Add(ctx, -1, o.attrs(t.Mutex))
}

// OnAcquire records an acquisition's wait, and its span.
func (o *Observer) OnAcquire(_ context.Context, a simba.Acquisition) {
	outcome := "acquired"
	if a.Err != nil {
		outcome = "not_acquired"
	}
	o.waits.Record(context.Background(), a.Wait.Seconds(), o.attrs(a.Mutex,
		attribute.Bool("simba.try", a.Try), attribute.String("simba.outcome", outcome)))
	o.span("simba.acquire", a.Mutex, a.Contender, a.Token, a.Wait, a.Err, attribute.Bool("simba.try", a.Try))
}

// span records a span that ended now and lasted d.
func (o *Observer) span(name, mutex, contender string, token uint64, d time.Duration, err error, extra ...attribute.KeyValue) {
	end := time.Now()
	kv := append([]attribute.KeyValue{
		attribute.String("simba.mutex", mutex), attribute.String("simba.contender", contender),
	}, extra...)
	if token != 0 {
		kv = append(kv, attribute.String("simba.token", strconv.FormatUint(token, 10)))
	}
	_, s := o.tracer.Start(context.Background(), name, trace.WithTimestamp(end.Add(-d)),
		trace.WithAttributes(kv...), trace.WithSpanKind(trace.SpanKindClient))
	if err != nil {
		s.RecordError(err)
		s.SetStatus(codes.Error, err.Error())
	}
	s.End(trace.WithTimestamp(end))
}
