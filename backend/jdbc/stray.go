package jdbc

import (
	"context"
	"time"
)

// Abandoned statements. A caller that gives up on an acquisition (its context ends: Stop
// cut the round short, a deadline passed) leaves its UPDATE to the server, which may
// still run it: after the release that followed found the row free or someone else's, it
// can take the row for a contender that has stopped (a renewal's cannot: mysqlTakesFree;
// nor, on MySQL and MariaDB, one made while the contention's pinned session held the
// named lock, once that session has let it go: mysqlAcquireHolding), and the mutex then
// stays held until that lease lapses. The server gives a statement up at the caller's
// deadline (MariaDB's max_statement_time; on PostgreSQL, lock_timeout ends its wait for a
// row lock: see Dialect.bound), so strayGrace after that deadline the row is safe from
// it; MySQL has no such limit, and there the window is a heuristic. A contention that
// stops while one of its UPDATEs may still run leaves a sweep behind: once the window has
// closed, the sweep reads the row and releases it if it names the stopped contender,
// unless a contention of the same contender has started meanwhile (its acquisitions take
// such a row over as its own). Close waits for the sweeps.

// strayGrace is how long after its caller's deadline an abandoned statement may still
// take effect: the server counts the statement's limit from its start, a little after
// the statement was sent.
const strayGrace = 100 * time.Millisecond

// sweepTimeout bounds a sweep's read and release.
const sweepTimeout = time.Second

// abandoned records that a statement run under ctx failed, perhaps without the server
// knowing: it may still run until ctx's deadline.
func (c *contention) abandoned(ctx context.Context) {
	if dl, ok := ctx.Deadline(); ok && dl.Add(strayGrace).After(c.stray) {
		c.stray = dl.Add(strayGrace)
	}
}

// sweepLater, from StopContend, the contention's last call, leaves a sweep behind if an
// abandoned UPDATE of the contention may still take the row and the backend is not
// closed. It reports whether it did; the sweep then leaves the mutex's floor when done,
// which StopContend would otherwise.
func (c *contention) sweepLater() bool {
	if c.id == "" || !time.Now().Before(c.stray) {
		return false
	}
	b := c.b
	b.mu.Lock()
	if b.contentions == nil {
		// Closed, or closing: the pool may be closed once Close returns, so no sweep
		// is left behind after it; the lease lapses by itself.
		b.mu.Unlock()
		return false
	}
	b.background.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.background.Done()
		defer b.floors.leave(c.mutex)
		t := time.NewTimer(time.Until(c.stray))
		<-t.C
		c.sweep()
	}()
	return true
}

// sweep releases the row if it names the stopped contention's contender. The backend's
// lock keeps a contention of the same contender from starting until it is done (and
// every other StartContend and StopContend of the backend waits too, at most
// sweepTimeout: sweeps are rare, one per acquisition given up on as its contender
// stopped).
func (c *contention) sweep() {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	for o := range b.contentions {
		if o.mutex == c.mutex && o.id == c.id {
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), sweepTimeout)
	defer cancel()
	before := c.version
	c.doubt = true
	if err := c.releaseRow(ctx); err != nil {
		c.log.Warn("simba/jdbc: could not sweep the row after an abandoned acquisition; its lease lapses by itself",
			"mutex", c.mutex, "err", err)
		return
	}
	if c.version != before && c.token == 0 {
		c.log.Info("simba/jdbc: released the row an abandoned acquisition took after its contender stopped",
			"mutex", c.mutex, "version", before)
	}
}
