package etcd

import (
	"log/slog"
	"strings"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/defaultlog"
)

const (
	// DefaultPrefix is the key prefix under which the backend keeps its mutexes.
	DefaultPrefix = "simba/"
	// DefaultLeaseTTL is the TTL the backend asks for its lease: as simba.DefaultTTL, a
	// crashed owner's successor takes over about as soon as on a lease store.
	DefaultLeaseTTL = 10 * time.Second
)

// Option configures a Backend.
type Option func(*config)

type config struct {
	prefix    string
	leaseTTL  time.Duration
	logger    *slog.Logger
	loggerSet bool
}

// WithPrefix sets the prefix of the backend's keys: mutex m lives under prefix + m + "/".
// Default DefaultPrefix; it must end with '/', so that no mutex's keys lie under another's.
// Services that contend for the same mutex must use the same prefix.
func WithPrefix(prefix string) Option {
	return func(c *config) { c.prefix = prefix }
}

// WithLeaseTTL sets the TTL the backend asks for its lease, in whole seconds (etcd's unit):
// how long a crashed process's keys, and so its ownership, outlive it. The server raises
// a TTL below its minimum (1.5 × its election timeout, rounded up to seconds: 2s by
// default), and the backend goes by what the server granted. Default DefaultLeaseTTL.
func WithLeaseTTL(d time.Duration) Option {
	return func(c *config) { c.leaseTTL = d }
}

// WithLogger sets the logger for the backend's own events: leases granted and lost (Info),
// keys left to delete (Warn) and keep-alives that failed (Debug). Contentions log through
// the service's logger. Default: Warn and above to slog.Default; must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger, c.loggerSet = l, true }
}

func newConfig(opts []Option) config {
	c := config{prefix: DefaultPrefix, leaseTTL: DefaultLeaseTTL}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if !c.loggerSet {
		c.logger = defaultlog.New()
	}
	return c
}

// maxLeaseTTL is etcd's limit on a lease's TTL (9,000,000,000 seconds).
const maxLeaseTTL = 9_000_000_000 * time.Second

func (c *config) validate() error {
	switch {
	case c.prefix == "" || !strings.HasSuffix(c.prefix, "/"):
		return simba.InvalidArgument("prefix", c.prefix, "must end with '/'")
	case c.leaseTTL < time.Second || c.leaseTTL%time.Second != 0 || c.leaseTTL > maxLeaseTTL:
		return simba.InvalidArgument("lease TTL", c.leaseTTL, "must be a whole number of seconds from 1s to 9e9s")
	case c.logger == nil:
		return simba.InvalidArgument("logger", nil, "must not be nil")
	}
	return nil
}
