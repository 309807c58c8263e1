package chaos

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/simba-go/simba"
)

// every is a Timetable of the multiples of d since the Unix epoch: the same instants on
// every process.
type every time.Duration

func (d every) Next(t time.Time) time.Time {
	return t.Truncate(time.Duration(d)).Add(time.Duration(d))
}

// runScheduled runs a contender as a simba.Scheduler on a Timetable of SlotEvery until
// commands closes or says "exit": "start" starts it, "stop" stops it. Its leadership is
// logged as a service's tenure (acquired, lost, released), and each run it starts as a
// slot run (Token, Note: the slot's Unix nanoseconds), WorkPause before the run ends.
func runScheduled(ctx context.Context, cfg ContenderConfig, b simba.Backend, log *Log, commands <-chan string) error {
	opts := []simba.SchedulerOption{simba.WithTTL(cfg.TTL), simba.WithTransition(cfg.Transition),
		simba.WithContenderID(cfg.ID), simba.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		simba.WithLeaderHooks(func(ctx context.Context, leader simba.Owner) {
			log.Add(KindAcquired, leader.Token, 0, "")
			context.AfterFunc(ctx, func() { log.Add(KindLost, leader.Token, 0, context.Cause(ctx).Error()) })
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
	s, err := simba.NewScheduler(b, cfg.Mutex, simba.Schedule{Timetable: every(cfg.SlotEvery)}, work, opts...)
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
		case "exit":
			return nil
		}
	}
	return nil
}

// SlotsRunTwice returns the slots (Unix nanoseconds) that more than one run started, with
// how many did, and the number of slots run.
func SlotsRunTwice(events []Event) (twice map[string]int, slots int) {
	runs := map[string]int{}
	for _, e := range events {
		if e.Kind == KindSlotRun {
			runs[e.Note]++
		}
	}
	twice = map[string]int{}
	for slot, n := range runs {
		if n > 1 {
			twice[slot] = n
		}
	}
	return twice, len(runs)
}
