package simba

import (
	"encoding/json"
	"net/http"
	"time"
)

// Health is the state of a Service, Scheduler, Locker or Mutexes, for probes.
type Health struct {
	Mutex     string        `json:"mutex"`               // empty for a Mutexes, which serves many
	Contender string        `json:"contender,omitempty"` // empty for a retrieval service
	Status    Status        `json:"-"`                   // a Locker or Mutexes runs until Close
	Leading   bool          `json:"leading"`             // it owns the mutex (a Mutexes: any)
	Owner     string        `json:"owner"`               // the owner it believes in; empty: none known
	Err       error         `json:"-"`                   // of the last store call; nil: answered
	Overdue   time.Duration `json:"-"`                   // a leader's renewal overdue: its loop is stuck
}

// Healthy reports whether it runs and its last store call succeeded.
func (h Health) Healthy() bool { return h.Status == StatusRunning && h.Err == nil }

// MarshalJSON adds "status", "healthy", "error" and "renewal_overdue" as text.
func (h Health) MarshalJSON() ([]byte, error) {
	type plain Health
	var msg, overdue string
	if h.Err != nil {
		msg = h.Err.Error()
	}
	if h.Overdue > 0 {
		overdue = h.Overdue.String()
	}
	return json.Marshal(struct {
		plain
		Status  string `json:"status"`
		Healthy bool   `json:"healthy"`
		Error   string `json:"error,omitempty"`
		Overdue string `json:"renewal_overdue,omitempty"`
	}{plain(h), h.Status.String(), h.Healthy(), msg, overdue})
}

// Health returns the service's state now.
func (s *Service) Health() Health {
	return Health{
		Mutex:     s.mutex,
		Contender: s.id,
		Status:    s.Status(),
		Leading:   s.IsOwner(),
		Owner:     s.Owner().ID,
		Err:       s.Err(),
		Overdue:   s.overdue(),
	}
}

// Health returns the scheduler's state now.
func (s *Scheduler) Health() Health { return s.svc.Health() }

// HealthReporter (Service, Scheduler, Locker, Mutexes) feeds HealthHandler.
type HealthReporter interface {
	Health() Health
}

var (
	_ HealthReporter = (*Service)(nil)
	_ HealthReporter = (*Scheduler)(nil)
	_ HealthReporter = (*Locker)(nil)
	_ HealthReporter = (*Mutexes)(nil)
)

// HealthHandler serves each Health as a JSON array, with 503 if one fails the probe:
// readiness (Healthy; nil is not), ?leading (and Leading), or liveness, ?live[=5s]
// (Overdue not beyond the tolerance; an outage passes).
func HealthHandler(services ...HealthReporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		_, leading := q["leading"]
		_, live := q["live"]
		var tolerance time.Duration
		if v := q.Get("live"); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				http.Error(w, "simba: live "+v+": must be a duration >= 0", http.StatusBadRequest)
				return
			}
			tolerance = d
		}
		code := http.StatusOK
		states := make([]Health, 0, len(services))
		for _, s := range services {
			h := Health{Err: invalid("service", nil, "must not be nil")}
			if !isNil(s) {
				h = s.Health()
			}
			switch {
			case live && h.Overdue > tolerance: // a stuck process, which a restart cures
				code = http.StatusServiceUnavailable
			case live:
			case !h.Healthy() || (leading && !h.Leading):
				code = http.StatusServiceUnavailable
			}
			states = append(states, h)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(states)
	})
}
