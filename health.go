package simba

import (
	"encoding/json"
	"net/http"
)

// Health is the state of a service (or Scheduler) for readiness and liveness probes.
type Health struct {
	// Mutex is the mutex name.
	Mutex string `json:"mutex"`
	// Contender is the contender's ID; empty for a retrieval service.
	Contender string `json:"contender,omitempty"`
	// Status is the lifecycle status: StatusRunning while it contends (or observes).
	Status Status `json:"-"`
	// Leading reports whether this contender believes it owns the mutex now.
	Leading bool `json:"leading"`
	// Owner is the owner's ID as the service believes it now; empty when none is known.
	Owner string `json:"owner"`
	// Err is the error of the last store call (Service.Err): nil when the store answered.
	Err error `json:"-"`
}

// Healthy reports whether the service runs and its last store call succeeded: its store
// is reachable and contention goes on.
func (h Health) Healthy() bool { return h.Status == StatusRunning && h.Err == nil }

// MarshalJSON encodes the health with its status as a string and its error as a message,
// and "healthy" as Healthy says.
func (h Health) MarshalJSON() ([]byte, error) {
	type plain Health
	var msg string
	if h.Err != nil {
		msg = h.Err.Error()
	}
	return json.Marshal(struct {
		plain
		Status  string `json:"status"`
		Healthy bool   `json:"healthy"`
		Error   string `json:"error,omitempty"`
	}{plain(h), h.Status.String(), h.Healthy(), msg})
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
	}
}

// Health returns the scheduler's state now; see Service.Health.
func (s *Scheduler) Health() Health { return s.svc.Health() }

// HealthReporter is what HealthHandler asks: *Service and *Scheduler.
type HealthReporter interface {
	Health() Health
}

// HealthHandler returns an http.Handler for readiness and liveness probes of services and
// Schedulers. It answers 200 OK when every one is Healthy (running, its last store call
// answered), and 503 Service Unavailable otherwise. With the query parameter "leading"
// (/healthz?leading), it also requires every one to lead: a probe that only the leader
// passes, to route traffic to it. The body is a JSON array of the Health of each, in the
// order given, for people and dashboards. A nil entry is reported as unhealthy.
//
// A store outage makes the probe fail while the service keeps retrying; use it for
// readiness rather than liveness unless restarting the process is the cure you want.
func HealthHandler(services ...HealthReporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, leading := r.URL.Query()["leading"]
		code := http.StatusOK
		states := make([]Health, 0, len(services))
		for _, s := range services {
			h := Health{Err: invalid("service", nil, "must not be nil")}
			if !isNil(s) {
				h = s.Health()
			}
			if !h.Healthy() || (leading && !h.Leading) {
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
