package redis

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
)

// A Scheduler's slots on a Quorum: each instance keeps the single-instance slot record;
// a majority decides (see Quorum).

var _ backend.SlotRecorder = (*quorumContention)(nil)

// slotReply is one instance's answer to a slot call.
type slotReply struct {
	in   *instance
	slot backend.Slot // LastSlot's answer
	won  bool         // ClaimSlot's answer
	err  error
}

// LastSlot reads the slot record of every available instance in parallel and returns the
// latest of the first quorum to answer: at or after the last slot a claim recorded on a
// quorum. It fails, wrapping ErrTooFewInstances, when fewer than a quorum answered.
func (qc *quorumContention) LastSlot(ctx context.Context) (backend.Slot, error) {
	if err := qc.usable(ctx); err != nil {
		return backend.Slot{}, err
	}
	replies := qc.slotCalls(ctx, qc.q.available(time.Now()), func(c *contention, ctx context.Context) slotReply {
		s, err := c.LastSlot(ctx)
		return slotReply{slot: s, err: err}
	}, func(got []slotReply, pending int) bool {
		read := len(got) - len(failures(got))
		return read >= qc.q.quorum || read+pending < qc.q.quorum
	})
	failed := failures(replies)
	if read := len(replies) - len(failed); read < qc.q.quorum {
		return backend.Slot{}, qc.q.shortOf(fmt.Sprintf("read the last slot on %d of %d instances, need %d: %s",
			read, len(qc.q.instances), qc.q.quorum, joined(failed)), failed, ErrTooFewInstances)
	}
	// A slot claimed on a quorum is on one of these at least (two quorums share an
	// instance, and an instance's record only moves on); a later one was recorded on a
	// minority by a claim that fell short, and a Scheduler that starts after it skips the
	// slots between, which it may: it must never run one twice.
	var last backend.Slot
	for _, r := range replies {
		if r.err == nil && (r.slot.At.After(last.At) || r.slot.At.Equal(last.At) && r.slot.Token > last.Token) {
			last = r.slot
		}
	}
	return last, nil
}

// ClaimSlot runs the single-instance claim on every available instance in parallel and
// reports whether a quorum recorded s. A claim that fell short may stay recorded on a
// minority; when the instances that did not answer could make up a quorum with those that
// recorded it, the outcome is unknown and it fails, wrapping ErrTooFewInstances.
func (qc *quorumContention) ClaimSlot(ctx context.Context, s backend.Slot) (bool, error) {
	if err := qc.usable(ctx); err != nil {
		return false, err
	}
	if _, err := slotNanos(s); err != nil {
		return false, err
	}
	list := qc.q.available(time.Now())
	// Each instance records a slot at most once, and afterwards only later ones with a
	// token not less: its record only moves on, so what it accepts only narrows. Two
	// claims of one slot therefore never both make a quorum (two quorums share an
	// instance), whatever the tokens: with tokens all equal (0 included) the instants
	// alone keep a slot to one quorum. A claim left on a minority makes a later claim of
	// that slot or an earlier one (or a smaller token's) fail there: slots are skipped,
	// none runs twice.
	replies := qc.slotCalls(ctx, list, func(c *contention, ctx context.Context) slotReply {
		won, err := c.ClaimSlot(ctx, s)
		return slotReply{won: won, err: err}
	}, func(got []slotReply, pending int) bool {
		won := recorded(got)
		return won >= qc.q.quorum || won+len(failures(got))+pending < qc.q.quorum
	})
	failed := failures(replies)
	won, unknown := recorded(replies), len(list)-len(replies)+len(failed)
	switch {
	case won >= qc.q.quorum:
		return true, nil
	case won+unknown < qc.q.quorum: // the instances left out were not asked: none recorded s
		return false, nil
	}
	return false, qc.q.shortOf(fmt.Sprintf("claimed the slot on %d of %d instances, need %d, and %d did not answer: %s",
		won, len(qc.q.instances), qc.q.quorum, unknown, joined(failed)), failed, ErrTooFewInstances)
}

// slotCalls calls f on the contention of every instance in list, in parallel, and returns
// the answers that came before enough (given them and the number still under way) held or
// ctx ended. The calls under way then go on in the background, which Close joins, until
// they end, by ctx's deadline at the latest; an instance whose call fails is left out, as
// with each. Unlike each, a slot call does not queue behind the contention's other calls:
// a Scheduler claims slots from a goroutine of its own while the contention renews, and a
// slot call touches only the slot key, in one step.
func (qc *quorumContention) slotCalls(ctx context.Context, list []*instance, f func(*contention, context.Context) slotReply, enough func(got []slotReply, pending int) bool) []slotReply {
	blame := ctx.Err() == nil // a call made with no time left says nothing of its instance
	answers := make(chan slotReply, len(list))
	for _, in := range list {
		if !qc.q.background(func() {
			cctx, cancel := detach(ctx)
			defer cancel()
			r := f(qc.subs[in.index], cctx)
			r.in = in
			// With a deadline the call ran to it, whatever ctx's cancellation: its
			// failure is the instance's. Without one, a cancellation ended it.
			if _, detached := ctx.Deadline(); blame && (detached || !canceled(ctx)) && leaveOutAfter(r.err) {
				qc.q.leaveOut(in, r.err)
			}
			answers <- r
		}) {
			answers <- slotReply{in: in, err: fmt.Errorf("simba/redis: %w", simba.ErrClosed)}
		}
	}
	var got []slotReply
	for len(got) < len(list) && !enough(got, len(list)-len(got)) {
		select {
		case r := <-answers:
			got = append(got, r)
		case <-ctx.Done():
			return got
		}
	}
	return got
}

// failures returns the errors of the replies that failed, each naming its instance.
func failures(replies []slotReply) []error {
	var errs []error
	for _, r := range replies {
		if r.err != nil {
			errs = append(errs, instanceError(r.in, r.err))
		}
	}
	return errs
}

// recorded counts the replies of instances that recorded the claimed slot.
func recorded(replies []slotReply) int {
	n := 0
	for _, r := range replies {
		if r.err == nil && r.won {
			n++
		}
	}
	return n
}
