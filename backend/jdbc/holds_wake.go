package jdbc

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The cross-process wake of semaphores' and read-write locks' waiters: see "Hand-over of
// holds" in the package documentation. A queued waiter parks a sleeping statement, marked
// with a digest of its name and ID, on a connection of its own; a release ends the parked
// statements of the waiters that fit now, found by their mark among the server's running
// statements. The wake is a hint only: the waiter decides in its own transaction, and a
// wake lost costs time (the waiter's polling), never safety.

// wakeTag begins a parked statement's text; its mark goes on with 32 hex digits and "*/".
const wakeTag = "SELECT /*simba-wake:"

// parkSeen bounds the wait for the server to show a parked statement running; one not seen
// by then is taken for one the server never shows, and the contention polls only.
const parkSeen = 5 * time.Second

// wakeMarkLen is the length of a mark: wakeTag, the digest, "*/".
const wakeMarkLen = len(wakeTag) + 32 + 2

// wakeMark is the beginning of the text of the statement that holder parks, waiting for
// kind name in table t: digits only between fixed text, so it is safe in SQL.
func wakeMark(t tableName, kind int64, name, holder string) string {
	sum := sha256.Sum256([]byte(t.String() + "\x00" + strconv.FormatInt(kind, 10) + "\x00" + name + "\x00" + holder))
	return wakeTag + hex.EncodeToString(sum[:16]) + "*/"
}

// holdPark is a waiter's parking: the parked statement runs on a connection of its own,
// pinned from the hand-over's budget, in a goroutine (parkLoop) that lives from the first
// queued answer to the contention's admission or end.
type holdPark struct {
	mu      sync.Mutex    // taken before the backend's mu (park takes the kept connection), never after
	gen     uint64        // counts the queued answers; the loop parks after the latest
	kick    chan struct{} // a queued answer came
	stop    chan struct{} // closed to end the running loop; nil when none runs
	gone    bool          // the contention ended: no more parking
	blind   bool          // the server never showed a parked statement running: no more parking
	parked  bool          // a parked statement runs, the rows checked
	running sync.WaitGroup
}

// parkOutcome is how one parking ended.
type parkOutcome int

const (
	sleptOut parkOutcome = iota // the sleep ran its length: park again
	woken                       // a release ended it, or the contention fits now: try now
	stopped                     // the contention asked the loop to end
	broken                      // the connection failed: polling until the next queued answer
	unseen                      // the server does not show it running: polling only, for good
)

// park parks the contention, queued by a decision, unless the hand-over's budget has no
// connection for it (then it polls only, as without the wake).
func (c *holdContention) park() {
	p := &c.parking
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone || p.blind {
		return
	}
	p.gen++
	if p.stop == nil {
		spare := c.b.takeSpare() // its pin comes with it
		if spare == nil && !c.b.pin() {
			c.log.Debug("simba/jdbc: the hand-over's connections are all in use; waiting by polling only")
			return
		}
		if p.kick == nil {
			p.kick = make(chan struct{}, 1)
		}
		stop := make(chan struct{})
		p.stop = stop
		p.running.Go(func() { c.parkLoop(stop, spare) })
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// unpark ends the parking, if any, without waiting for it; gone ends it for good.
func (c *holdContention) unpark(gone bool) {
	p := &c.parking
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gone = p.gone || gone
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
}

// endParking ends the parking for good and waits for it: the parked statement is
// interrupted (within interruptFor, or its connection is closed) and the connection
// closed.
func (c *holdContention) endParking() {
	c.unpark(true)
	c.parking.running.Wait()
}

// latest returns the generation of the latest queued answer, waiting for one newer than
// after; false when stop closes first.
func (c *holdContention) latest(stop <-chan struct{}, after uint64) (uint64, bool) {
	p := &c.parking
	for {
		p.mu.Lock()
		gen := p.gen
		p.mu.Unlock()
		if gen > after {
			return gen, true
		}
		select {
		case <-stop:
			return 0, false
		case <-p.kick:
		}
	}
}

// parkLoop parks on a connection of its own (spare, if not nil) until stop closes, waking
// the service when a parking ends otherwise than by its length. The connection is never
// returned to the pool, as a release that found the parked statement may end the
// statement it runs next (MySQL's KILL QUERY names a session, not a statement); the
// backend keeps it for its next parking (keepSpare), where such a stray interruption
// only wakes a waiter early.
func (c *holdContention) parkLoop(stop chan struct{}, spare *parkConn) {
	var (
		pc    parkConn
		reuse bool
	)
	defer func() { c.b.keepSpare(pc, reuse) }() // or closes it, and gives the pin back
	defer func() {
		p := &c.parking
		p.mu.Lock()
		if p.stop == stop { // ended by a failure, not by unpark: a later queued answer parks again
			p.stop = nil
		}
		p.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if spare != nil {
		pc = *spare
		actx, acancel := within(ctx, stop)
		ok := alive(actx, pc.conn)
		acancel()
		if !ok {
			discard(pc.conn) // the server closed it, say; its pin stays for a new one
			pc = parkConn{}
		}
	}
	if pc.conn == nil {
		var err error
		if pc.conn, pc.session, err = c.parkingConn(ctx, stop); err != nil {
			c.log.Debug("simba/jdbc: no connection to park on; waiting by polling only", "err", err)
			return
		}
	}
	conn, session := pc.conn, pc.session
	var lock string
	var err error
	if c.sql.parkLocked {
		if lock, err = c.b.parkLock.hold(ctx, c.b, stop); err != nil {
			c.log.Debug("simba/jdbc: no park lock to wait on; waiting by polling only", "err", err)
			return
		}
		defer c.b.parkLock.leave(c.b)
	}
	var used uint64
	for {
		gen, ok := c.latest(stop, used)
		if !ok {
			reuse = true
			return
		}
		switch c.parkOnce(ctx, cancel, conn, session, lock, stop) {
		case sleptOut:
			used = gen - 1 // park again
		case woken:
			used = gen // a newer queued answer, if one came meanwhile, parks again at once
			if c.generation() == gen && c.wake != nil {
				c.wake() // no decision since: the service tries now
			}
		case broken, unseen:
			if c.wake != nil {
				c.wake() // the wake, if any, may be lost: the service tries now
			}
			return
		case stopped:
			reuse = true
			return
		}
	}
}

// generation returns the generation of the latest queued answer.
func (c *holdContention) generation() uint64 {
	p := &c.parking
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gen
}

// parkingConn takes a connection from the pool for the parking, and its session ID,
// within interruptFor.
func (c *holdContention) parkingConn(ctx context.Context, stop <-chan struct{}) (*sql.Conn, int64, error) {
	ctx, cancel := within(ctx, stop)
	defer cancel()
	conn, err := c.b.db.Conn(ctx)
	if err != nil {
		return nil, 0, err
	}
	var session int64
	if err := conn.QueryRowContext(ctx, c.sql.session).Scan(&session); err != nil {
		discard(conn)
		return nil, 0, err
	}
	return conn, session, nil
}

// within bounds ctx by interruptFor, and ends it early when stop closes.
func within(ctx context.Context, stop <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, interruptFor)
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// parkOnce runs one parked statement on conn (session), waiting for lock (the park
// lock's name; "" for a sleep), and waits for its end. It first waits until the server
// shows the statement running, and only then reads the name's rows: a release that
// committed before that read is seen there (the contention fits now), and one that
// committed after it finds the statement running when it looks for it. cancel ends ctx,
// closing conn, when the statement cannot be interrupted.
func (c *holdContention) parkOnce(ctx context.Context, cancel context.CancelFunc, conn *sql.Conn, session int64,
	lock string, stop <-chan struct{}) parkOutcome {
	var (
		slept  int64
		err    error
		ended  = make(chan struct{})
		length = min(time.Duration(c.lease)*time.Millisecond, waitSeconds*time.Second)
		args   = []any{length.Seconds()}
	)
	if lock != "" {
		args = []any{lock, length.Seconds()}
	}
	go func() {
		defer close(ended)
		err = conn.QueryRowContext(ctx, c.parkSQL, args...).Scan(&slept)
	}()
	outcome := func() parkOutcome {
		switch {
		case err == nil && slept == 0:
			return sleptOut
		case err != nil && !valid(conn):
			c.log.Debug("simba/jdbc: parking failed; waiting by polling only", "err", err)
			return broken
		case err == nil && lock != "":
			// The wait took the park lock: the connection that held it is gone. This
			// parking ends (closing its connection lets the lock go); the next holds one anew.
			c.b.parkLock.lost(c.b, lock)
			return broken
		}
		return woken // a wait that a wake ended answers an error or NULL
	}
	// end interrupts the parked statement, for a reason of the loop's, and waits for it.
	end := func(why parkOutcome) parkOutcome {
		if !c.b.interrupt(ctx, session, ended) {
			cancel()
			<-ended
			return broken
		}
		<-ended
		return why
	}
	running, err2 := c.parked(ctx, session, ended, stop)
	switch {
	case closed(ended):
		return outcome()
	case closed(stop):
		return end(stopped)
	case err2 != nil:
		c.log.Debug("simba/jdbc: could not look for the parked statement", "err", err2)
		return end(woken) // the wake may be lost: try now
	case !running:
		// PostgreSQL with track_activities off, say: a release could not find it either.
		c.log.Debug("simba/jdbc: the server does not show the parked statement running; waiting by polling only")
		c.parking.mu.Lock()
		c.parking.blind = true
		c.parking.mu.Unlock()
		return end(unseen)
	}
	head, rows, err2 := c.readRows(ctx, c.b.db)
	if err2 != nil || c.mayEnter(head, rows) {
		return end(woken)
	}
	c.setParked(true)
	defer c.setParked(false)
	select {
	case <-ended:
		return outcome()
	case <-stop:
		return end(stopped)
	}
}

// mayEnter reports whether the contention's next attempt could be admitted, by the rows
// read: it fits now, or its row is missing or ended (the attempt tells why).
func (c *holdContention) mayEnter(head holdRow, rows []holdRow) bool {
	holders, waiters := holdersAndWaiters(head, rows)
	i := slices.IndexFunc(waiters, func(r holdRow) bool { return r.holder == c.id })
	return i < 0 || c.admits(holders, waiters, i)
}

// setParked records whether a parked statement runs with the rows checked.
func (c *holdContention) setParked(on bool) {
	c.parking.mu.Lock()
	c.parking.parked = on
	c.parking.mu.Unlock()
}

// parked waits until the server shows the parked statement running on session, for at
// most parkSeen; it gives up early when the statement ended or stop closed.
func (c *holdContention) parked(ctx context.Context, session int64, ended, stop <-chan struct{}) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, parkSeen)
	defer cancel()
	for delay := time.Millisecond; ; delay = min(2*delay, 50*time.Millisecond) {
		var n int
		if err := c.b.db.QueryRowContext(ctx, c.sql.parked, session, wakeMarkLen, c.mark).Scan(&n); err != nil {
			if ctx.Err() != nil {
				return false, nil
			}
			return false, err
		}
		if n > 0 {
			return true, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ended:
		case <-stop:
		case <-ctx.Done():
		case <-t.C:
			continue
		}
		t.Stop()
		return false, nil
	}
}

// wakeTimeout bounds the wake that follows a release (wakeLater).
const wakeTimeout = 5 * time.Second

// wakeLater runs wakeOthers off the release's call, so that a slow KILL costs the
// releaser neither its deadline nor, through it, the wakes of the waiters after it. Close
// ends it and waits for it.
func (c *holdContention) wakeLater() {
	b := c.b
	b.mu.Lock()
	if b.holds == nil {
		// Closed, or closing: the pool may be closed once Close returns; the waiters poll.
		b.mu.Unlock()
		return
	}
	b.background.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.background.Done()
		ctx, cancel := context.WithTimeout(b.wakes, wakeTimeout)
		defer cancel()
		c.wakeOthers(ctx)
	}()
}

// wakeOthers, after the contention left the name, ends the parked statements of the
// waiters that fit now, other than this backend's own (wakeHolds woke those). Failures
// only cost those waiters time; they are logged, not returned.
func (c *holdContention) wakeOthers(ctx context.Context) {
	head, rows, err := c.readRows(ctx, c.b.db)
	if errors.Is(err, errNoRow) {
		return
	}
	if err != nil {
		c.log.Debug("simba/jdbc: could not read whom the release lets in", "err", err)
		return
	}
	local := c.b.localHolders(c)
	var marks []any
	for _, w := range c.letIn(head, rows) {
		if _, ok := local[w.holder]; !ok {
			marks = append(marks, wakeMark(c.sql.table, c.kind, c.name, w.holder))
		}
	}
	if len(marks) == 0 {
		return
	}
	if err := c.sql.wakeParked(ctx, c.b.db, marks); err != nil {
		c.log.Debug("simba/jdbc: could not wake the waiters of other processes; they poll", "err", err)
	}
}

// letIn returns the waiters among the name's rows that fit beside its holders now, in
// order: those a release wakes.
func (c *holdContention) letIn(head holdRow, rows []holdRow) []holdRow {
	holders, waiters := holdersAndWaiters(head, rows)
	for i := range waiters {
		if !fitsBeside(c.hold.Kind, head.permits, holders, waiters[:i+1]) {
			return waiters[:i]
		}
	}
	return waiters
}

// holdersAndWaiters returns the holders and the waiters, in order, among the name's rows
// that have not ended.
func holdersAndWaiters(head holdRow, rows []holdRow) (holders, waiters []holdRow) {
	for _, r := range rows {
		switch {
		case r.expiresAt <= head.now:
		case r.token > 0:
			holders = append(holders, r)
		default:
			waiters = append(waiters, r)
		}
	}
	return holders, waiters
}

// localHolders returns the contender IDs of the backend's contentions of c's name.
func (b *Backend) localHolders(c *holdContention) map[string]struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make(map[string]struct{})
	for o := range b.holds {
		if o.kind == c.kind && o.name == c.name {
			ids[o.id] = struct{}{}
		}
	}
	return ids
}

// wakeParked ends the parked statements whose marks are given.
func (s holdStatements) wakeParked(ctx context.Context, db *sql.DB, marks []any) error {
	in := strings.TrimSuffix(strings.Repeat("?, ", len(marks)), ", ")
	q := fmt.Sprintf(s.findParked, in)
	if s.killParked == "" { // PostgreSQL: the query cancels them itself
		_, err := db.ExecContext(ctx, dollars(q), append([]any{wakeMarkLen}, marks...)...)
		return err
	}
	rs, err := db.QueryContext(ctx, q, append([]any{wakeMarkLen}, marks...)...)
	if err != nil {
		return err
	}
	var ids []int64
	for rs.Next() {
		var id int64
		if err := rs.Scan(&id); err != nil {
			return errors.Join(err, rs.Close())
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rs.Err(), rs.Close()); err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if _, err := db.ExecContext(ctx, fmt.Sprintf(s.killParked, id)); err != nil {
			errs = append(errs, err) // one ended already, or belongs to a user this one may not touch
		}
	}
	return errors.Join(errs...)
}

// parkLock is the named lock that parked statements wait for on MySQL and MariaDB, held by
// the backend on a connection pinned from the hand-over's budget while any of its holds'
// contentions parks: a wait for it lasts its timeout unless a wake ends it.
type parkLock struct {
	mu    sync.Mutex // taken before the backend's mu (hold pins), never after
	users int        // the parkings under way that hold a place on it
	name  string     // the lock's name; "" when not held
	conn  *sql.Conn  // the session that holds it
}

// hold returns the lock's name, taking the lock first when the backend does not hold it,
// and counts the caller among its users until leave; it fails when the hand-over's
// budget has no connection for it, or within interruptFor when the server does not answer.
func (p *parkLock) hold(ctx context.Context, b *Backend, stop <-chan struct{}) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.name == "" {
		if !b.pin() {
			return "", errors.New("the hand-over's connections are all in use")
		}
		ctx, cancel := within(ctx, stop)
		defer cancel()
		conn, err := b.db.Conn(ctx)
		if err != nil {
			b.unpin()
			return "", err
		}
		name := "simba-park:" + rand.Text()
		var got sql.NullInt64
		err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got)
		if err == nil && got.Int64 != 1 {
			err = fmt.Errorf("GET_LOCK(%q, 0) answered %v", name, got)
		}
		if err != nil {
			discard(conn)
			b.unpin()
			return "", err
		}
		p.name, p.conn = name, conn
	}
	p.users++
	return p.name, nil
}

// leave ends a use of the lock; the last lets the lock go and gives its connection back
// to the pool (a new connection for each spell of parking cost a backend whose waiters
// park and leave in turn a fifth of its sections).
func (p *parkLock) leave(b *Backend) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users--
	if p.users > 0 || p.name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), interruptFor)
	defer cancel()
	if _, err := p.conn.ExecContext(ctx, "DO RELEASE_LOCK(?)", p.name); err != nil {
		discard(p.conn)
	}
	_ = p.conn.Close()
	p.forget(b)
}

// lost closes the connection of the lock named name, if it is still the one held: a wait
// took it, so that session is gone.
func (p *parkLock) lost(b *Backend, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.name == name {
		discard(p.conn)
		p.forget(b)
	}
}

// forget records that the backend holds no park lock; p.mu is held.
func (p *parkLock) forget(b *Backend) {
	b.unpin()
	p.name, p.conn = "", nil
}

// parkConn is a parking's connection and its session ID.
type parkConn struct {
	conn    *sql.Conn
	session int64
}

// keepSpare keeps pc, a parking's connection, with its pin, for the backend's next
// parking when reuse says it is sound and none is kept already (see Hand-over of holds in
// doc.go); otherwise, or once the backend is closing, it closes pc and gives the pin back.
func (b *Backend) keepSpare(pc parkConn, reuse bool) {
	if pc.conn == nil {
		b.unpin()
		return
	}
	b.mu.Lock()
	kept := reuse && b.holds != nil && b.spare == nil
	if kept {
		b.spare = &pc
	}
	b.mu.Unlock()
	if !kept {
		discard(pc.conn)
		b.unpin()
	}
}

// takeSpare returns the kept parking connection, if any, with its pin; nil otherwise.
// The parking checks it (a check may take a round trip).
func (b *Backend) takeSpare() *parkConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	pc := b.spare
	b.spare = nil
	return pc
}

// dropSpare closes the kept parking connection, if any, and reports whether there was
// one; its pin is given back unless keepPin (the caller takes it over).
func (b *Backend) dropSpare(keepPin bool) bool {
	pc := b.takeSpare()
	if pc == nil {
		return false
	}
	discard(pc.conn)
	if !keepPin {
		b.unpin()
	}
	return true
}
