package chaos

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/simba-go/simba/internal/mutant"
)

// mutationRun is one deliberate bug of scenario 27 (mutations) and the scenario that must
// catch it.
type mutationRun struct {
	name     string // the patch, see internal/mutant
	store    string // the store and scenario that must catch it
	scenario string
	expected string // the assertion that must fail, as the checker names it
	full     bool   // only in the full plan (make chaos), to keep make test's time
	ran      bool   // the mutated scenario ran
	caught   bool
}

var mutations = []*mutationRun{
	{name: "no-local-deadline", store: "redis", scenario: "11_owner_cut_off", expected: "C2"},
	{name: "reply-time-lease", store: "redis", scenario: "13_late_replies_then_cut", expected: "C2"},
	{name: "unfenced-referee", store: "redis", scenario: "09_long_pause", expected: "C4"},
	{name: "latest-version-token", store: "mariadb", scenario: "01_steady", expected: "C3"},
	{name: "sequence-token", store: "zookeeper", scenario: "21_container_reaped", expected: "C3"},
	{name: "queue-second-owns", store: "zookeeper", scenario: "10_churn_soak", expected: "C2"},
	{name: "follower-heartbeat", store: "zookeeper-ensemble", scenario: "30_follower_cut_from_leader", expected: "C2"},
	// The holds' mutations: a Redis semaphore that admits one holder too many, a Redis
	// reader admitted beside a writer, a ZooKeeper semaphore that admits one too many, a
	// lease whose context outlives its hold.
	{name: "redis-hold-permit-overflow", store: "redis", scenario: "51_holds_kill_permit_holder", expected: "C2", full: true},
	{name: "redis-hold-reader-beside-writer", store: "redis", scenario: "51_holds_kill_reader_or_writer", expected: "C2", full: true},
	{name: "zookeeper-hold-permit-overflow", store: "zookeeper", scenario: "51_holds_kill_permit_holder", expected: "C2", full: true},
	{name: "hold-lease-outlives", store: "redis", scenario: "54_holds_replies_lost", expected: "C2", full: true},
	{name: "yield-keeps-belief", store: "redis", scenario: "62_yielder_paused_or_killed", expected: "C2", full: true},
	// A Redis hand-off that grants the head of the line, not the waiter it names.
	{name: "handoff-grants-head", store: "redis", scenario: "63_handoff_past_the_head", expected: "H1", full: true},
	// A Scheduler that ignores the slot recorded last runs at once when it leads.
	{name: "slot-last-ignored", store: "redis", scenario: "66_slots_across_leader_changes", expected: "S1", full: true},
}

// testMutations builds, for each mutation, the suite from a copy of the module with the
// mutation's patch applied (internal/mutant), and runs the mutation's scenario with it:
// each run must fail, on the expected assertion. A checker that never fails proves nothing.
func testMutations(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			if m.full && !full() {
				t.Skip("in the full plan only (SIMBA_CHAOS=full)")
			}
			bin := filepath.Join(t.TempDir(), "chaos.mutated")
			if err := mutant.Build(root, t.TempDir(), m.name, "./internal/chaos", bin); err != nil {
				t.Fatal(err)
			}
			// The harness keeps a failed run's logs in the temporary directory, and a
			// mutation's run fails: a directory of this test's, removed when it ends. Not
			// t.TempDir(): a MariaDB server's socket path under it would be too long.
			tmp, err := os.MkdirTemp("", "simba-mutation-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = os.RemoveAll(tmp) })
			var output string
			m.ran, m.caught, output = mutant.Check(bin, "TestChaos/"+m.store+"/"+m.scenario, m.expected,
				"SIMBA_MUTATION="+m.name, "SIMBA_CHAOS_REPORT="+filepath.Join(t.TempDir(), "report.md"), "TMPDIR="+tmp)
			switch {
			case !m.ran:
				t.Errorf("mutation %s: the scenario %s/%s did not run:\n%s", m.name, m.store, m.scenario, mutant.Tail(output, 30))
			case !m.caught:
				t.Errorf("mutation %s was not caught by %s/%s (%s expected):\n%s", m.name, m.store, m.scenario, m.expected, mutant.Tail(output, 40))
			default:
				t.Logf("mutation %s caught: %s/%s failed on %s", m.name, m.store, m.scenario, m.expected)
			}
		})
	}
}
