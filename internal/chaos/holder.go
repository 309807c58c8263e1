package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/simba-go/simba"
)

// HoldModel is what the contenders of a hold scenario hold: a semaphore of Permits
// permits, or (Permits zero) a read-write lock.
type HoldModel struct {
	Permits int
}

// Hold modes, as events and the referee name them.
const (
	modePermit = "p" // a semaphore's permit
	modeRead   = "s" // a read-write lock's read (shared) hold
	modeWrite  = "x" // a read-write lock's write (exclusive) hold
)

// exclusive reports whether a hold of mode admits nobody beside it.
func exclusive(mode string) bool { return mode == modeWrite }

// holder is a contender that holds a semaphore's permit or a read-write lock, again and
// again, through simba's Lease API: it calls Acquire, acts on the referee with the hold's
// token while the lease's context lives and for at most HoldFor, and releases. Every
// third hold of a read-write lock is a write hold, every second of those downgraded
// halfway.
type holder struct {
	cfg ContenderConfig
	log *Log
	ref *RefereeClient
	sem *simba.Semaphore
	rw  *simba.RWMutex
	seq uint64
}

// runHolder runs a holder until commands closes or says "exit": "start" starts its
// rounds of holds, "stop" ends them (a hold held is released first).
func runHolder(ctx context.Context, cfg ContenderConfig, b simba.Backend, log *Log, ref *RefereeClient, commands <-chan string) error {
	opts := []simba.LockerOption{simba.WithTTL(cfg.TTL), simba.WithTransition(cfg.Transition),
		simba.WithContenderID(cfg.ID), simba.WithLogger(cfg.logger())}
	if cfg.CallTimeout > 0 {
		opts = append(opts, simba.WithCallTimeout(cfg.CallTimeout))
	}
	if cfg.RenewalLead > 0 {
		opts = append(opts, simba.WithRenewalLead(cfg.RenewalLead))
	}
	h := &holder{cfg: cfg, log: log, ref: ref}
	var err error
	if cfg.Hold.Permits > 0 {
		h.sem, err = simba.NewSemaphore(b, cfg.Mutex, cfg.Hold.Permits, opts...)
	} else {
		h.rw, err = simba.NewRWMutex(b, cfg.Mutex, opts...)
	}
	if err != nil {
		return err
	}
	defer func() {
		if h.sem != nil {
			_ = h.sem.Close()
		} else {
			_ = h.rw.Close()
		}
	}()
	var rounds *struct {
		stop context.CancelFunc
		done chan struct{}
	}
	halt := func() {
		if rounds == nil {
			return
		}
		log.Add(KindStop, 0, 0, "")
		rounds.stop()
		<-rounds.done
		log.Add(KindStopped, 0, 0, "")
		rounds = nil
	}
	defer halt()
	for cmd := range commands {
		switch cmd {
		case "start":
			if rounds != nil {
				continue
			}
			log.Add(KindStart, 0, 0, "")
			rctx, stop := context.WithCancel(ctx)
			rounds = &struct {
				stop context.CancelFunc
				done chan struct{}
			}{stop, make(chan struct{})}
			go func(done chan struct{}) {
				defer close(done)
				h.run(rctx)
			}(rounds.done)
			log.Add(KindStarted, 0, 0, "")
		case "stop":
			halt()
		case "exit":
			return nil
		}
	}
	return nil
}

// run holds, round after round, until ctx ends.
func (h *holder) run(ctx context.Context) {
	writes := 0
	// Holders begin their rounds at different phases, so that reads and writes mix.
	phase := int(h.cfg.ID[len(h.cfg.ID)-1])
	for round := 0; ctx.Err() == nil; round++ {
		mode := modePermit
		if h.rw != nil {
			mode = modeRead
			if (round+phase)%3 == 0 {
				mode = modeWrite
			}
		}
		lease, w, err := h.acquire(ctx, mode)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Add(KindRetry, 0, 0, err.Error())
				sleepCtx(ctx, h.cfg.TTL/10)
			}
			continue
		}
		if w == nil {
			h.hold(ctx, lease, mode, h.cfg.HoldFor)
			continue
		}
		writes++
		if writes%2 == 1 {
			h.hold(ctx, lease, mode, h.cfg.HoldFor)
			continue
		}
		if !h.act(ctx, lease, mode, h.cfg.HoldFor/2) || ctx.Err() != nil {
			h.release(lease, mode)
			continue
		}
		// The write hold stops acting before it turns into a read hold: its belief ends
		// here, and the read hold's begins once Downgrade has returned it.
		h.log.Put(Event{At: Now(), Proc: h.cfg.ID, Kind: KindReleased, Token: lease.Token(), Mode: mode})
		dctx, cancel := context.WithTimeout(ctx, h.patience())
		h.log.Put(Event{At: Now(), Proc: h.cfg.ID, Kind: KindAcquire, Mode: modeRead, Deadline: deadlineOf(dctx)})
		r, err := w.Downgrade(dctx)
		cancel()
		if err != nil {
			h.log.Add(KindRetry, 0, 0, "downgrade: "+err.Error())
			h.giveBack(lease)
			continue
		}
		h.hold(ctx, r, modeRead, h.cfg.HoldFor/2)
	}
}

// patience is how long an Acquire may wait for a hold: longer than any fault of a
// scenario keeps the holds taken.
func (h *holder) patience() time.Duration { return 6*(h.cfg.TTL+h.cfg.Transition) + 5*time.Second }

// acquire calls Acquire for a hold of mode, with a deadline, and logs the call; w is the
// write lease of a write hold.
func (h *holder) acquire(ctx context.Context, mode string) (l *simba.Lease, w *simba.WriteLease, err error) {
	actx, cancel := context.WithTimeout(ctx, h.patience())
	defer cancel()
	h.log.Put(Event{At: Now(), Proc: h.cfg.ID, Kind: KindAcquire, Mode: mode, Deadline: deadlineOf(actx)})
	switch mode {
	case modePermit:
		l, err = h.sem.Acquire(actx)
	case modeRead:
		l, err = h.rw.RLock(actx)
	default:
		w, err = h.rw.Lock(actx)
		if err == nil {
			l = w.Lease
		}
	}
	return l, w, err
}

// hold acts with lease for at most d and releases it.
func (h *holder) hold(ctx context.Context, lease *simba.Lease, mode string, d time.Duration) {
	h.act(ctx, lease, mode, d)
	h.release(lease, mode)
}

// act logs the hold's beginning and acts on the referee every WriteEvery while the
// lease's context lives, for at most d or until ctx ends; it reports whether the lease
// lives still.
func (h *holder) act(ctx context.Context, lease *simba.Lease, mode string, d time.Duration) bool {
	tok, lctx := lease.Token(), lease.Context()
	h.log.Put(Event{At: Now(), Proc: h.cfg.ID, Kind: KindAcquired, Token: tok, Mode: mode})
	// The cause goes with the event: the logs a failed scenario keeps say why belief ended.
	context.AfterFunc(lctx, func() {
		h.log.Put(Event{At: Now(), Proc: h.cfg.ID, Kind: KindLost, Token: tok, Mode: mode, Note: context.Cause(lctx).Error()})
	})
	every := h.cfg.WriteEvery
	if every <= 0 {
		every = 20 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.NewTimer(d)
	defer end.Stop()
	for {
		select {
		case <-ctx.Done():
			return lctx.Err() == nil
		case <-lctx.Done():
			return false
		case <-end.C:
			return lctx.Err() == nil
		case <-tick.C:
		}
		if lctx.Err() != nil { // checked right before the act, as a lease's user must
			return false
		}
		if h.cfg.WorkPause > 0 {
			h.log.Add(KindWork, tok, 0, "")
			time.Sleep(h.cfg.WorkPause)
		}
		h.seq++
		if _, err := h.ref.Hold(h.cfg.Mutex, mode, h.cfg.Hold.Permits, tok, h.cfg.ID, h.seq); err != nil {
			h.log.Add(KindError, tok, h.seq, "referee: "+err.Error())
			return lctx.Err() == nil
		}
	}
}

// release logs the end of the hold's belief and gives it back.
func (h *holder) release(lease *simba.Lease, mode string) {
	h.log.Put(Event{At: Now(), Proc: h.cfg.ID, Kind: KindReleased, Token: lease.Token(), Mode: mode})
	h.giveBack(lease)
}

// giveBack releases lease, within a bound: a store that does not answer leaves the hold
// to lapse, and the holder goes on.
func (h *holder) giveBack(lease *simba.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), h.cfg.TTL+h.cfg.Transition)
	defer cancel()
	_ = lease.Release(ctx)
}

// deadlineOf returns ctx's deadline on the clock of Now.
func deadlineOf(ctx context.Context) int64 {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return Now() + int64(time.Until(d))
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (m HoldModel) String() string {
	if m.Permits > 0 {
		return fmt.Sprintf("semaphore of %d permits", m.Permits)
	}
	return "read-write lock"
}
