package simba

import "strconv"

// Status is a service's lifecycle status; the zero Status is StatusInitial.
type Status int32

// The lifecycle statuses.
const (
	StatusInitial Status = iota
	StatusStarting
	StatusRunning
	StatusStopping
)

// Active reports whether the status is StatusStarting or StatusRunning.
func (s Status) Active() bool { return s == StatusStarting || s == StatusRunning }

// String returns the status's upper-case name, as upstream Simba prints it.
func (s Status) String() string {
	switch s {
	case StatusInitial:
		return "INITIAL"
	case StatusStarting:
		return "STARTING"
	case StatusRunning:
		return "RUNNING"
	case StatusStopping:
		return "STOPPING"
	}
	return "Status(" + strconv.Itoa(int(s)) + ")"
}
