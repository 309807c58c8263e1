package jdbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/simba-go/simba/backend"
)

// The fast hand-over: the package doc (Hand-over, end to end) gives its statements and
// timelines. The named lock is a hint only: ownership is decided by the table, and a
// wrong or missing hint costs time, never safety.

const (
	// waitSeconds bounds one server-side wait for the named lock; the waiter then waits
	// again.
	waitSeconds = 30
	// interruptFor bounds the attempts to interrupt a waiter before its connection is
	// closed instead.
	interruptFor = time.Second
	// deferral is how long, at least, an acquisition that finds the row free while
	// another session holds the named lock leaves the row to that session before it
	// runs its UPDATE: deferralTrips times the round trip of its read, if that is
	// longer. A contender woken by the lock takes the row within a round trip or two; a
	// holder that does not (a head of the queue polling on its contend period, or an
	// owner that lost its lease but not its connection) costs the others this much per
	// holder the lock went to meanwhile (deferTo).
	deferral      = 25 * time.Millisecond
	deferralTrips = 4
	// deferralTurns bounds how many sessions in turn an acquisition leaves a free row to
	// (see deferTo).
	deferralTurns = 4
)

// handOver is a contention's hand-over state. The contention's calls start and stop the
// waiter; the waiter goroutine owns conn while waiting is set.
type handOver struct {
	mu        sync.Mutex
	conn      *sql.Conn          // the pinned connection; nil when none
	session   int64              // its server session ID; 0 when unknown
	holds     bool               // the named lock is held on conn
	other     bool               // another session held the named lock at the last try
	passed    time.Time          // when the contention last passed its place on (follow)
	passedFor string             // the owner it passed its place on for
	inAcquire bool               // an Acquire call is under way: it sees a grant itself
	unwoken   bool               // the lock was taken during that call, which did not wake the service
	waiting   bool               // the waiter goroutine is using conn
	unsure    bool               // a wait ended in an error on conn, which may hold the lock all the same (see pgSettle)
	stop      chan struct{}      // closed to ask the waiter to stop
	done      chan struct{}      // closed when the waiter has returned
	granted   chan struct{}      // closed when the waiter has taken the lock
	cancel    context.CancelFunc // ends the waiter's statement by closing conn
	gone      bool               // freed for good: StopContend or the backend's Close
	wg        sync.WaitGroup
}

// opening is how an acquisition begins.
type opening int

const (
	// plainOpening: the acquire statement, or a read first while another session holds
	// the named lock (no hand-over, or no pinned connection).
	plainOpening opening = iota
	// lockingOpening: the acquire statement that takes the named lock too
	// (lockingAcquirer), on the pinned connection.
	lockingOpening
	// tryingOpening: a read that tries the named lock too (statements.readTrying), on the
	// pinned connection, for a contention whose last turn was contended (MySQL), or where
	// the acquire may not take the lock itself (statement-based binary logging).
	tryingOpening
)

// prepareLock, before an acquisition, makes sure that a contender which may win holds the
// named lock before its UPDATE commits, so that anyone who reads the row naming it finds
// the lock taken and waits for it: it pins a connection if the contention has none, and
// returns how the acquisition tries the lock on it. A contention whose last turn was
// contended (it waited for the lock, or found another session holding it) begins with a
// read where the dialect has one that tries the lock (MySQL, whose acquire cannot answer
// the row): the row is most likely another's, and a read, which locks no row, tells at
// once. Failures only cost the hint; they are not errors.
func (c *contention) prepareLock(ctx context.Context) opening {
	if c.lock == "" {
		return plainOpening
	}
	h := &c.hand
	h.mu.Lock()
	if h.gone || h.waiting {
		h.mu.Unlock()
		return plainOpening
	}
	conn, holds, unsure := h.conn, h.holds, h.unsure
	h.mu.Unlock()
	if conn != nil && !alive(ctx, conn) {
		c.drop(conn) // the server restarted, say: its lock went with the session
		conn, holds, unsure = nil, false, false
	}
	if holds {
		return plainOpening
	}
	// Leave the acquisition itself at least half of the time.
	pctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		pctx, cancel = context.WithDeadline(ctx, dl.Add(-time.Until(dl)/2))
		defer cancel()
	}
	if unsure && !c.settle(pctx, conn) {
		return plainOpening
	}
	if conn == nil {
		if !c.b.pin() {
			c.log.Debug("simba/jdbc: the hand-over's connections are all in use; polling only")
			return plainOpening
		}
		var err error
		if conn, err = c.b.db.Conn(pctx); err != nil {
			c.b.unpin()
			c.log.Debug("simba/jdbc: no connection for the hand-over; polling only", "err", err)
			return plainOpening
		}
		h.mu.Lock()
		if h.gone {
			h.mu.Unlock()
			_ = conn.Close()
			c.b.unpin()
			return plainOpening
		}
		h.conn, h.session = conn, 0
		h.mu.Unlock()
	}
	if c.locking != "" && (c.b.sql.readTrying.plain == "" || !c.b.floors.contended(c.mutex)) {
		return lockingOpening
	}
	return tryingOpening
}

// readTrying runs the read that tries the named lock too (statements.readTrying) on the
// pinned connection, and returns the row (marked missing when there is none: nothing was
// tried then), or nil when the connection is gone. A read that failed on the server may
// have taken the lock all the same: it is let go before the next try (handOver.unsure).
func (c *contention) readTrying(ctx context.Context) (*row, error) {
	conn := c.idleConn(ctx)
	if conn == nil {
		return nil, nil
	}
	var r row
	before := c.b.floors.get(c.mutex)
	r.sent = time.Now()
	var took sql.NullInt64
	var holder, session int64
	query, args := c.b.dialect.bound(c.schema, limit(ctx), c.b.sql.readTrying.in(c.schema), c.lock, c.lock, c.lock, c.mutex)
	err := queryRow(ctx, conn, query, args, &r.owner, &r.acquiredAt, &r.ttlAt, &r.transitionAt, &r.version, &r.now,
		&r.value, &r.token, &took, &holder, &session)
	r.got = time.Now()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &row{missing: true}, nil
	case err != nil:
		if !valid(conn) {
			c.drop(conn) // its session, and the lock if taken, went with it
		} else {
			h := &c.hand
			h.mu.Lock()
			if h.conn == conn {
				h.unsure = true
			}
			h.mu.Unlock()
		}
		return nil, err
	}
	r.lock = lockTry{told: true, got: holder == session, session: session}
	if other := holder != 0 && holder != session; other {
		r.lock.other, r.lock.holder = true, holder
	}
	c.tried(conn, r.lock)
	c.clock(r.sent, r.got, r.now)
	c.observe(before, r.version)
	return &r, nil
}

// lockable reports whether the contention's next acquire statement takes the named lock
// itself (lockingAcquirer): it has a pinned connection, idle, whose session does not hold
// the lock and is not in doubt about it, and it does not know another session to hold it
// (the statement could then begin no tenure: a row free after a deferral, or stale, is
// taken with the plain acquire).
func (c *contention) lockable() bool {
	if c.locking == "" {
		return false
	}
	h := &c.hand
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil && !h.holds && !h.waiting && !h.unsure && !h.other && !h.gone
}

// tried records what a statement on conn found of the named lock. A lock taken at once
// ends the contended spell that a wait or a lock taken by another began.
func (c *contention) tried(conn *sql.Conn, try lockTry) {
	h := &c.hand
	h.mu.Lock()
	if h.conn == conn {
		if try.session != 0 {
			h.session = try.session
		}
		if try.told {
			h.holds, h.other = try.got, try.other
		}
	}
	h.mu.Unlock()
	if try.told {
		c.b.floors.setContended(c.mutex, try.other)
		c.log.Debug("simba/jdbc: named lock tried", "taken", try.got)
	}
}

// acquireTryingLock runs the acquire statement that takes the named lock too
// (lockingAcquirer) on the pinned connection, where the lock belongs; it also returns the
// row when the statement read it. A statement that failed on the server may have taken
// the lock all the same (advisory locks outlive a failed transaction; GET_LOCK is not
// undone by a failed UPDATE): it is let go before the next try (handOver.unsure). When
// the connection is gone, the plain acquire runs on the pool instead.
func (c *contention) acquireTryingLock(ctx context.Context, a acquireArgs) (acquireResult, *row, error) {
	conn := c.idleConn(ctx)
	if conn == nil {
		res, err := c.acquirePlain(ctx, a)
		return res, nil, err
	}
	query, reads := c.locking, true
	if c.taking != "" && !c.b.floors.contended(c.mutex) {
		query, reads = c.taking, false // most likely matches: no read of the row
	}
	res, try, r, err := c.b.dialect.(lockingAcquirer).acquireLocking(ctx, c.b.prepared(conn), c.schema, limit(ctx), query, c.lock, reads, a)
	if err == nil {
		c.tried(conn, try)
		return res, r, nil
	}
	if !valid(conn) {
		c.drop(conn) // its session, and the lock if taken, went with it
		if errors.Is(err, driver.ErrBadConn) {
			res, err := c.acquirePlain(ctx, a) // nothing was sent
			return res, nil, err
		}
		return acquireResult{}, nil, err
	}
	h := &c.hand
	h.mu.Lock()
	if h.conn == conn {
		h.unsure = true
	}
	h.mu.Unlock()
	return acquireResult{}, nil, err
}

// acquiring marks an Acquire call under way (on) or over (off). A lock taken meanwhile
// does not wake the service, which is contending already; if the call then ends without
// this contender owning the row, the service is woken to contend again as the lock's
// holder.
func (c *contention) acquiring(on bool) {
	h := &c.hand
	h.mu.Lock()
	h.inAcquire = on
	wake := !on && h.unwoken && !h.gone
	h.unwoken = false
	h.mu.Unlock()
	if wake {
		c.wake()
	}
}

// lockedOut reports whether another session holds the named lock, as far as the
// contention knows: its last try failed, or it is waiting for the lock.
func (c *contention) lockedOut() bool {
	h := &c.hand
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.holds && (h.waiting || h.other)
}

// deferTo, in an acquisition that found the row free (r) while another session holds the
// named lock, leaves the row to that session for a while, and to each new holder in turn,
// up to deferralTurns (the package doc's first rule of the queue, in Hand-over, end to
// end). It queues first, so as not to lose its place, and stops deferring if the lock
// comes its way. Each while that passes without, it reads the row and the lock's holder
// again: a row another owner took ends the acquisition (done, with its record), a holder
// that kept the lock without taking the row is left behind. It defers no further once
// ctx has less than two whiles left, so that the UPDATE still has time.
func (c *contention) deferTo(ctx context.Context, r row) (_ backend.Record, done bool, _ error) {
	granted := c.queue()
	d := max(deferral, deferralTrips*r.got.Sub(r.sent))
	holder := r.lock.holder // 0: none, or not told
	for range deferralTurns {
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 2*d {
			return backend.Record{}, false, nil
		}
		c.log.Debug("simba/jdbc: row free while another session holds the named lock; deferring to it", "for", d, "session", holder)
		if err := pause(ctx, d, granted); err != nil {
			return backend.Record{}, true, err
		}
		if closed(granted) {
			return backend.Record{}, false, nil
		}
		r, free, rec, done, err := c.readFree(ctx)
		switch {
		case !free || err != nil:
			return rec, done, err
		case !r.lock.other || r.lock.holder == holder:
			return backend.Record{}, false, nil // the holder did not take it
		}
		holder = r.lock.holder
	}
	return backend.Record{}, false, nil
}

// readFree reads the row again for an acquisition that leaves a free row to another
// contender (deferTo, yieldToEarlier): free tells that it still is. Otherwise the
// acquisition ends (done) with rec, another's row, or goes on: a row of its own, to
// renew, or one stale, to take.
func (c *contention) readFree(ctx context.Context) (r row, free bool, rec backend.Record, done bool, err error) {
	if r, err = c.read(ctx); err != nil {
		return r, false, backend.Record{}, true, fmt.Errorf("read the row: %w", noRow(err))
	}
	switch rec := r.record(); {
	case rec.Owner == c.id:
		return r, false, backend.Record{}, false, nil
	case rec.Owner != "":
		rec, _ := c.seen(r)
		return r, false, rec, !c.stale(), nil
	}
	return r, true, backend.Record{}, false, nil
}

// follow, after an answered acquisition, keeps the contention's place in the queue for
// the named lock: a holder that finds another owner in the row heads the queue and passes
// its place on (the package doc's second rule of the queue). That owner holds no lock (the
// lock is exclusive), so its release would wake nobody. An owner that never queues (JVM)
// would make the lock go round for ever, hence once per owner, and again after ttl +
// transition (about a contend period) if it is still there.
func (c *contention) follow(ctx context.Context, rec backend.Record) {
	if c.lock == "" {
		return
	}
	h := &c.hand
	h.mu.Lock()
	if rec.Owner == c.id {
		h.unwoken = false // it owns: nothing to contend for
	}
	pass := h.holds && rec.Owner != "" && rec.Owner != c.id &&
		(rec.Owner != h.passedFor || time.Since(h.passed) >= c.lease)
	if pass {
		h.passed, h.passedFor = time.Now(), rec.Owner
		h.unwoken = false // it passes the lock on: nothing to contend for
	}
	h.mu.Unlock()
	if pass {
		c.log.Debug("simba/jdbc: heading the queue behind an owner without the named lock; passing it on")
		c.letGo(ctx)
	}
	_ = c.queue()
}

// queue starts waiting for the named lock unless the contention holds it already (as
// owner, or at the head of the queue) or waits for it. It returns a channel closed when
// the lock is taken, or nil when there is no wait.
func (c *contention) queue() <-chan struct{} {
	if c.lock == "" {
		return nil
	}
	h := &c.hand
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.waiting {
		return h.granted
	}
	if h.gone || h.holds || h.conn == nil || h.session == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.waiting, h.cancel = true, cancel
	h.stop, h.done, h.granted = make(chan struct{}), make(chan struct{}), make(chan struct{})
	conn, stop, done, granted := h.conn, h.stop, h.done, h.granted
	h.wg.Go(func() {
		defer close(done)
		defer cancel()
		c.await(ctx, conn, stop, granted)
	})
	return granted
}

// await waits for the named lock on conn. Once it holds the lock it wakes the service to
// contend at once, and keeps the lock: a contender that then loses the row to someone
// holding no lock (a JVM contender, say) heads the queue and polls on the contend period,
// while the others keep waiting behind it, so nobody spins.
func (c *contention) await(ctx context.Context, conn *sql.Conn, stop <-chan struct{}, granted chan<- struct{}) {
	h := &c.hand
	for {
		var got sql.NullInt64
		// database/sql's rows, not queryRow: with queryRow here, a loaded test run saw
		// every hand-over of a contended test fall back to polling (not traced).
		err := conn.QueryRowContext(ctx, c.b.sql.waitLock, c.lock, waitSeconds).Scan(&got)
		if err != nil && c.b.dialect.timedOut(err) {
			// PostgreSQL: lock_timeout, an error, which may have struck as the lock was
			// granted; let it go if so, and wait again.
			if _, err = conn.ExecContext(ctx, c.b.sql.settle, c.lock); err == nil {
				got = sql.NullInt64{Valid: true}
			}
		}
		stopping := closed(stop)
		h.mu.Lock()
		switch {
		case err == nil && got.Valid && got.Int64 == 1:
			h.holds, h.waiting, h.other = true, false, false
			close(granted)
			c.b.floors.setContended(c.mutex, true)
			wake := !stopping && !h.inAcquire
			h.unwoken = h.inAcquire
			h.mu.Unlock()
			if wake {
				c.log.Debug("simba/jdbc: named lock taken; contending now")
				c.wake()
			}
			return
		case err != nil:
			h.waiting = false
			h.unsure = true // see pgSettle; drop forgets it with the session
			h.mu.Unlock()
			if !valid(conn) {
				c.drop(conn) // polling until the next acquisition pins another
			}
			if !stopping {
				c.log.Debug("simba/jdbc: waiting for the named lock failed; polling only", "err", err)
			}
			return
		case stopping || !got.Valid: // interrupted
			h.waiting = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock() // timed out on the server: wait again
	}
}

// stopWaiting stops the waiter, if any, and waits for it. It interrupts the server-side
// wait from another connection, so that the pinned connection survives; if that fails or
// ctx ends first, it closes the connection under the wait instead. It returns false if the
// pinned connection must not go back to the pool.
func (c *contention) stopWaiting(ctx context.Context) bool {
	h := &c.hand
	h.mu.Lock()
	if !h.waiting {
		h.mu.Unlock()
		h.wg.Wait()
		return true
	}
	close(h.stop)
	session, done, cancel := h.session, h.done, h.cancel
	h.mu.Unlock()
	if c.b.interrupt(ctx, session, done) {
		h.wg.Wait()
		return true
	}
	cancel()
	h.wg.Wait()
	return false
}

// interrupt interrupts a waiter's statement on the server until the waiter has returned
// (done closed: true), or gives up (false) when ctx ends, after interruptFor, or when an
// interruption failed: one that perhaps was not executed must not meet the connection in
// the pool.
func (b *Backend) interrupt(ctx context.Context, session int64, done <-chan struct{}) bool {
	ctx, cancel := context.WithTimeout(ctx, interruptFor)
	defer cancel()
	stmt := fmt.Sprintf(b.sql.interruptText, session)
	// An interruption that arrives before the wait has begun on the server is lost; try
	// again, a little later each time.
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		if _, err := b.db.ExecContext(ctx, stmt); err != nil {
			return false
		}
		t := time.NewTimer(delay)
		select {
		case <-done:
			t.Stop()
			return true
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// letGo stops waiting and lets the named lock go, waking the next waiter; the pinned
// connection stays with the contention.
func (c *contention) letGo(ctx context.Context) {
	if c.lock == "" {
		return
	}
	clean := c.stopWaiting(ctx)
	h := &c.hand
	h.mu.Lock()
	conn, holds, unsure := h.conn, h.holds, h.unsure
	h.holds = false
	h.mu.Unlock()
	switch {
	case conn == nil:
	case !clean:
		c.drop(conn)
	case holds:
		var unlocked sql.NullBool
		var session int64
		if err := conn.QueryRowContext(ctx, c.b.sql.unlock, c.lock).Scan(&unlocked, &session); err != nil {
			c.drop(conn) // closing the session lets the lock go
			break
		}
		c.tried(conn, lockTry{session: session})
	case unsure:
		c.settle(ctx, conn)
	}
}

// holdsLock reports whether the contention holds the named lock on its pinned connection,
// which no waiter uses.
func (c *contention) holdsLock() bool {
	held, _ := c.heldLock()
	return held
}

// heldLock is holdsLock, with the pinned session's ID (0 when not known).
func (c *contention) heldLock() (held bool, session int64) {
	h := &c.hand
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.holds && !h.waiting && h.conn != nil {
		return true, h.session
	}
	return false, 0
}

// unlocked records that a statement on the pinned connection let the named lock go.
func (c *contention) unlocked() {
	h := &c.hand
	h.mu.Lock()
	h.holds = false
	h.mu.Unlock()
}

// settle lets the named lock go on conn if its session holds it after a wait that ended in
// an error (handOver.unsure), so that the session holds it no more and a later try cannot
// take it a second time; on failure it drops conn, whose session then lets it go. It
// reports whether conn is still pinned.
func (c *contention) settle(ctx context.Context, conn *sql.Conn) bool {
	if _, err := conn.ExecContext(ctx, c.b.sql.settle, c.lock); err != nil {
		c.drop(conn)
		return false
	}
	h := &c.hand
	h.mu.Lock()
	if h.conn == conn {
		h.unsure = false
	}
	h.mu.Unlock()
	return true
}

// free lets everything go for good and returns the pinned connection to the pool.
func (c *contention) free(ctx context.Context) {
	c.letGo(ctx)
	h := &c.hand
	h.mu.Lock()
	conn := h.conn
	h.conn, h.gone = nil, true
	h.mu.Unlock()
	if conn != nil {
		_ = conn.Close()
		c.b.unpin()
	}
}

// unpin returns the pinned connection to the pool, and its place in the hand-over's
// budget, unless the contention holds or waits for the named lock: after a release, a
// contention needs no connection until it contends again.
func (c *contention) unpin() {
	h := &c.hand
	h.mu.Lock()
	conn := h.conn
	if conn == nil || h.holds || h.waiting || h.unsure {
		h.mu.Unlock()
		return
	}
	h.conn, h.session, h.other = nil, 0, false
	h.mu.Unlock()
	_ = conn.Close()
	c.b.unpin()
}

// abandon frees everything without I/O, for the backend's Close: the waiter's statement
// is ended by closing its connection, and the pinned connection is closed rather than
// returned, which lets the named lock go on the server.
func (c *contention) abandon() {
	h := &c.hand
	h.mu.Lock()
	h.gone, h.holds = true, false
	conn, cancel, waiting := h.conn, h.cancel, h.waiting
	h.conn = nil
	h.mu.Unlock()
	if waiting {
		cancel()
	}
	h.wg.Wait()
	if conn != nil {
		discard(conn)
		c.b.unpin()
	}
}

// idleConn returns the pinned connection if no waiter uses it and it is alive.
func (c *contention) idleConn(ctx context.Context) *sql.Conn {
	h := &c.hand
	h.mu.Lock()
	conn := h.conn
	if h.waiting || h.gone {
		conn = nil
	}
	h.mu.Unlock()
	if conn != nil && !alive(ctx, conn) {
		c.drop(conn)
		return nil
	}
	return conn
}

// drop forgets a broken pinned connection and closes it; its session's lock goes with it.
func (c *contention) drop(conn *sql.Conn) {
	h := &c.hand
	h.mu.Lock()
	mine := h.conn == conn
	if mine {
		h.conn, h.session, h.holds, h.other, h.unsure = nil, 0, false, false, false
	}
	h.mu.Unlock()
	discard(conn)
	if mine {
		c.b.unpin()
	}
}

// discard closes a connection instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}

// alive checks a pinned connection the way the pool checks one it hands out, without a
// round trip, so that a connection the server closed is replaced before a statement fails
// on it. go-sql-driver's ResetSession only looks for a closed socket; it does not reset
// the session (which would let named locks go).
func alive(ctx context.Context, conn *sql.Conn) bool {
	err := conn.Raw(func(dc any) error {
		if r, ok := dc.(driver.SessionResetter); ok {
			return r.ResetSession(ctx)
		}
		return nil
	})
	return err == nil
}

// valid reports whether the driver still considers the connection usable (a failed or
// cancelled statement may have closed it).
func valid(conn *sql.Conn) bool {
	err := conn.Raw(func(dc any) error {
		if v, ok := dc.(driver.Validator); ok && !v.IsValid() {
			return driver.ErrBadConn
		}
		return nil
	})
	return err == nil
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
