package simbagocron

import (
	"log/slog"
	"time"

	"github.com/simba-go/simba"
)

// DefaultMinHold is the Locker's minimum hold (WithMinHold): above the clock difference
// of hosts kept in sync by NTP plus schedulers' start jitter and a store's latency (a few
// to tens of milliseconds), below the period of most jobs (a cron job's is 1s at least).
const DefaultMinHold = 500 * time.Millisecond

// Option configures a Locker.
type Option func(*config)

type config struct {
	minHold   time.Duration
	logger    *slog.Logger
	loggerSet bool
	simba     []simba.MutexesOption
}

// WithMinHold sets how long after Lock a run's mutex stays held at least: a run that ends
// sooner keeps it until then, so that instances whose schedulers fire for the same slot a
// little later skip it. Choose it longer than the instances' clock difference plus their
// start jitter, and shorter than the job's period minus those: a mutex still held when the
// next slot fires skips that slot everywhere. Default DefaultMinHold (500ms); must be >= 0
// (0: release when the run ends).
func WithMinHold(d time.Duration) Option { return func(c *config) { c.minHold = d } }

// WithLogger sets the logger of the Locker (a Lock that no retry can cure, such as a
// refusal by the store, at Error; a failed release at Warn) and of its mutexes
// (simba.WithLogger, unless WithSimbaOptions sets one). Default: slog.Default() for the
// Locker, simba's default (Warn and above to slog.Default()) for the mutexes; must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger, c.loggerSet = l, true }
}

// WithSimbaOptions passes opts to simba.NewMutexes: TTL, contender ID, observer, logger.
func WithSimbaOptions(opts ...simba.MutexesOption) Option {
	return func(c *config) { c.simba = append(c.simba, opts...) }
}

func (c *config) validate() error {
	switch {
	case c.minHold < 0:
		return simba.InvalidArgument("min hold", c.minHold, "must be >= 0")
	case c.logger == nil:
		return simba.InvalidArgument("logger", nil, "must not be nil")
	}
	return nil
}

// mutexOptions returns the options of the Locker's simba.Mutexes: the logger of
// WithLogger, overridden by one among WithSimbaOptions.
func (c *config) mutexOptions() []simba.MutexesOption {
	if !c.loggerSet {
		return c.simba
	}
	return append([]simba.MutexesOption{simba.WithLogger(c.logger)}, c.simba...)
}
