// Package clock is where simba reads the time and sets its timers, so that tests and the
// simulation can give a process a clock of its own: one that a test pauses, or whose
// timers fire late.
package clock

import "time"

// Clock reads the time and sets timers. Instants it returns carry a monotonic reading when
// the system clock's do, so durations between them are immune to wall-clock steps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own after d, as time.AfterFunc does.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer set by Clock.AfterFunc; its methods behave as those of *time.Timer.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// System is the process's clock: time.Now and time.AfterFunc.
var System Clock = system{}

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
