package jdbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/simba-go/simba/backend"
)

// clockStep is the resolution of the database's clock: it is read to the millisecond, so
// its "now" may lag the instant it stands for by up to one. Durations reported to the
// service are shortened by it, so that local instants never come out later than the
// store's.
const clockStep = time.Millisecond

// maxVersion is the largest version of an int unsigned column; the acquire statement
// does not go past it.
const maxVersion = 1<<32 - 1

// maxSpan bounds the durations made from a row's timestamps, so that rows written by
// someone else with absurd values cannot overflow time arithmetic.
const maxSpan = 100 * 365 * 24 * time.Hour

// contention is one participant's contention for one mutex. Its methods are called one at
// a time (simba's guarantee); the fields below the mutex name are used by those calls
// only. The hand-over state has its own lock (handover.go).
type contention struct {
	b         *Backend
	schema    schema
	mutex, id string
	ttl       time.Duration
	lease     time.Duration // ttl + transition
	wake      func()
	closed    func() // Participant.Closed: called by the backend's Close
	log       *slog.Logger
	lock      string // the named lock of the mutex's row; "" without hand-over
	acquire   string // the acquire statement, for this contention's ttl and transition
	locking   string // the acquire statement that tries the named lock too; "" where none (lockingAcquirer)
	taking    string // locking without its read of the row, where the dialect has one; else ""
	holding   string // the acquire statement while the pinned session holds the lock; "" where none (holdingAcquirer)
	renew     string // the statement that renews many tenures, this contention's among them (renewals.go)

	// What the last answers said. version is the row's version as of the last answer;
	// token is the tenure's fencing token when that answer named this contender, else 0;
	// doubt is set once an UPDATE's outcome became unknown (it failed, perhaps after the
	// server executed it, or it may still be executed later).
	version uint64
	token   uint64
	doubt   bool
	stray   time.Time // until when an abandoned UPDATE may still take the row (stray.go)

	value   string // the owner value of the contender's tenures; "": none (values.go)
	valued  uint64 // the token of the tenure whose value the value table holds; 0: none
	ahead   uint64 // the token whose value the current Acquire wrote ahead (valueAhead); 0: none
	cleared bool   // the value row naming the contender is cleared (clearValue)

	waits      waitStatements // the wait table's (waits.go); empty without it, or for a Locker
	registered time.Time      // when the contention last wrote its row in the wait table; zero: it has none
	behind     bool           // it handed the mutex off and queued behind those waiting (yieldToEarlier)

	// The database's clock as the last answer that told it read it; stepped is set when
	// an answer of the current call showed the clock stepping forward.
	db      dbClock
	stepped bool
	watch   watch // the row of another owner as first seen at its version

	hand handOver

	started time.Time // when StartContend made the contention
	looked  bool      // a retriever's first Lookup is over (see lookups)
}

var _ backend.LeaseContention = (*contention)(nil)

// discardLogger is the logger of a participant that gave none: one for all, rather than
// one per contention.
var discardLogger = slog.New(slog.DiscardHandler)

func newContention(b *Backend, s schema, p backend.Participant) *contention {
	c := &contention{
		b:      b,
		schema: s,
		mutex:  p.Mutex,
		id:     p.ContenderID,
		ttl:    p.TTL,
		lease:  p.TTL + p.Transition,
		wake:   p.Wake,
		closed: p.Closed,
		log:    p.Logger,
		value:  p.Value,

		started: time.Now(),
	}
	if c.log == nil {
		c.log = discardLogger
	}
	if b.pins != nil && c.id != "" {
		c.lock = b.dialect.lockName(s, b.table, c.mutex)
	}
	if c.id != "" {
		r := b.rendered(s, c.ttl, c.lease)
		c.acquire, c.renew = r.acquire, r.renew
		if c.lock != "" {
			c.locking, c.taking, c.holding = r.locking, r.taking, r.holding
		}
		if s.waits && !p.WaitsOnly {
			c.waits = r.waits
		}
	}
	b.floors.join(c.mutex)
	return c
}

// renderedSQL is a contender's statements that depend on its ttl and transition and on the
// session (schema), rendered alike for every contention that shares them.
type renderedSQL struct {
	acquire string
	locking string // "" where the dialect or the session has none (lockingAcquirer)
	taking  string // locking without its read of the row; "" where the dialect has none
	holding string // acquire while the pinned session holds the lock; "" where none (holdingAcquirer)
	renew   string // Dialect.renewStatement
	waits   waitStatements
}

// renderKey is what a renderedSQL depends on.
type renderKey struct {
	s          schema
	ttl, lease time.Duration
}

// maxRendered bounds the renderings a backend keeps: a Locker's every acquisition starts
// a contention (rendering its statements took 15-45 µs and 10-14 KB), and an application
// uses a few ttls; one that makes up a ttl per call gets its statements rendered anew.
const maxRendered = 64

// rendered returns the statements of a contender with ttl and lease (ttl + transition) on
// a session like s's, rendered once per backend.
func (b *Backend) rendered(s schema, ttl, lease time.Duration) renderedSQL {
	k := renderKey{s: s, ttl: ttl, lease: lease}
	b.renderMu.Lock()
	r, ok := b.renderings[k]
	b.renderMu.Unlock()
	if ok {
		return r
	}
	r.acquire = b.dialect.acquireStatement(b.table, s, ttl, lease)
	r.renew = b.dialect.renewStatement(b.table, s, ttl, lease)
	if l, ok := b.dialect.(lockingAcquirer); ok {
		r.locking = l.lockingAcquireStatement(b.table, s, ttl, lease, true)
		if r.locking != "" {
			r.taking = l.lockingAcquireStatement(b.table, s, ttl, lease, false)
		}
	}
	if h, ok := b.dialect.(holdingAcquirer); ok {
		r.holding = h.holdingAcquireStatement(b.table, s, ttl, lease)
	}
	if s.waits {
		r.waits = waitSQL(b.dialect, b.table, s)
	}
	b.renderMu.Lock()
	if b.renderings == nil {
		b.renderings = make(map[renderKey]renderedSQL)
	}
	if len(b.renderings) < maxRendered {
		b.renderings[k] = r
	}
	b.renderMu.Unlock()
	return r
}

// Acquire runs JVM Simba's conditional UPDATE; see backend.LeaseContention. When it matches,
// the UPDATE itself tells the new version and whether it renewed this contender's tenure,
// so no read follows; otherwise the row is read to tell who owns it.
func (c *contention) Acquire(ctx context.Context) (backend.Record, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	if c.behind {
		rec, done, err := c.yieldToEarlier(ctx)
		switch {
		case err != nil:
			return backend.Record{}, c.b.refused(fmt.Errorf("simba/jdbc: acquire: %w", err))
		case done:
			c.follow(ctx, rec)
			c.waiting(ctx, rec)
			return rec, nil
		}
	}
	open := c.prepareLock(ctx)
	c.acquiring(true)
	c.stepped = false
	var rec backend.Record
	err := c.valueBefore(ctx)
	if err == nil {
		rec, err = c.acquireRow(ctx, open)
	}
	if err == nil && rec.Owner == c.id {
		c.behind = false
	}
	if err == nil && c.value == "" && c.schema.values && rec.Owner == c.id {
		c.clearValue(ctx)
	}
	if err == nil && c.stepped && rec.Owner == c.id {
		rec, err = c.stepAside(ctx)
	}
	var valueErr error
	if err == nil && c.value != "" && rec.Owner == c.id {
		valueErr = c.valueAfter(ctx, &rec)
	}
	if err == nil {
		// The lock's queue before the wait table's: a giver hands off to whom the table
		// lists and wakes it through the lock, which a waiter listed but not yet queued
		// would miss (it would learn of its tenure only when it next polls).
		c.follow(ctx, rec)
		c.waiting(ctx, rec)
		err = valueErr
	}
	c.acquiring(false)
	if err != nil {
		return backend.Record{}, c.b.refused(fmt.Errorf("simba/jdbc: acquire: %w", err))
	}
	return rec, nil
}

// valueBefore does, before an acquisition's statement, what the tenure's value needs.
func (c *contention) valueBefore(ctx context.Context) (err error) {
	c.ahead = 0
	switch {
	case c.token == 0 && c.value != "":
		// An acquisition that may begin a tenure: its value first (valueAhead).
		c.ahead, err = c.valueAhead(ctx)
	case c.token == 0:
	case c.value != "":
		// A tenure whose value is not written yet (the write failed) is not renewed before
		// it is: a renewal would make the value row of an earlier tenure of this ID look
		// like this one's.
		_, err = c.keepValue(ctx)
	case c.schema.values:
		// The same, for a contender without a value, whose clearing at the tenure's
		// beginning failed (clearValue; nothing when it succeeded).
		c.clearValue(ctx)
	}
	return err
}

// valueAfter keeps the value of the tenure rec names, this contender's, and shows it in rec
// once kept: unless written ahead, before the tenure is renewed (see valueBefore); readers
// meanwhile find none.
func (c *contention) valueAfter(ctx context.Context, rec *backend.Record) error {
	if c.ahead != 0 && c.ahead == c.token {
		c.valued = c.token // written ahead, for the tenure the acquisition began
	}
	kept, err := c.keepValue(ctx)
	if kept {
		rec.Value = c.value
	}
	return err
}

// stepAside gives up the mutex this contender owns because the database's clock stepped
// forward since the last answer: the lease on the store has been shorter than the owner
// believes, by the step, and someone else may take the row before the owner's local TTL
// end. The row is released (the contention's tenure ends, even if the release fails) and
// the answer names no owner, so that the owner stops believing at once; its next
// acquisition begins a new tenure.
func (c *contention) stepAside(ctx context.Context) (backend.Record, error) {
	err := c.releaseRow(ctx)
	c.token = 0
	c.letGo(ctx)
	if err != nil {
		return backend.Record{}, fmt.Errorf("give the mutex up after the database's clock stepped: %w", err)
	}
	return backend.Record{}, nil
}

// acquireRow runs the acquisition's statements, beginning as prepareLock said.
func (c *contention) acquireRow(ctx context.Context, open opening) (backend.Record, error) {
	args := acquireArgs{mutex: c.mutex, contender: c.id}
	var known *row    // the row as the last statement found it; nil: read it
	fromRead := false // known came from a read before any acquire statement
	switch open {
	case tryingOpening:
		r, err := c.readTrying(ctx)
		if err != nil {
			return backend.Record{}, fmt.Errorf("read the row: %w", err)
		}
		known, fromRead = r, r != nil
	case lockingOpening:
		res, r, err := c.update(ctx, args, true)
		switch {
		case err != nil:
			return backend.Record{}, err
		case res.matched:
			return c.won(res), nil
		case r == nil:
			// MySQL: the statement did not say what became of the lock; a read on the
			// pinned connection does. PostgreSQL's, without a read (taking), told only
			// that.
			if r, err = c.readKnown(ctx); err != nil {
				return backend.Record{}, err
			}
		}
		known = r
	}
	if fromRead || c.lockedOut() {
		rec, done, err := c.readFirst(ctx, known)
		if done || err != nil {
			return rec, err
		}
		known = nil // the row is this contender's (renew it), free, or stale
	}
	for again := true; ; again = false {
		if known == nil {
			res, r, err := c.update(ctx, args, c.lockable())
			if err != nil {
				return backend.Record{}, err
			}
			if res.matched {
				return c.won(res), nil
			}
			known = r
		}
		rec, retry, err := c.afterUnmatched(ctx, again, known)
		known = nil
		if !retry {
			return rec, err
		}
	}
}

// readFirst, when another session holds the named lock (the owner, a contender just woken
// to take over, or the head of the queue), or after a read that tried the lock, reads the
// row, unless known tells it already. A row owned by someone else needs no UPDATE (done,
// with its record), and a free one is left to the lock's holder, if another session holds
// it, for a moment before this contender tries it.
func (c *contention) readFirst(ctx context.Context, known *row) (_ backend.Record, done bool, _ error) {
	r, err := c.readOr(ctx, known)
	if errors.Is(err, errNoRow) { // the mutex's first use
		if err := c.ensureRow(ctx); err != nil {
			return backend.Record{}, true, err
		}
		r, err = c.read(ctx)
	}
	if err != nil {
		return backend.Record{}, true, fmt.Errorf("read the row: %w", noRow(err))
	}
	switch rec := r.record(); {
	case rec.Owner == "" && c.lockedOut():
		// Then contend like anyone: the UPDATE takes the row if the holder did not.
		return c.deferTo(ctx, r)
	case rec.Owner != "" && rec.Owner != c.id:
		if rec, _ := c.seen(r); !c.stale() {
			return rec, true, nil
		}
		// Another's, unchanged for longer than its lease: the UPDATE takes it.
	}
	return backend.Record{}, false, nil
}

// afterUnmatched reads the row after an acquire statement that matched nothing, unless
// known tells it already, and returns what it holds, or asks for another try (retry) on a
// row just created or freed (once: again is set only on the first pass).
func (c *contention) afterUnmatched(ctx context.Context, again bool, known *row) (_ backend.Record, retry bool, _ error) {
	r, err := c.readOr(ctx, known)
	switch {
	case errors.Is(err, errNoRow) && again:
		if err := c.ensureRow(ctx); err != nil {
			return backend.Record{}, false, err
		}
		c.token = 0                        // a tenure the contention knew went with the row
		return backend.Record{}, true, nil // the first use of the mutex: try again on the new row
	case err != nil:
		return backend.Record{}, false, noRow(err)
	case r.version >= maxVersion:
		return backend.Record{}, false, fmt.Errorf("the row's version is %d, the largest the column holds: no larger fencing token can be handed out", r.version)
	case again && r.record().Owner == "":
		// Free now: created or released since the UPDATE, or released behind the back of
		// a renewal, which takes no free row (mysqlTakesFree). A tenure the contention knew
		// is over; its next statement may take the row.
		c.seen(r)
		return backend.Record{}, true, nil
	}
	if rec, known := c.seen(r); known {
		return rec, false, nil
	}
	// The row is this contender's, in a tenure the contention has no token for (an
	// earlier lifecycle's): renew it at the version read, which begins this contention's
	// tenure with a token larger than that lifecycle's. A renewal keeps the value row of
	// the tenure it renews, so a contention with a value first voids that lifecycle's
	// value (readers find none until this tenure's is written), and one without clears it.
	switch {
	case c.value != "":
		if _, err := c.writeValue(ctx, 0, "", r.version); err != nil {
			return backend.Record{}, false, err
		}
	case c.schema.values:
		c.clearValue(ctx)
	}
	res, _, err := c.update(ctx, acquireArgs{mutex: c.mutex, contender: c.id,
		expect: sql.NullInt64{Int64: int64(r.version), Valid: true}}, false)
	switch {
	case err != nil:
		return backend.Record{}, false, err
	case !res.matched:
		return backend.Record{}, false, errors.New("the row changed while this contender took over its own earlier tenure")
	}
	return c.won(res), false, nil
}

// update runs the acquire statement; with locking, the one that takes the named lock too,
// on the pinned connection (acquireTryingLock), which may also answer the row when it
// matched nothing. A renewal is allowed at the version the contention last saw when it
// knows the tenure the row holds (see mysqlAcquire), unless a.expect is set already; a row
// another owner has left unchanged for longer than its lease is taken.
func (c *contention) update(ctx context.Context, a acquireArgs, locking bool) (acquireResult, *row, error) {
	if !a.expect.Valid && c.token != 0 {
		a.expect = sql.NullInt64{Int64: int64(c.version), Valid: true}
	}
	if c.stale() {
		a.stale = sql.NullInt64{Int64: int64(c.watch.version), Valid: true}
	}
	a.floor = c.b.floors.get(c.mutex)
	var res acquireResult
	var r *row
	sent := time.Now()
	var err error
	if locking {
		res, r, err = c.acquireTryingLock(ctx, a)
	} else {
		res, err = c.acquirePlain(ctx, a)
	}
	got := time.Now()
	if err != nil {
		c.doubt = true
		if !serverAnswered(err) { // else the statement has ended, changing nothing
			c.abandoned(ctx)
		}
	}
	if res.matched {
		c.clock(sent, got, res.now)
		c.observe(a.floor, res.found) // below the floor even if the statement took the row above it
		c.observe(a.floor, res.version)
		c.watch = watch{}
	}
	if r != nil && !r.missing {
		r.sent, r.got = sent, got
		c.clock(sent, got, r.now)
		c.observe(a.floor, r.version)
	}
	return res, r, err
}

// acquirePlain runs the acquire statement (see run), or renews in the backend's next batch
// where it may (renewInBatch).
func (c *contention) acquirePlain(ctx context.Context, a acquireArgs) (res acquireResult, err error) {
	if res, batched, err := c.renewInBatch(ctx, a); batched {
		return res, err
	}
	if held, session := c.heldLock(); held && session != 0 && c.holding != "" {
		// On the pool, as run would; a tenure only while the session holds the lock.
		return c.b.dialect.(holdingAcquirer).acquireHolding(ctx, c.b.db, c.schema, limit(ctx), c.holding, c.lock, session, a)
	}
	err = c.run(ctx, false, func(q querier) (err error) {
		res, err = c.b.dialect.acquire(ctx, q, c.schema, limit(ctx), c.acquire, a)
		return err
	})
	return res, err
}

// stepMargin is how far the database's clock may move between two answers beyond what
// the local monotonic clock allows before it counts as a step: the database reads its
// clock to the millisecond and the two clocks' rates differ (by far less than the 0.1%
// allowed on top).
const stepMargin = 50 * time.Millisecond

// clock checks the database's now that an answer gave (see dbClock.check), and keeps a
// forward step in stepped for Acquire.
func (c *contention) clock(sent, got time.Time, now uint64) {
	if c.db.check(c.b, c.log, sent, got, now) > 0 {
		c.stepped = true
	}
}

// dbClock is the database's clock as the last answer that told it read it (its low 31
// bits, in ms), and when that answer's statement was sent and its answer came.
type dbClock struct {
	now       uint64
	sent, got time.Time
}

// check checks the database's now that an answer gave (its low 31 bits, in ms), for a
// statement sent at sent and answered at got, against the last answer's, and returns the
// step it shows (0: none). The server read each clock between the statement's sending and
// its answer, so the database's clock can have moved by no less than from the last answer
// to this sending and no more than from the last sending to this answer, plus the margin;
// anything else is a step, reported to b (ClockSteps, and a log line at Error). Moves of
// more than 12 days either way are taken modulo 24.8 days.
func (k *dbClock) check(b *Backend, log *slog.Logger, sent, got time.Time, now uint64) (step time.Duration) {
	now &= nowBits
	if !k.got.IsZero() {
		d := int64((now - k.now) & nowBits)
		if d > nowBits/2 {
			d -= nowBits + 1
		}
		moved := time.Duration(d) * time.Millisecond
		least, most := sent.Sub(k.got), got.Sub(k.sent)
		margin := stepMargin + most/1000
		switch {
		case moved > most+margin:
			step = moved - most
		case moved < least-margin:
			step = moved - least
		}
		if step != 0 {
			b.steps.Add(1)
			log.Error("simba/jdbc: the database's clock stepped between two answers",
				"step_ms", step.Milliseconds(), "db_elapsed_ms", moved.Milliseconds(), "local_elapsed_ms", most.Milliseconds())
		}
	}
	k.now, k.sent, k.got = now, sent, got
	return step
}

// watch is a row of another owner as the contention first saw it at its version.
type watch struct {
	owner   string
	version uint64
	since   time.Time     // when the answer that first showed it came
	lease   time.Duration // its transition_at less its acquired_at
}

// stale reports whether the watched row has stayed unchanged for longer than its lease,
// plus 1% for the clocks' rates, by the local clock since it was first seen: its owner
// wrote it before then, so its local TTL end, and belief, have passed, whatever the
// database's clock says (it may have stepped back since the row was written).
func (c *contention) stale() bool {
	w := c.watch
	return w.owner != "" && time.Since(w.since) > w.lease+w.lease/100+10*time.Millisecond
}

// watchRow follows a row of another owner and returns its record, whose transition window
// ends, at the latest, when the row becomes stale: the service then contends again.
func (c *contention) watchRow(r row, rec backend.Record) backend.Record {
	if c.watch.owner != r.owner || c.watch.version != r.version {
		c.watch = watch{owner: r.owner, version: r.version, since: r.got, lease: span(r.transitionAt, r.acquiredAt)}
	}
	w := c.watch
	if w.lease <= 0 {
		return rec
	}
	left := time.Until(w.since.Add(w.lease + w.lease/100 + 10*time.Millisecond))
	rec.Transition = min(rec.Transition, max(left, 0))
	rec.TTL = min(rec.TTL, rec.Transition)
	return rec
}

// observe records a version of the row, answered by a statement sent when the highest
// version the backend had seen was before, and reports a version lower than that: the
// row was deleted and created again by someone who did not know its version, and tokens
// went back (only data loss may do that, and it must be detected).
func (c *contention) observe(before, v uint64) {
	if prev, back := c.b.floors.saw(c.mutex, before, v); back {
		c.b.regressions.Add(1)
		c.log.Error("simba/jdbc: fencing token went backwards: the mutex's row was deleted and created again from a lower version",
			"token", v, "previous_token", prev)
	}
}

// won records a matched acquire and returns the contender's record. The token is the
// version the tenure's first UPDATE produced. A renewal matches only at the version the
// contention last saw with its tenure in the row, so nothing came between: the tenure
// goes on and keeps its token. Anything else is a new tenure, whose token is the new
// version (for a renewal of an earlier lifecycle's tenure, larger than that lifecycle's).
func (c *contention) won(res acquireResult) backend.Record {
	token := res.version
	if res.renewed && c.token != 0 {
		token = c.token
	}
	// A renewal that waited for its batch's statement is that much younger than the call:
	// the store read its clock after that wait, which makes up for the clock's step and
	// the renewal mark (renewGap), so that the owner stays on simba's renewal grid.
	ttl := min(c.ttl-clockStep-c.shortened(res.renewed)+res.queued, c.ttl)
	c.version, c.token = res.version, token
	return backend.Record{
		Owner:      c.id,
		TTL:        ttl,
		Transition: c.lease - clockStep,
		Token:      token,
	}
}

// The renewal mark: the acquire statement writes ttl_at up to a millisecond short, so that
// transition_at - ttl_at is odd after a renewal and even after a new tenure's first write.
// The row then tells which of the two its last write was, to its contention after a lost
// answer (seen) and to any reader (renewalMark): with an even transition a renewal is the
// one shortened, with an odd one a new tenure.

// parity is the parity of the transition in whole milliseconds as the acquire statement
// writes it, for a ttl and a lease (ttl + transition).
func parity(ttl, lease time.Duration) int64 { return (lease.Milliseconds() - ttl.Milliseconds()) & 1 }

// shortened returns how much shorter than the ttl the contention's acquire statement writes
// ttl_at, for a renewal or a new tenure.
func (c *contention) shortened(renewal bool) time.Duration {
	p := parity(c.ttl, c.lease)
	if renewal {
		p ^= 1
	}
	return time.Duration(p) * time.Millisecond
}

// renewalMark reports whether a row simba wrote was last written by a renewal (else by a
// new tenure's first write, or by JVM Simba, whose rows carry no mark).
func renewalMark(r row) bool { return (r.transitionAt-r.ttlAt)&1 == 1 }

// seen records a row that was read when the acquire statement did not match, and returns
// it as a record. Rows naming other owners carry no token (backend.Record: "zero when the
// store cannot tell it to this caller"). known is false for a row of this contender whose
// tenure the contention cannot name: the caller takes it over with a renewal.
//
// A row that names this contender was written last by one of its own statements (no one
// else writes its ID), whose answer was lost if the version moved. Each statement of the
// contention that renews expects the version of the last answer, so once one of them has
// renewed, the others cannot; any later write of this contender is a new tenure, taken
// when the row was free. The row's last write therefore tells: a renewal (ttl_at marked)
// at the next version continues the tenure the contention knows; a new tenure is one of
// its statements that began a tenure, whose token is the version it wrote.
func (c *contention) seen(r row) (rec backend.Record, known bool) {
	rec = r.record()
	if rec.Owner == "" {
		c.watch = watch{}
	}
	if c.id == "" || rec.Owner != c.id {
		c.version, c.token = r.version, 0
		if rec.Owner != "" {
			rec = c.watchRow(r, rec)
		}
		return rec, true
	}
	c.watch = watch{}
	shortened := time.Duration(int64(r.transitionAt)-int64(r.ttlAt)-(c.lease.Milliseconds()-c.ttl.Milliseconds())) * time.Millisecond
	switch {
	case c.token != 0 && r.version == c.version:
		// Nothing changed: the row is at the last millisecond of its transition window.
	case c.token != 0 && r.version == c.version+1 && shortened == c.shortened(true):
		// The contention's own renewal, whose answer was lost.
	case c.token != 0 && shortened == c.shortened(false) && r.version > c.version:
		// A new tenure begun by a statement whose answer was lost: its version is above
		// the one the contention knew, as every acquisition's is. A version below it is
		// the row lowered behind the backend's back (data lost), not a tenure of its own.
		c.token = r.version
	default:
		c.version, c.token = r.version, 0
		return backend.Record{}, false
	}
	c.version = r.version
	rec.Token = c.token
	return rec, true
}

// Release gives the mutex up with JVM Simba's release, conditioned on the exact version (see
// releaseRow), and then lets the named lock go, which wakes the next waiting contender.
func (c *contention) Release(ctx context.Context) error {
	if err := c.b.usable(ctx); err != nil {
		return err
	}
	err := c.releaseRow(ctx)
	c.letGo(ctx)
	c.unpin()
	c.leaveQueue(ctx)
	if err != nil {
		return c.b.refused(fmt.Errorf("simba/jdbc: release: %w", err))
	}
	return nil
}

// releaseRow releases the row if this contender owns it. Without doubt, the last answer
// tells: a row it does not own needs no statement, one it owns is released at the version
// that answer gave. In doubt, it reads the row first and releases exactly the version
// read. Either way a release that reaches the server late (its caller gave up on it) finds
// a different version if anyone, this contender included, acquired since, and changes
// nothing. A contention holding the named lock lets it go in the same statement where the
// dialect and the session allow (statements.releaseUnlock); otherwise, or if that
// statement did not say it let the lock go, letGo does afterwards.
func (c *contention) releaseRow(ctx context.Context) error {
	if c.id == "" || !c.doubt && c.token == 0 {
		return nil
	}
	version := c.version
	if c.doubt {
		r, err := c.read(ctx)
		switch {
		case errors.Is(err, errNoRow):
			return nil
		case err != nil:
			return err
		case r.owner != c.id:
			c.version, c.token = r.version, 0
			return nil
		}
		version = r.version
	}
	u, unlocking := c.b.dialect.(releaseUnlocker)
	unlocking = unlocking && c.schema.locksInUpdates && c.holdsLock()
	var released, unlocked bool
	// The release runs on the pinned connection even without unlocking: the service gives
	// it a context of its own, which a Stop does not cut short (see run).
	err := c.run(ctx, true, func(q querier) (err error) {
		if unlocking {
			released, unlocked, err = u.releaseUnlock(ctx, c.b.prepared(q), c.schema, limit(ctx), c.b.sql.releaseUnlock, c.lock, c.mutex, c.id, version)
			return err
		}
		released, err = c.b.release(ctx, q, c.schema, c.mutex, c.id, version)
		return err
	})
	if err != nil {
		c.doubt = true
		return err
	}
	if released {
		c.version, c.token = version+1, 0
		c.observe(version, version+1)
	}
	if unlocked {
		c.unlocked()
	}
	return nil
}

// Lookup reads the row; see backend.LeaseContention. A mutex without a row has no owner. A
// contender's lookup tells its own tenure's token, which only its contention knows. A
// retriever's first lookup (simba.Lookup's only one) is remembered for ReleaseOwner.
func (c *contention) Lookup(ctx context.Context) (backend.Record, error) {
	if err := c.b.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	sending := time.Now() // the service's send time, to which it adds the record, is earlier
	r, err := c.read(ctx)
	switch {
	case errors.Is(err, errNoRow):
		return backend.Record{}, nil
	case err != nil:
		return backend.Record{}, c.b.refused(fmt.Errorf("simba/jdbc: look up: %w", err))
	}
	rec := r.record()
	if c.id != "" && rec.Owner == c.id && c.token != 0 && r.version == c.version {
		rec.Token = c.token // this contention's tenure, unchanged since its last answer
	}
	if c.id == "" && !c.looked && rec.Owner != "" {
		c.b.lookups.add(lookedUp{mutex: c.mutex, owner: rec.Owner, version: r.version, rec: rec, from: c.started, to: sending})
	}
	c.looked = true
	return rec, nil
}

// StopContend frees the contention's hand-over resources (its waiting goroutine, named
// lock and pinned connection); it does not touch the row, but leaves a sweep behind when
// an abandoned acquisition may still take it (stray.go). It never fails: with ctx ended,
// the pinned connection is closed instead of returned to the pool.
func (c *contention) StopContend(ctx context.Context) error {
	c.free(ctx)
	c.leaveQueue(ctx)
	c.b.forget(c)
	if !c.sweepLater() {
		c.b.floors.leave(c.mutex)
	}
	return nil
}

// errNoRow says that the mutex has no row yet. It never leaves the package: noRow turns
// it into an error for the user.
var errNoRow = errors.New("no row")

// noRow explains errNoRow where a row should exist.
func noRow(err error) error {
	if errors.Is(err, errNoRow) {
		return errors.New("the mutex's row is missing right after it was created")
	}
	return err
}

// row is a mutex's row as read, with the database's now and when the statement was sent
// and its answer came.
type row struct {
	owner                           string
	acquiredAt, ttlAt, transitionAt uint64
	version, now                    uint64
	value                           string // the owner value of the row's tenure; "": none, or not told
	token                           uint64 // the token of the row's tenure, told with its value; 0: not told
	sent, got                       time.Time
	missing                         bool    // there is no row (told by a statement that reads it in passing)
	lock                            lockTry // what the read found of the named lock (readLocking)
}

// record converts a row to a record: durations from the database's now, shortened by the
// clock's resolution; a row whose transition window has ended has no owner.
func (r row) record() backend.Record {
	if r.owner == "" || r.transitionAt < r.now {
		return backend.Record{}
	}
	return backend.Record{
		Owner:      r.owner,
		TTL:        span(r.ttlAt, r.now) - clockStep,
		Transition: span(r.transitionAt, r.now) - clockStep,
		Held:       max(span(r.now, r.acquiredAt), 0),
		Value:      r.value,
		Token:      r.token,
	}
}

// span returns a - b milliseconds as a duration, bounded to ±maxSpan.
func span(a, b uint64) time.Duration {
	const limit = uint64(maxSpan / time.Millisecond)
	if a >= b {
		return time.Duration(min(a-b, limit)) * time.Millisecond
	}
	return -time.Duration(min(b-a, limit)) * time.Millisecond
}

// read reads the row and the database's now; errNoRow if there is no row. With the
// hand-over, it also reads who holds the named lock (readLocking), and on the pinned
// connection learns whether its session does.
func (c *contention) read(ctx context.Context) (row, error) {
	var r row
	before := c.b.floors.get(c.mutex)
	sent := time.Now()
	err := c.run(ctx, false, func(q querier) (err error) {
		if c.lock == "" {
			r, err = c.b.read(ctx, q, c.schema, c.mutex)
			return err
		}
		r, err = c.b.readLocking(ctx, q, c.schema, c.mutex, c.lock)
		if conn, pinned := q.(*sql.Conn); pinned && err == nil {
			c.tried(conn, r.lock)
		}
		return err
	})
	r.sent, r.got = sent, time.Now()
	if err == nil {
		c.clock(sent, r.got, r.now)
		c.observe(before, r.version)
	}
	return r, err
}

// readOr returns the row as a statement found it (known), or reads it when known is nil.
func (c *contention) readOr(ctx context.Context, known *row) (row, error) {
	switch {
	case known == nil:
		return c.read(ctx)
	case known.missing:
		return row{}, errNoRow
	}
	return *known, nil
}

// readKnown reads the row for readOr: a row marked missing when there is none.
func (c *contention) readKnown(ctx context.Context) (*row, error) {
	r, err := c.read(ctx)
	switch {
	case errors.Is(err, errNoRow):
		return &row{missing: true}, nil
	case err != nil:
		return nil, err
	}
	return &r, nil
}

// read reads mutex's row and the database's now with q; errNoRow if there is no row.
func (b *Backend) read(ctx context.Context, q querier, s schema, mutex string) (row, error) {
	var r row
	query, args := b.dialect.bound(s, limit(ctx), b.sql.read.in(s), mutex)
	err := queryRow(ctx, q, query, args, &r.owner, &r.acquiredAt, &r.ttlAt, &r.transitionAt, &r.version, &r.now, &r.value, &r.token)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, errNoRow
	}
	return r, err
}

// readLocking is read that also tells who holds the named lock, and whether q's session
// does (statements.readLocking).
func (b *Backend) readLocking(ctx context.Context, q querier, s schema, mutex, lock string) (row, error) {
	var r row
	var holder sql.NullInt64
	var session int64
	query, args := b.dialect.bound(s, limit(ctx), b.sql.readLocking.in(s), lock, mutex)
	err := queryRow(ctx, q, query, args, &r.owner, &r.acquiredAt, &r.ttlAt, &r.transitionAt, &r.version, &r.now,
		&r.value, &r.token, &holder, &session)
	if errors.Is(err, sql.ErrNoRows) {
		return row{}, errNoRow
	}
	r.lock = lockTry{told: holder.Valid, got: holder.Int64 == session, session: session}
	if other := holder.Int64 != 0 && holder.Int64 != session; other {
		r.lock.other, r.lock.holder = true, holder.Int64
	}
	return r, err
}

// release runs the release statement with q: it frees mutex's row if owner holds it at
// version, and reports whether it did.
func (b *Backend) release(ctx context.Context, q querier, s schema, mutex, owner string, version uint64) (bool, error) {
	query, args := b.dialect.bound(s, limit(ctx), b.sql.release, mutex, owner, version)
	res, err := q.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return err == nil && n == 1, nil
}

// ensureRow creates the row with no owner unless it exists, at the highest version the
// backend has seen for it.
func (c *contention) ensureRow(ctx context.Context) error {
	floor := c.b.floors.get(c.mutex)
	err := c.run(ctx, false, func(q querier) error {
		query, args := c.b.dialect.bound(c.schema, limit(ctx), c.b.sql.ensureRow, c.mutex, floor)
		_, err := q.ExecContext(ctx, query, args...)
		return err
	})
	if err == nil && c.value != "" && c.token == 0 {
		// The value's write ahead found no row: again, on the new one. A failure leaves the
		// value to be written after the acquisition.
		c.ahead, _ = c.valueAhead(ctx)
	}
	return err
}

// run runs a statement on the pinned connection when the contention has one that is idle
// and alive, and otherwise on the pool. A pinned connection that fails broken is dropped,
// and the statement is tried on the pool when the driver says nothing was sent.
//
// While the pinned connection's session holds the named lock, only the release runs on it
// (lockOwn), which may let the lock go in the same statement and which the service cuts
// short only when the context of Stop's caller ends during it (Stop ends the call in
// flight, then releases; a release cut short is made again in the background): a
// statement cut short by its context makes go-sql-driver and pgx close the connection it
// runs on, and the server would then let the lock go with the session, ahead of the
// release, waking a waiter that finds the row still owned (it heads the queue, polling,
// and the release that follows wakes nobody). Such a statement does not check the pinned
// connection either: pgx pings one idle for over a second when it is checked.
func (c *contention) run(ctx context.Context, lockOwn bool, f func(q querier) error) error {
	if !lockOwn && c.holdsLock() {
		return f(c.b.db)
	}
	if conn := c.idleConn(ctx); conn != nil {
		err := f(conn)
		if err == nil {
			return nil
		}
		if !valid(conn) {
			c.drop(conn)
		}
		if !errors.Is(err, driver.ErrBadConn) {
			return err
		}
	}
	return f(c.b.db)
}

// pause waits for d, or until done is closed, or until ctx ends (then it returns ctx's
// error).
func pause(ctx context.Context, d time.Duration, done <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// limit returns the time left until ctx's deadline, the server-side limit of a statement
// run under ctx, or 0 (no limit) when ctx has no deadline.
func limit(ctx context.Context) time.Duration {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return time.Until(dl)
}
