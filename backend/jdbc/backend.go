package jdbc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// Backend is simba's backend on a database/sql pool. It is safe for concurrent use: one
// Backend serves any number of services, lockers and schedulers.
type Backend struct {
	db      *sql.DB
	dialect Dialect
	table   tableName
	sql     statements
	pins    chan struct{} // a token per connection the hand-over holds; nil: no hand-over
	closed  atomic.Bool

	regressions atomic.Uint64
	steps       atomic.Uint64
	floors      floors
	lookups     lookups // for ReleaseOwner
	renewals    *renewals
	stmts       *preparedStmts // the pinned connections' prepared statements; nil: none (prepared.go)

	mu          sync.Mutex
	schema      *schema // what Start checked; nil until a check succeeded
	contentions map[*contention]struct{}
	holds       map[*holdContention]struct{} // semaphores' and read-write locks' (holds.go)
	holdSQL     *holdStatements              // the hold table's, once checked; nil until then
	spare       *parkConn                    // a parking's connection, kept with its pin for the next (holds_wake.go)
	cleared     map[string]struct{}          // mutex and contender pairs whose value row was cleared (clearValue)

	renderMu   sync.Mutex
	renderings map[renderKey]renderedSQL // contenders' statements, by ttl and session (rendered)

	parkLock   parkLock        // what holds' parked statements wait for on MySQL (holds_wake.go)
	background sync.WaitGroup  // sweeps of abandoned acquisitions (stray.go), holds' wakes (wakeLater)
	wakes      context.Context // the holds' wakes' (wakeLater): ended by Close
	stopWakes  context.CancelFunc
}

var (
	_ simba.Backend          = (*Backend)(nil)
	_ backend.Validator      = (*Backend)(nil)
	_ backend.DeadlineKeeper = (*Backend)(nil)
	_ backend.RenewalBatcher = (*Backend)(nil)
)

// KeepsDeadlines reports that every call of the backend and of its contentions returns by
// its context's deadline (backend.DeadlineKeeper): each statement runs under the call's
// context, which both drivers end by closing the connection, and every wait of a call
// (a connection from the pool, the hand-over's waiter) ends with it too. A Locker then
// makes its start-up, first attempt and release on its caller's goroutine.
func (b *Backend) KeepsDeadlines() bool { return true }

// New returns a backend on db, a pool the caller opened (with go-sql-driver/mysql, put
// interpolateParams=true in its DSN: see the package documentation) and keeps: the
// backend never closes it. New does no I/O; Start checks the table.
func New(db *sql.DB, opts ...Option) (*Backend, error) {
	if db == nil {
		return nil, simba.InvalidArgument("db", nil, "must not be nil")
	}
	cfg, t, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	var pins chan struct{}
	if cfg.pins > 0 {
		pins = make(chan struct{}, cfg.pins)
	}
	wakes, stopWakes := context.WithCancel(context.Background())
	b := &Backend{
		wakes:       wakes,
		stopWakes:   stopWakes,
		pins:        pins,
		db:          db,
		dialect:     cfg.dialect,
		table:       t,
		sql:         cfg.dialect.statements(t),
		contentions: make(map[*contention]struct{}),
	}
	if _, mysql := cfg.dialect.(mysqlDialect); mysql && cfg.prepared {
		b.stmts = &preparedStmts{maxConns: maxPreparedConns}
	}
	b.renewals = newRenewals(b)
	return b, nil
}

// Close frees what the backend holds itself: its pinned connections (which lets their
// named locks go) and the goroutines waiting on them; it releases no mutex on the table
// and does not close the pool, so stop services first (see the package doc, Who closes
// what). Later calls of the backend's contentions, and StartContend, fail with an error
// matching simba.ErrClosed, and acquisitions waiting for their turn end at once
// (Participant.Closed). Close waits for the sweeps that stopped contentions left behind
// (see Bounded statements): at most the call timeout and a little more; it ends the wakes
// that releases of holds sent to other processes' waiters, and the statement renewing
// many mutexes under way, whose renewals fail with simba.ErrClosed. It is idempotent and
// returns nil.
func (b *Backend) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	b.mu.Lock()
	live, holds := b.contentions, b.holds
	b.contentions, b.holds = nil, nil
	b.mu.Unlock()
	for c := range holds {
		c.endParking()
		if c.closed != nil {
			c.closed()
		}
	}
	for c := range live {
		c.abandon()
		if c.closed != nil {
			c.closed() // an acquisition waiting for its turn ends now, not at its next attempt
		}
	}
	b.dropSpare(false)
	b.renewals.close()
	b.stopWakes() // a wake still under way ends: its waiters poll, if any are left
	b.background.Wait()
	return nil
}

// StartContend checks, once per backend, that the table matches the format (a
// *SchemaError otherwise), checks the mutex name and contender ID against the real column
// lengths, and returns the participant's contention. It does no further I/O: a mutex's row
// is created by its first acquisition. See simba.Backend.
func (b *Backend) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if err := b.usable(ctx); err != nil {
		return nil, err
	}
	if p.Hold.Kind != backend.Mutex {
		return b.startHold(ctx, p)
	}
	s, err := b.checkedSchema(ctx)
	if err != nil {
		return nil, err
	}
	if err := fits(s.mutex, "mutex", p.Mutex, b.table); err != nil {
		return nil, err
	}
	if p.ContenderID != "" {
		if err := fits(s.owner, "contender ID", p.ContenderID, b.table); err != nil {
			return nil, err
		}
	}
	if p.Value != "" && !s.values {
		if s, err = b.lookForValues(ctx); err != nil {
			return nil, err
		}
		if !s.values {
			return nil, b.missing(valueTable, "a contender with an owner value")
		}
	}
	c := newContention(b, s, p)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.contentions == nil {
		return nil, fmt.Errorf("simba/jdbc: %w", simba.ErrClosed)
	}
	b.contentions[c] = struct{}{}
	return c.wrap(s, p.WaitsOnly), nil
}

// BatchesRenewals reports that the renewals reaching the backend together go as one
// statement per ttl and transition (backend.RenewalBatcher).
func (b *Backend) BatchesRenewals() bool { return true }

// TokenRegressions returns how many times a contention of this backend saw a mutex's row
// at a version lower than one the backend had seen before: the row was deleted and
// created again by someone who did not know its version (see the package documentation).
// Each such event is also logged at Error level with the token (the version seen) and the
// previous token (the highest version seen before).
func (b *Backend) TokenRegressions() uint64 { return b.regressions.Load() }

// ClockSteps returns how many times a contention of this backend saw the database's clock
// step: move between two answers by more than the local monotonic clock did, or less,
// beyond a margin (see the package documentation). Each step is also logged at Error
// level with its size.
func (b *Backend) ClockSteps() uint64 { return b.steps.Load() }

// pin takes a place in the hand-over's budget of connections, if one is free and the pool
// keeps a connection for the statements besides the pinned ones. Every connection a
// contention pins holds one, from pin to unpin, and so does the parking connection the
// backend keeps (keepSpare), whose place pin takes over when the budget is full. (With a pool no larger than the budget,
// every connection could be pinned, and an owner's renewals, which borrow from the pool,
// would wait for one until their deadline: a pool of 2 with the default budget lost a
// held lease that way.)
func (b *Backend) pin() bool {
	select {
	case b.pins <- struct{}{}:
	default:
		return b.dropSpare(true) // the kept parking connection's place, if any
	}
	if most := b.db.Stats().MaxOpenConnections; most > 0 && len(b.pins) >= most {
		<-b.pins
		return false
	}
	return true
}

// unpin gives a place taken by pin back.
func (b *Backend) unpin() { <-b.pins }

// forget removes a stopped contention.
func (b *Backend) forget(c *contention) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.contentions, c)
}

// usable fails when ctx has ended or the backend is closed.
func (b *Backend) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simba/jdbc: %w", err)
	}
	if b.closed.Load() {
		return fmt.Errorf("simba/jdbc: %w", simba.ErrClosed)
	}
	return nil
}

// checkedSchema returns the table's schema, checking it on the first call that succeeds.
func (b *Backend) checkedSchema(ctx context.Context) (schema, error) {
	b.mu.Lock()
	s := b.schema
	b.mu.Unlock()
	if s != nil {
		return *s, nil
	}
	checked, err := b.dialect.inspect(ctx, b.db, b.table)
	var se *SchemaError
	switch {
	case errors.As(err, &se):
		return schema{}, err
	case err != nil:
		return schema{}, b.refused(fmt.Errorf("simba/jdbc: check table %s: %w", b.table, err))
	}
	if checked.values, checked.slots, checked.waits, err = b.presentAll(ctx); err != nil {
		return schema{}, err
	}
	b.mu.Lock()
	b.schema = &checked
	b.mu.Unlock()
	return checked, nil
}

// lookForValues looks for the value table once more, which Start did not find (it may have
// been created since), and returns the schema with what it found.
func (b *Backend) lookForValues(ctx context.Context) (schema, error) {
	found, err := b.present(ctx, valueTable)
	if err != nil {
		return schema{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.schema.values = b.schema.values || found
	return *b.schema, nil
}

// refused marks err as a refusal when the store's answer in it is one (see refused).
func (b *Backend) refused(err error) error { return refused(err, b.table.String()) }
