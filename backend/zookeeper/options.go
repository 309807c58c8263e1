package zookeeper

import (
	"log/slog"

	"github.com/go-zookeeper/zk"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/defaultlog"
)

// Option configures a Backend.
type Option func(*config)

type config struct {
	acl        []zk.ACL
	logger     *slog.Logger
	loggerSet  bool
	queueLimit int
}

// WithACL sets the ACL of the nodes the backend creates: the contenders' nodes and, when
// missing, the container nodes /simba and /simba/<mutex>. Default zk.WorldACL(zk.PermAll),
// as Curator's; must not be empty. Every contender needs read access to the others'
// nodes (the owner's data is its contender ID). The slice is copied.
func WithACL(acl []zk.ACL) Option {
	return func(c *config) { c.acl = append([]zk.ACL(nil), acl...) }
}

// WithQueueWatchLimit sets the longest queue of nodes a session watches whole, with one
// persistent watch per mutex (ZooKeeper 3.6 or later); a longer queue is watched per
// node, as the ZooKeeper lock recipe does, until it is half as long. 0 turns the queue
// watch off. Default DefaultQueueWatchLimit; must not be negative. See the
// package documentation, Watches.
func WithQueueWatchLimit(n int) Option {
	return func(c *config) { c.queueLimit = n }
}

// WithLogger sets the logger for the backend's own events: sessions established, lost and
// expired, with the negotiated session timeout (Info), nodes left to delete after a lost
// connection (Warn) and heartbeats (Debug). Contentions log through the service's logger.
// Default: Warn and above to slog.Default, the rest nowhere; must not be nil.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger, c.loggerSet = l, true }
}

func newConfig(opts []Option) config {
	c := config{acl: zk.WorldACL(zk.PermAll), queueLimit: DefaultQueueWatchLimit}
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

func (c *config) validate() error {
	switch {
	case len(c.acl) == 0:
		return simba.InvalidArgument("acl", "[]", "must not be empty")
	case c.logger == nil:
		return simba.InvalidArgument("logger", nil, "must not be nil")
	case c.queueLimit < 0:
		return simba.InvalidArgument("queue watch limit", c.queueLimit, "must not be negative")
	}
	return nil
}
