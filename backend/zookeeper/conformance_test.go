package zookeeper_test

import (
	"testing"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/tck"
)

// The conformance suite, each backend with a session of its own (2s), against the real
// server. A vanished backend's session expires after 2s, inside the suite's take-over
// bound of 3.5s, so the suite runs at its own time scale.
func TestConformance(t *testing.T) {
	needServer(t)
	tck.Run(t, func(t *testing.T) simba.Backend { return newBackend(t) })
}

// The suite again with every mutex watched per node, as a backend watches a queue longer
// than its limit, and every mutex with a go-zookeeper other than v1.0.4 or on a server
// older than 3.6.
func TestConformancePerNode(t *testing.T) {
	needServer(t)
	tck.Run(t, func(t *testing.T) simba.Backend { return newBackend(t, perNode) })
}
