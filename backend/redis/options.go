package redis

import (
	"log/slog"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/defaultlog"
)

// Defaults and limits of the options.
const (
	// DefaultPingInterval is how long the subscription connection may stay quiet before
	// the backend checks it with a PING.
	DefaultPingInterval = 15 * time.Second
	// MinPingInterval is the shortest ping interval WithPingInterval accepts.
	MinPingInterval = 100 * time.Millisecond
)

// Option configures a Backend. Options are applied in order to defaults and then
// validated together; an invalid value makes New fail with an error wrapping
// simba.ErrInvalidArgument.
type Option func(*config)

type config struct {
	logger    *slog.Logger
	loggerSet bool
	ping      time.Duration

	// Quorum only
	minAvailable    int
	minAvailableSet bool
	recheck         time.Duration
	recheckSet      bool
}

// DefaultRecheckAfter is how long a Quorum leaves out an instance that failed before
// trying it again.
const DefaultRecheckAfter = 30 * time.Second

// WithMinAvailable sets how many of a Quorum's instances must be available (not left out
// after a failure) for an acquisition to be tried at all; with fewer, Acquire fails at
// once with an error wrapping ErrTooFewInstances. Default: the quorum, a majority of all
// instances; must be between the quorum and the number of instances. Only NewQuorum
// accepts it.
func WithMinAvailable(n int) Option {
	return func(c *config) { c.minAvailable, c.minAvailableSet = n, true }
}

// WithRecheckAfter sets how long a Quorum leaves out an instance whose call failed (timed
// out, reset; not one that refuses the client) before trying it again. Default 30s
// (Bedrock's combination lock waits 15 minutes); must be > 0. Only NewQuorum accepts it.
func WithRecheckAfter(d time.Duration) Option {
	return func(c *config) { c.recheck, c.recheckSet = d, true }
}

// WithLogger sets the logger for the backend's own events: problems of the subscription
// connection (Warn) and fencing tokens that went backwards (Error). What happens to one
// mutex is logged by the service, through its own logger. Default: Warn and above to
// slog.Default, the rest nowhere; must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger, c.loggerSet = l, true }
}

// WithPingInterval sets how long the subscription connection may stay quiet before the
// backend sends it a PING; when the answer does not come within as long again, the
// connection is replaced and every channel subscribed anew. It bounds how long a
// connection that died without a reset (a half-open TCP connection) can keep release
// messages from waiters, which then fall back to the contend period. Default 15s (see
// DefaultPingInterval); must be at least 100ms.
func WithPingInterval(d time.Duration) Option {
	return func(c *config) { c.ping = d }
}

func newConfig(opts []Option) (config, error) {
	c := config{ping: DefaultPingInterval, recheck: DefaultRecheckAfter}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	switch {
	case c.loggerSet && c.logger == nil:
		return c, simba.InvalidArgument("logger", nil, "must not be nil")
	case c.ping < MinPingInterval:
		return c, simba.InvalidArgument("ping interval", c.ping, "must be at least "+MinPingInterval.String())
	case c.recheck <= 0:
		return c, simba.InvalidArgument("recheck after", c.recheck, "must be > 0")
	}
	if c.logger == nil {
		c.logger = defaultlog.New()
	}
	return c, nil
}
