package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// ErrTooFewInstances is returned, wrapped, when fewer of a Quorum's instances are
// available than WithMinAvailable requires, or when too few answered to tell who owns the
// mutex.
var ErrTooFewInstances = errors.New("simba/redis: too few Redis instances available")

// quorumDrift is taken off every TTL a Quorum reports, on top of simba's 1% drift margin:
// Redis expires keys with a precision of about a millisecond, and the instances' clocks
// run at slightly different rates (the Redlock algorithm's allowance).
const quorumDrift = 2 * time.Millisecond

// Quorum is a simba.Backend over several independent Redis instances (not replicas of one
// another), in the spirit of Redlock and of Bedrock's combination lock: a contender owns
// the mutex when it holds it on a majority of them, so the lock stays exclusive and
// available while a minority of instances fail.
//
// Each instance keeps the single-instance format and scripts of Backend (JVM Simba's keys
// and messages); a contender runs them on every available instance in parallel:
//
//   - Acquire succeeds when a majority of all instances (the quorum) answer that the
//     contender owns the mutex. A fresh acquisition that falls short releases what it
//     took again at once, so that another contender can make a quorum.
//   - A renewal must also reach the quorum. One that falls short keeps every key it
//     holds: while the tenure may still be the contender's (until the local TTL end of
//     its last successful renewal), it reports an error, so the service keeps believing
//     until that end, and the keys it keeps stop anyone else from making a quorum
//     meanwhile. Only when the instances that answered show that the contender can no
//     longer hold a quorum does it report the owner they name, which ends the tenure;
//     the keys it still holds then lapse by themselves.
//   - The TTL reported is the smallest of the quorum's, less a 2ms allowance for expiry
//     precision and clock rates. simba counts it from the moment the attempt was sent, so
//     the time the slowest instance took is accounted for.
//   - An instance whose call fails (times out, resets) is left out for WithRecheckAfter
//     and then tried again; while fewer than WithMinAvailable instances are available,
//     Acquire fails at once with ErrTooFewInstances. An instance that refuses the client
//     (see ErrRefused) answers at once and is not left out. A call's error matches
//     ErrRefused when the instances that refused leave fewer than a quorum: no retry can
//     cure it; otherwise it is an outage, which the other instances' return may cure.
//   - Release runs on every instance, available or not; on one whose last call has not
//     returned yet (its answer lost), once that call has, in the background if need be.
//   - Acquire returns as soon as a quorum answers that the contender owns the mutex, and
//     every call returns when its context ends; the calls still under way on slower
//     instances then end in the background, by their deadline at the latest, and Close
//     waits for them. An instance that does not answer costs a renewal nothing.
//   - The fencing token of a tenure is the largest of the quorum's instance tokens, and
//     is written back to each of them (at the first renewal, or within the release), so
//     that the next tenure, whose quorum shares at least one instance with this one, gets
//     a greater token whatever the instances' clocks say. This assumes that the token key of
//     that shared instance outlives the gap between the tenures or that the instances'
//     clocks differ by less than it.
//   - Waiters hear releases on every instance's subscription connection.
//   - A Scheduler's slots (backend.SlotRecorder) are recorded by majority: ClaimSlot runs
//     the single-instance claim on every available instance and succeeds when a quorum
//     recorded the slot. An instance records a slot at most once, and afterwards only
//     later ones, so two claims of one slot never both make a quorum; LastSlot answers
//     the latest record of a quorum of instances, at or after the last slot claimed. A
//     claim that fell short may stay recorded on a minority, where a later claim of that
//     slot or an earlier one then fails: slots can be skipped, never run twice. Claims of
//     one slot at once may all fall short (the instances split their votes): the slot is
//     skipped. Should a later tenure's token be smaller (see the tokens' assumption
//     above), its claims fail where the earlier one's are recorded: skipped too.
//
// An instance that loses its keys (restarted without persistence) takes the owner's share
// of the majority with it: restart such an instance only after ttl + transition, as
// Redlock prescribes, or a contender may make a quorum while the owner still believes.
// Likewise with a slot record: once the instances left holding the last claimed slot are
// fewer than a quorum, a Scheduler may run that slot again.
//
// A Quorum's contentions do not hand the mutex off (they are no backend.HandOffer): a
// hand-off changes the owner and the waiting list in one step, and one made on only some
// instances would split the mutex between the owner and the waiter.
//
// A Quorum is safe for concurrent use. Close it when done: it owns one subscription
// connection per instance, never the clients.
type Quorum struct {
	instances    []*instance
	quorum       int
	minAvailable int
	recheck      time.Duration
	closed       atomic.Bool

	// Calls a contention cut short once a quorum had answered go on in the background
	// (go-redis gives a call up at its deadline, not when it is cancelled); Close joins
	// them. mu orders their start before Close's wait.
	mu    sync.RWMutex
	calls sync.WaitGroup
}

// instance is one Redis instance of a Quorum.
type instance struct {
	index   int
	client  goredis.UniversalClient
	backend *Backend

	mu        sync.Mutex
	downUntil time.Time
}

var (
	_ simba.Backend     = (*Quorum)(nil)
	_ backend.Validator = (*Quorum)(nil)
)

// NewQuorum returns a backend over clients, one per independent Redis instance; an odd
// number, at least three, is usual. It accepts the options of New plus WithMinAvailable
// and WithRecheckAfter, does no I/O, and neither dials nor closes the clients.
func NewQuorum(clients []goredis.UniversalClient, opts ...Option) (*Quorum, error) {
	if len(clients) == 0 {
		return nil, simba.InvalidArgument("clients", 0, "must not be empty")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	quorum := len(clients)/2 + 1
	if !cfg.minAvailableSet {
		cfg.minAvailable = quorum
	}
	if cfg.minAvailable < quorum || cfg.minAvailable > len(clients) {
		return nil, simba.InvalidArgument("min available", cfg.minAvailable,
			fmt.Sprintf("must be between the quorum (%d) and the number of instances (%d)", quorum, len(clients)))
	}
	q := &Quorum{quorum: quorum, minAvailable: cfg.minAvailable, recheck: cfg.recheck}
	for i, c := range clients {
		if isNil(c) {
			return nil, simba.InvalidArgument("client "+strconv.Itoa(i), nil, "must not be nil")
		}
		q.instances = append(q.instances, &instance{index: i, client: c,
			backend: newBackend(c, cfg)})
	}
	return q, nil
}

// Size returns the number of instances and the quorum, a majority of them.
func (q *Quorum) Size() (instances, quorum int) { return len(q.instances), q.quorum }

// Available returns how many instances are not left out after a failure.
func (q *Quorum) Available() int { return len(q.available(time.Now())) }

// Close closes the instances' subscription connections; see Backend.Close.
func (q *Quorum) Close() error {
	q.mu.Lock()
	q.closed.Store(true)
	q.mu.Unlock()
	q.calls.Wait()
	for _, in := range q.instances {
		_ = in.backend.Close()
	}
	return nil
}

// TokenRegressions sums the instances' counts; see Backend.TokenRegressions.
func (q *Quorum) TokenRegressions() uint64 {
	var n uint64
	for _, in := range q.instances {
		n += in.backend.TokenRegressions()
	}
	return n
}

// ValidateMutex applies Backend's rules.
func (q *Quorum) ValidateMutex(name string) error { return q.instances[0].backend.ValidateMutex(name) }

// ValidateContenderID applies Backend's rules.
func (q *Quorum) ValidateContenderID(id string) error {
	return q.instances[0].backend.ValidateContenderID(id)
}

// StartContend opens the participant's contention on every instance; see simba.Backend.
// It checks the instances that are not left out as Backend.StartContend does, in
// parallel, and leaves out those that do not answer; it fails when one refuses the client
// (a misconfiguration is not a failure to ride out) or when fewer than WithMinAvailable
// instances are available, with an error wrapping ErrTooFewInstances and the instances'
// errors.
func (q *Quorum) StartContend(ctx context.Context, p backend.Participant) (backend.Contention, error) {
	if q.closed.Load() {
		return nil, fmt.Errorf("simba/redis: %w", simba.ErrClosed)
	}
	if err := q.instances[0].backend.validate(p); err != nil {
		return nil, err
	}
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	qc := &quorumContention{q: q, id: p.ContenderID, mutex: p.Mutex, subs: make([]*contention, len(q.instances)),
		done:     make([]chan struct{}, len(q.instances)),
		giveBack: max(p.TTL/10, 10*time.Millisecond)}
	sub := p
	sub.Grant = nil // a grant on one instance is no quorum
	for i, in := range q.instances {
		qc.subs[i] = in.backend.open(sub)
	}
	return qc, nil
}

// ReleaseOwner frees mutex in the name of owner, as Backend.ReleaseOwner does on one
// instance, on every instance where the owner key names owner.ID and the instance's token
// for that tenure is not above owner.Token. That is the tenure's quorum-wide token: the
// largest of the quorum that answered its acquisition, so the tenure is freed on that
// quorum at least (an instance that answered later may show a larger token and keeps its
// key until it lapses), and it is written back to the instances (at the tenure's first
// renewal, or within its release), so a later tenure's tokens exceed it on every instance
// that kept its token key, as the Quorum's tokens themselves assume. Elsewhere it changes
// nothing. A Quorum's Lookup shows no token (Token 0), and such a record frees only
// tenures that show none either (JVM contenders'): pass the owner's own record
// (Lease.Owner, the service's Owner) to free a Go owner's. It fails when fewer than a
// quorum of instances answered.
func (q *Quorum) ReleaseOwner(ctx context.Context, mutex string, owner simba.Owner) error {
	if q.closed.Load() {
		return fmt.Errorf("simba/redis: %w", simba.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simba/redis: %w", err)
	}
	if err := q.instances[0].backend.validateRelease(mutex, owner); err != nil || owner.ID == "" {
		return err
	}
	raiseTo := ""
	if owner.Token != 0 {
		raiseTo = strconv.FormatUint(owner.Token, 10)
	}
	errs := make([]error, len(q.instances))
	var wg sync.WaitGroup
	for i, in := range q.instances {
		wg.Go(func() { errs[i] = in.backend.releaseOwner(ctx, mutex, owner, raiseTo) })
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err != nil {
			failed = append(failed, instanceError(q.instances[i], err))
		}
	}
	if answered := len(q.instances) - len(failed); answered < q.quorum {
		return q.shortOf(fmt.Sprintf("released on %d of %d instances: %s", answered, len(q.instances), joined(failed)), failed, ErrTooFewInstances)
	}
	return nil
}

// check runs the start-up check of every available instance, in parallel.
func (q *Quorum) check(ctx context.Context) error {
	list := q.available(time.Now())
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, in := range list {
		wg.Go(func() { errs[i] = in.backend.check(ctx) })
	}
	wg.Wait()
	var failed []error
	for i, err := range errs {
		if err == nil {
			continue
		}
		if errors.Is(err, ErrRefused) {
			return wrap(fmt.Sprintf("instance %d", list[i].index), err)
		}
		if !canceled(ctx) {
			q.leaveOut(list[i], err)
		}
		failed = append(failed, instanceError(list[i], err))
	}
	if n := len(list) - len(failed); n < q.minAvailable {
		return &backendError{causes: append(failed, ErrTooFewInstances),
			detail: fmt.Sprintf("%d of %d instances available, need %d: %s", n, len(q.instances), q.minAvailable, joined(failed))}
	}
	return nil
}

// shortOf returns the error of a call that too few instances served: detail, matching
// each of the instances' failures errs and also. A failure that is a refusal is matched
// only when the instances that refused leave fewer than a quorum, so that the error is a
// refusal only when no retry can cure it: otherwise the call may succeed once the other
// instances are back, and only the message tells of the refusal.
func (q *Quorum) shortOf(detail string, errs []error, also ...error) error {
	refused := 0
	for _, err := range errs {
		if errors.Is(err, simba.ErrRefused) {
			refused++
		}
	}
	causes := make([]error, 0, len(errs)+len(also))
	for _, err := range errs {
		if len(q.instances)-refused < q.quorum || !errors.Is(err, simba.ErrRefused) {
			causes = append(causes, err)
		}
	}
	return &backendError{detail: detail, causes: append(causes, also...)}
}

// instanceError names the instance whose call failed with err.
func instanceError(in *instance, err error) error {
	return wrap(fmt.Sprintf("instance %d", in.index), err)
}

// available returns the instances not left out at now.
func (q *Quorum) available(now time.Time) []*instance {
	var out []*instance
	for _, in := range q.instances {
		in.mu.Lock()
		if !now.Before(in.downUntil) {
			out = append(out, in)
		}
		in.mu.Unlock()
	}
	return out
}

// leaveOut marks an instance unavailable for the recheck interval.
func (q *Quorum) leaveOut(in *instance, err error) {
	in.mu.Lock()
	in.downUntil = time.Now().Add(q.recheck)
	in.mu.Unlock()
	in.backend.log.Warn("simba/redis: quorum instance left out", "instance", in.index, "recheck_in", q.recheck, "err", err)
}

// quorumContention is one participant's contention across the instances. simba calls its
// methods one at a time.
type quorumContention struct {
	q         *Quorum
	id, mutex string
	subs      []*contention // by instance index
	// by instance index: closed when the last call made on that instance's contention
	// returns; the next call waits for it, so that a contention has one call at a time.
	done []chan struct{}

	owning   bool          // the last answer gave this contender the quorum
	until    time.Time     // while owning: no local TTL end can lie beyond it
	token    uint64        // the tenure's token while owning
	last     uint64        // the token of its last tenure, which a new one must exceed
	raised   bool          // the tenure's token was written back to its quorum
	giveBack time.Duration // the budget for releasing what a quorum-less attempt took
}

var (
	_ backend.LeaseContention = (*quorumContention)(nil)
	_ backend.WaitList        = (*quorumContention)(nil)
)

// reply is one instance's answer.
type reply struct {
	in  *instance
	rec backend.Record
	err error
}

// each calls f on the contention of every instance in list, in parallel, and returns the
// answers that came before enough (nil: all of them) was satisfied or ctx ended. The calls
// still under way then go on in the background until they end by themselves, at ctx's
// deadline at the latest: go-redis gives a call up at its deadline, not when it is
// cancelled, and an instance that does not answer must not hold up a quorum that has. The
// next call on the same instance waits for them. An instance whose call fails, or does
// not answer by ctx's deadline, is left out.
//
// A call that is still waiting for the one before it when ctx ends gives up, unless
// patient: then it waits for that call in the background and is made after it, with
// ctx's deadline or, if less is left of it, the give-back budget. A release must reach
// every instance: the call before it may have taken the key there, its answer lost.
func (qc *quorumContention) each(ctx context.Context, list []*instance, f func(*contention, context.Context) (backend.Record, error), enough func([]reply) bool) []reply {
	return qc.spread(ctx, list, f, enough, false)
}

// eachPatiently is each with patient calls (see each).
func (qc *quorumContention) eachPatiently(ctx context.Context, list []*instance, f func(*contention, context.Context) (backend.Record, error)) []reply {
	return qc.spread(ctx, list, f, nil, true)
}

func (qc *quorumContention) spread(ctx context.Context, list []*instance, f func(*contention, context.Context) (backend.Record, error), enough func([]reply) bool, patient bool) []reply {
	blame := ctx.Err() == nil // a call made with no time left says nothing of its instance
	wait, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	answers := make(chan reply, len(list))
	for _, in := range list {
		before, done := qc.done[in.index], make(chan struct{})
		if !qc.q.background(func() {
			defer closeAfter(done, before)
			var r reply
			blamable := false
			if patient {
				r = qc.callAfter(ctx, in, before, f)
			} else {
				r, blamable = qc.call(ctx, wait, in, before, f)
			}
			if blame && blamable && leaveOutAfter(r.err) {
				qc.q.leaveOut(r.in, r.err)
			}
			answers <- r
		}) {
			answers <- reply{in: in, err: fmt.Errorf("simba/redis: %w", simba.ErrClosed)}
			continue
		}
		qc.done[in.index] = done
	}
	var got []reply
	for range list {
		select {
		case r := <-answers:
			got = append(got, r)
			if enough != nil && enough(got) {
				return got
			}
		case <-ctx.Done():
			return got
		}
	}
	return got
}

// leaveOutAfter reports whether an instance whose call failed with err is left out: not
// for an answer in a shape this package does not write, nor a refusal (see refuses),
// which costs no wait and which every call must hear again, lest it hide behind
// ErrTooFewInstances for the recheck interval.
func leaveOutAfter(err error) bool {
	return err != nil && !errors.Is(err, ErrUnexpectedReply) && !errors.Is(err, simba.ErrClosed) && !errors.Is(err, simba.ErrRefused)
}

// closeAfter closes done once the call that closes before (nil: none) has returned: a call
// that gave up waiting for the one before it has not ended the calls on its contention.
func closeAfter(done, before chan struct{}) {
	if before != nil {
		<-before
	}
	close(done)
}

// call makes f's call on in's contention once the call before it there (closes before;
// nil: none) has returned, waiting for that within wait. The call keeps ctx's deadline
// but not its cancellation, so that its failure is the instance's. It reports whether a
// failure is: not when the wait was cut short before ctx's deadline.
func (qc *quorumContention) call(ctx, wait context.Context, in *instance, before chan struct{}, f func(*contention, context.Context) (backend.Record, error)) (reply, bool) {
	if err := awaitCall(wait, in, before); err != nil {
		return reply{in: in, err: err}, pastDeadline(ctx)
	}
	cctx, cancel := detach(ctx)
	defer cancel()
	rec, err := f(qc.subs[in.index], cctx)
	_, detached := ctx.Deadline()
	return reply{in: in, rec: rec, err: err}, detached || !canceled(ctx)
}

// callAfter makes f's call on in's contention once the call before it there (closes
// before; nil: none) has returned, however long that takes (it ends by its own deadline),
// with ctx's deadline or, if less is left of it by then, the give-back budget.
func (qc *quorumContention) callAfter(ctx context.Context, in *instance, before chan struct{}, f func(*contention, context.Context) (backend.Record, error)) reply {
	if before != nil {
		<-before
	}
	cctx, cancel := detach(ctx)
	if d, ok := cctx.Deadline(); cctx.Err() != nil || ok && time.Until(d) < qc.giveBack {
		cancel()
		cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), qc.giveBack)
	}
	defer cancel()
	rec, err := f(qc.subs[in.index], cctx)
	return reply{in: in, rec: rec, err: err}
}

// detach returns a context with ctx's values and deadline that ctx's cancellation does not
// end; without a deadline, ctx itself (a call must end).
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), d)
	}
	return context.WithCancel(ctx)
}

// pastDeadline reports whether ctx has a deadline and it has passed.
func pastDeadline(ctx context.Context) bool {
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// awaitCall waits, within ctx, for the call on in that closes done (nil: none) to return.
func awaitCall(ctx context.Context, in *instance, done chan struct{}) error {
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("simba/redis: instance %d still busy with an earlier call: %w", in.index, ctx.Err())
	}
}

// idle reports whether the last call on instance i's contention has returned.
func (qc *quorumContention) idle(i int) bool {
	if qc.done[i] == nil {
		return true
	}
	select {
	case <-qc.done[i]:
		return true
	default:
		return false
	}
}

// background runs f in a goroutine that Close joins, unless the Quorum is closed.
func (q *Quorum) background(f func()) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed.Load() {
		return false
	}
	q.calls.Go(f)
	return true
}

// canceled reports whether ctx was cancelled (the service stopping) rather than having
// reached its deadline (an instance too slow).
func canceled(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// owned counts the answers that name this contender.
func (qc *quorumContention) owned(replies []reply) []reply {
	var mine []reply
	for _, r := range replies {
		if r.err == nil && r.rec.Owner == qc.id {
			mine = append(mine, r)
		}
	}
	return mine
}

// Acquire acquires or renews on every available instance and owns the mutex if a quorum
// says so.
func (qc *quorumContention) Acquire(ctx context.Context) (backend.Record, error) {
	if err := qc.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	// Stop waiting as soon as a quorum is ours: a dead instance must not eat the budget.
	sent := time.Now()
	replies := qc.each(ctx, qc.q.available(sent), (*contention).Acquire,
		func(got []reply) bool { return len(qc.owned(got)) >= qc.q.quorum })
	qc.listenEverywhere()
	mine := qc.owned(replies)
	if len(mine) >= qc.q.quorum {
		rec := qc.own(ctx, mine)
		qc.until = sent.Add(rec.TTL) // simba counts from an earlier send time
		return rec, nil
	}
	if qc.owning && time.Now().Before(qc.until) {
		return qc.renewalShort(replies, len(mine))
	}
	qc.owning, qc.token = false, 0
	if len(mine) > 0 {
		// Not a quorum: give back what was taken, so that another contender can make one.
		// Waiting for a slow instance may have used up ctx; the give-back gets a budget of
		// its own.
		gctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), qc.giveBack)
		qc.each(gctx, instancesOf(mine), release, nil)
		cancel()
	}
	return qc.others(replies)
}

// renewalShort answers a renewal that did not reach the quorum while the tenure may still
// be this contender's, mine of its instances having answered that they are: it gives
// nothing back. Unless the instances that answered otherwise leave no quorum for it, it
// returns an error: the answer is unknown, the service keeps believing until its local
// TTL end, and the keys kept stop anyone else from making a quorum meanwhile.
func (qc *quorumContention) renewalShort(replies []reply, mine int) (backend.Record, error) {
	unknown := len(qc.q.instances) - len(replies)
	for _, r := range replies {
		if r.err != nil {
			unknown++
		}
	}
	if mine+unknown >= qc.q.quorum {
		_, err := qc.others(replies)
		if err == nil {
			err = fmt.Errorf("simba/redis: renewed on %d of %d instances, need %d: %w",
				mine, len(qc.q.instances), qc.q.quorum, ErrTooFewInstances)
		}
		return backend.Record{}, err
	}
	rec, err := qc.others(replies)
	if err == nil {
		qc.owning, qc.token = false, 0 // the tenure is over; what it kept lapses
	}
	return rec, err
}

// listenEverywhere subscribes every instance once one has: a waiter must hear a release
// on whichever instance it happens, including those its attempt did not reach.
// A contention with a call still under way is left to its own next call.
func (qc *quorumContention) listenEverywhere() {
	var idle []*contention
	for i, c := range qc.subs {
		if qc.idle(i) {
			idle = append(idle, c)
		}
	}
	for _, c := range idle {
		if c.joined {
			for _, other := range idle {
				if !other.joined {
					other.join()
				}
			}
			return
		}
	}
}

// own records a tenure held on the quorum mine and returns its record.
func (qc *quorumContention) own(ctx context.Context, mine []reply) backend.Record {
	rec := backend.Record{Owner: qc.id, TTL: mine[0].rec.TTL, Transition: mine[0].rec.Transition}
	var high uint64
	for _, r := range mine {
		rec.TTL = min(rec.TTL, r.rec.TTL)
		rec.Transition = min(rec.Transition, r.rec.Transition)
		high = max(high, r.rec.Token)
	}
	rec.TTL -= quorumDrift
	switch {
	case !qc.owning: // a new tenure
		// Instances this contender kept the keys of since its last tenure (a renewal that
		// fell short keeps them) answer that tenure's token again: the new one exceeds it,
		// and its first renewal writes it back.
		high = max(high, qc.last+1)
		qc.owning, qc.token, qc.raised, qc.last = true, high, false, high
	case !qc.raised: // its first renewal: off the acquiring caller's path
		qc.raise(ctx, mine)
		qc.raised = true
	}
	rec.Token = qc.token
	return rec
}

// raise writes the tenure's token back to the token keys of its quorum. A tenure does it at its
// first renewal, or within its release if that comes first; one that ends by a crash
// before either leaves it undone, and the next tenure's token then comes from the shared
// instance's clock, which has moved on by at least ttl + transition while the lease
// lapsed.
func (qc *quorumContention) raise(ctx context.Context, mine []reply) {
	token := strconv.FormatUint(qc.token, 10)
	for _, r := range qc.each(ctx, instancesOf(mine), func(c *contention, ctx context.Context) (backend.Record, error) {
		return backend.Record{}, c.b.scripts.run(ctx, raiseScript, c.keys, c.id, token).Err()
	}, nil) {
		if r.err != nil {
			r.in.backend.log.Warn("simba/redis: could not raise a quorum instance's token key; the next tenure's token may not exceed this one's if its quorum shares only this instance",
				"instance", r.in.index, "mutex", qc.mutex, "token", qc.token, "err", r.err)
		}
	}
}

// others returns the owner a quorum-less attempt saw: the owner most instances name,
// reported only while someone else could hold a quorum. When too few instances answered
// to tell, it returns an error.
func (qc *quorumContention) others(replies []reply) (backend.Record, error) {
	votes := map[string]int{}
	best := map[string]backend.Record{}
	var errs []error
	answered := 0
	for _, r := range replies {
		if r.err != nil {
			errs = append(errs, instanceError(r.in, r.err))
			continue
		}
		answered++
		if o := r.rec.Owner; o != "" && o != qc.id {
			votes[o]++
			if b, ok := best[o]; !ok || r.rec.Transition > b.Transition {
				best[o] = r.rec
			}
		}
	}
	if answered < qc.q.quorum {
		return backend.Record{}, qc.q.shortOf(fmt.Sprintf("%d of %d instances answered, need %d: %s",
			answered, len(qc.q.instances), qc.q.quorum, joined(errs)), errs, ErrTooFewInstances)
	}
	owner, n := "", 0
	for o, v := range votes {
		if v > n {
			owner, n = o, v
		}
	}
	if owner == "" {
		return backend.Record{}, nil
	}
	rec := best[owner]
	rec.Token = 0 // a quorum-wide token exists only for the owner itself
	return rec, nil
}

// Release releases on every instance, available or not; on one whose last call has not
// returned, once it has (in the background if ctx ends first: Close waits for it).
func (qc *quorumContention) Release(ctx context.Context) error {
	if qc.q.closed.Load() {
		return fmt.Errorf("simba/redis: %w", simba.ErrClosed)
	}
	var raiseTo []any
	if qc.owning && !qc.raised {
		raiseTo = []any{strconv.FormatUint(qc.token, 10)}
	}
	qc.owning, qc.token = false, 0
	var errs []error
	released := 0
	for _, r := range qc.eachPatiently(ctx, qc.q.instances, func(c *contention, ctx context.Context) (backend.Record, error) {
		return backend.Record{}, c.release(ctx, raiseTo...)
	}) {
		if r.err != nil {
			errs = append(errs, instanceError(r.in, r.err))
			continue
		}
		released++
	}
	if released < qc.q.quorum {
		return qc.q.shortOf(fmt.Sprintf("released on %d of %d instances: %s", released, len(qc.q.instances), joined(errs)), errs)
	}
	return nil
}

// Lookup reads the owner on every available instance: an owner only if a quorum names it.
func (qc *quorumContention) Lookup(ctx context.Context) (backend.Record, error) {
	if err := qc.usable(ctx); err != nil {
		return backend.Record{}, err
	}
	replies := qc.each(ctx, qc.q.available(time.Now()), (*contention).Lookup, nil)
	rec, err := qc.others(replies)
	if err != nil || rec.Owner == "" {
		return rec, err
	}
	n := 0
	for _, r := range replies {
		if r.err == nil && r.rec.Owner == rec.Owner {
			n++
		}
	}
	if n < qc.q.quorum {
		return backend.Record{}, nil
	}
	return rec, nil
}

// OthersWaiting reports whether any available instance has another contender waiting.
func (qc *quorumContention) OthersWaiting(ctx context.Context) (bool, error) {
	var errs []error
	for _, in := range qc.q.available(time.Now()) {
		waiting, err := qc.othersWaitingOn(ctx, in)
		if err != nil {
			errs = append(errs, instanceError(in, err))
			continue
		}
		if waiting {
			return true, nil
		}
	}
	if len(errs) > 0 {
		return false, qc.q.shortOf(joined(errs), errs)
	}
	return false, nil
}

// othersWaitingOn asks in whether another contender waits, once the call still under way
// on its contention, if any, has returned.
func (qc *quorumContention) othersWaitingOn(ctx context.Context, in *instance) (bool, error) {
	if err := awaitCall(ctx, in, qc.done[in.index]); err != nil {
		return false, err
	}
	return qc.subs[in.index].OthersWaiting(ctx)
}

// StopContend stops the contention on every instance; on one whose call is still under
// way, once that call returns.
func (qc *quorumContention) StopContend(ctx context.Context) error {
	for i, c := range qc.subs {
		done := qc.done[i]
		if qc.idle(i) || !qc.q.background(func() {
			<-done
			_ = c.StopContend(ctx)
		}) {
			if done != nil {
				<-done // closed: Close is joining the call
			}
			_ = c.StopContend(ctx)
		}
	}
	return nil
}

// usable checks the backend and the minimum of available instances before any I/O.
func (qc *quorumContention) usable(ctx context.Context) error {
	if qc.q.closed.Load() {
		return fmt.Errorf("simba/redis: %w", simba.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("simba/redis: %w", err)
	}
	if n := qc.q.Available(); n < qc.q.minAvailable {
		return fmt.Errorf("simba/redis: %d of %d instances available, need %d: %w",
			n, len(qc.q.instances), qc.q.minAvailable, ErrTooFewInstances)
	}
	return nil
}

// release is Release in the shape each calls.
func release(c *contention, ctx context.Context) (backend.Record, error) {
	return backend.Record{}, c.Release(ctx)
}

func instancesOf(replies []reply) []*instance {
	out := make([]*instance, len(replies))
	for i, r := range replies {
		out[i] = r.in
	}
	return out
}
