package jdbc

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/batch"
)

// Renewals of many held mutexes in one statement. simba has the owners of a process renew
// at the same instants (its renewal grid: the backend is a backend.RenewalBatcher), so the
// renewals of one instant reach the backend within milliseconds of each other, however
// many mutexes the process holds. The backend gathers them and renews them with one
// statement per ttl and transition (statements.go: mysqlRenewMany, pgRenewMany), on the
// pool, from one goroutine that runs while renewals wait and that Close joins. A renewal
// the statement did not renew (its row was taken over, or its transition window ended)
// is made again with the contention's own acquire statement, which tells why.
const (
	// renewGap: a batch is sent once no renewal has come for this long...
	renewGap = 2 * time.Millisecond
	// renewLinger: ... or once its first has waited this long, or half of what is left
	// to any renewal's deadline, if less...
	renewLinger = 50 * time.Millisecond
	// maxRenewBatch: ... or once it holds this many renewals. The statement locks its
	// rows until it commits (2,000 renewals took 10-40 ms on a loaded 2-core machine).
	maxRenewBatch = 2000
	// maxRenewing bounds the statements in flight: one whose answer is slow or lost (it
	// waits for its deadline) holds up none of the batches behind it, up to this many.
	maxRenewing = 4
)

// renewals gathers the renewals of a backend's contentions and sends them in batches.
type renewals struct {
	b     *Backend
	calls *batch.Queue[*renewal]
}

// renewal is one contention's renewal, waiting for its batch.
type renewal struct {
	ctx     context.Context
	key     renderKey // the renewals of one statement share it
	query   string    // the statement, rendered for key
	row     renewRow
	arrived time.Time
	sendBy  time.Time         // its batch goes no later than this
	until   time.Time         // once taken into a statement: until when that statement may take effect (under calls.Locked)
	done    chan renewOutcome // capacity 1: the outcome, or why there is none
}

// renewRow is a row a batch renews: the mutex's, if it still names contender at version.
type renewRow struct {
	mutex, contender string
	version          uint64
}

// renewOutcome is what became of one renewal.
type renewOutcome struct {
	renewed bool          // false, without err: not renewed; the contention makes its own statement
	now     uint64        // the database's now (its low 31 bits, in ms)
	queued  time.Duration // from its arrival to its statement's sending
	err     error
}

func newRenewals(b *Backend) *renewals {
	q := &renewals{b: b}
	q.calls = batch.NewQueue(batch.Options[*renewal]{
		Gap: renewGap, Max: maxRenewBatch, InFlight: maxRenewing,
		Send:   q.send,
		Fail:   func(r *renewal, err error) { r.done <- renewOutcome{err: err} },
		Closed: fmt.Errorf("simba/jdbc: %w", simba.ErrClosed),
		Taken: func(taken []*renewal, latest time.Time) {
			for _, r := range taken {
				r.until = latest.Add(strayGrace)
			}
		},
	})
	return q
}

// renewInBatch renews the contention's tenure in the backend's next batch, when it may go
// in one: a renewal at the version the contention knows (no stale row to take, no floor
// above it), bounded by a deadline, that the contention would make on the pool. batched is
// false when it may not, or when the batch did not renew it: the contention then makes
// its own statement.
func (c *contention) renewInBatch(ctx context.Context, a acquireArgs) (_ acquireResult, batched bool, _ error) {
	_, bounded := ctx.Deadline()
	if c.token == 0 || !a.expect.Valid || uint64(a.expect.Int64) != c.version || a.stale.Valid || a.floor > c.version ||
		!bounded || c.renew == "" || !c.onPool() {
		return acquireResult{}, false, nil
	}
	got, until, err := c.b.renewals.renew(ctx, c.schema, c.ttl, c.lease, c.renew, renewRow{mutex: c.mutex, contender: c.id, version: c.version})
	if until.After(c.stray) {
		c.stray = until // given up on after its statement went: it may still renew the row (stray.go)
	}
	switch {
	case err != nil:
		return acquireResult{}, true, err
	case !got.renewed:
		return acquireResult{}, false, nil
	}
	return acquireResult{matched: true, found: c.version, version: c.version + 1, renewed: true, now: got.now, queued: got.queued}, true, nil
}

// onPool reports whether the contention's statements go to the pool (see run): it has no
// pinned connection, or one that its waiter uses, or whose session holds the named lock.
func (c *contention) onPool() bool {
	h := &c.hand
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn == nil || h.gone || h.waiting || h.holds
}

// renew queues a renewal of row, with the statement query rendered for a session like
// s's and ttl and lease, and returns its outcome. It returns ctx's error as soon as ctx
// ends, and then until, when the renewal's statement had gone already: until when that
// statement may still renew the row.
func (q *renewals) renew(ctx context.Context, s schema, ttl, lease time.Duration, query string, row renewRow) (_ renewOutcome, until time.Time, _ error) {
	now := time.Now()
	r := &renewal{ctx: ctx, key: renderKey{s: s, ttl: ttl, lease: lease}, query: query, row: row, arrived: now,
		sendBy: now.Add(renewLinger), done: make(chan renewOutcome, 1)}
	if d, ok := ctx.Deadline(); ok && d.Sub(now)/2 < renewLinger {
		r.sendBy = now.Add(d.Sub(now) / 2)
	}
	if err := q.calls.Add(r); err != nil {
		return renewOutcome{}, time.Time{}, err
	}
	select {
	case got := <-r.done:
		return got, time.Time{}, got.err
	case <-ctx.Done():
		q.calls.Locked(func() {
			until = r.until // zero while it waits: the gatherer then leaves it out (ctx has ended)
		})
		return renewOutcome{}, until, ctx.Err()
	}
}

// Context and SendBy make a renewal a batch.Call.
func (r *renewal) Context() context.Context { return r.ctx }
func (r *renewal) SendBy() time.Time        { return r.sendBy }

// send renews batch, within ctx, with one statement per ttl and transition, and hands
// each renewal its outcome.
func (q *renewals) send(ctx context.Context, batch []*renewal) {
	for len(batch) > 0 {
		var one, rest []*renewal
		in := make(map[string]bool, len(batch))
		for _, r := range batch {
			// One statement renews a mutex once: another contention's renewal of the
			// same mutex goes in the next.
			if r.key != batch[0].key || in[r.row.mutex] {
				rest = append(rest, r)
				continue
			}
			in[r.row.mutex] = true
			one = append(one, r)
		}
		q.sendOne(ctx, one)
		batch = rest
	}
}

// sendOne renews batch, whose renewals share a statement, with that statement.
func (q *renewals) sendOne(ctx context.Context, batch []*renewal) {
	rows := make([]renewRow, len(batch))
	for i, r := range batch {
		rows[i] = r.row
	}
	s := batch[0].key.s
	sent := time.Now()
	renewed, now, err := q.b.dialect.renewMany(ctx, q.b.db, s, limit(ctx), batch[0].query, rows)
	for i, r := range batch {
		switch {
		case err == nil:
			r.done <- renewOutcome{renewed: renewed[i], now: now, queued: sent.Sub(r.arrived)}
		case q.calls.Closing():
			r.done <- renewOutcome{err: fmt.Errorf("simba/jdbc: %w", simba.ErrClosed)}
		case serverAnswered(err):
			// The statement ended and changed nothing (a lock wait timed out, say): each
			// renewal is made on its own, so that one row's trouble fails no other.
			r.done <- renewOutcome{}
		default:
			r.done <- renewOutcome{err: err}
		}
	}
}

// close fails the renewals waiting and those of the statements in flight with an error
// wrapping simba.ErrClosed, and waits for the goroutines to end.
func (q *renewals) close() { q.calls.Close() }
