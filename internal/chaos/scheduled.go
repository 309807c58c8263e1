package chaos

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/simba-go/simba"
)

// runScheduled runs a contender as a simba.Scheduler of period SlotEvery until commands
// closes or says "exit": "start" starts it, "stop" stops it, "yield" steps down and goes
// on contending. Its leadership is logged as a service's tenure (acquired, lost,
// released), and each run as it starts (Token; Note: the slot's Unix nanoseconds), a
// WorkPause before the run ends.
func runScheduled(ctx context.Context, cfg ContenderConfig, b simba.Backend, log *Log, commands <-chan string) error {
	opts := []simba.SchedulerOption{simba.WithTTL(cfg.TTL), simba.WithTransition(cfg.Transition),
		simba.WithContenderID(cfg.ID), simba.WithLogger(cfg.logger()),
		simba.WithLeaderHooks(func(ctx context.Context, leader simba.Owner) {
			log.Acquired(ctx, leader.Token)
		}, func(leader simba.Owner, _ error) {
			log.Add(KindReleased, leader.Token, 0, "")
		})}
	if cfg.CallTimeout > 0 {
		opts = append(opts, simba.WithCallTimeout(cfg.CallTimeout))
	}
	work := func(ctx context.Context, leader simba.Owner) {
		at, _ := simba.ScheduledAt(ctx)
		log.Add(KindSlotRun, leader.Token, 0, strconv.FormatInt(at.UnixNano(), 10))
		select {
		case <-ctx.Done():
		case <-time.After(cfg.WorkPause):
		}
	}
	s, err := simba.NewScheduler(b, cfg.Mutex, simba.Schedule{Period: cfg.SlotEvery}, work, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	for cmd := range commands {
		switch cmd {
		case "start":
			log.Add(KindStart, 0, 0, "")
			err := startRetrying(ctx, s, log)
			log.Add(KindStarted, 0, 0, errText(err))
		case "stop":
			log.Add(KindStop, 0, 0, "")
			log.Add(KindStopped, 0, 0, errText(s.Stop(ctx)))
		case "yield":
			log.Add(KindYield, 0, 0, "")
			yctx, cancel := context.WithTimeout(ctx, cfg.TTL+cfg.Transition)
			err := s.Yield(yctx)
			cancel()
			log.Add(KindYielded, 0, 0, errText(err))
		case "exit":
			return nil
		}
	}
	return nil
}

// slotRun is a Scheduler's run as its contender logged it.
type slotRun struct {
	proc string
	slot time.Time // the instant it was scheduled for (wall clock)
}

// SlotsTooClose returns the runs of a Scheduler of period p (its events) that were scheduled
// less than p after the run before them, each with the run before, and the number of runs.
func SlotsTooClose(events []Event, p time.Duration) (near [][2]slotRun, runs int) {
	var all []slotRun
	for _, e := range events {
		if e.Kind != KindSlotRun {
			continue
		}
		ns, err := strconv.ParseInt(e.Note, 10, 64)
		if err != nil {
			continue
		}
		all = append(all, slotRun{proc: e.Proc, slot: time.Unix(0, ns)})
	}
	slices.SortFunc(all, func(a, b slotRun) int { return a.slot.Compare(b.slot) })
	for i := 1; i < len(all); i++ {
		if all[i].slot.Sub(all[i-1].slot) < p {
			near = append(near, [2]slotRun{all[i-1], all[i]})
		}
	}
	return near, len(all)
}
