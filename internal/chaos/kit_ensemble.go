package chaos

import (
	"time"

	"github.com/simba-go/simba/internal/testserver"
)

// The ZooKeeper backend on a three-server ensemble (issue 16): the scenarios of its own
// (scenarios_ensemble_test.go) cut a follower off from its leader, kill the leader and
// restart every server in turn, each contender connected to one server of its choosing.
func init() {
	register(Kit{
		Name:    "zookeeper-ensemble",
		Letter:  "E",
		Session: true,
		Server: func(dir string) (ServerProcess, error) {
			return testserver.NewZooKeeperEnsemble(dir, 3, testserver.ZooKeeperOptions{TickTime: 100 * time.Millisecond})
		},
		Backend: zookeeperBackend,
		Residue: zookeeperResidue,
		Owner:   zookeeperOwner,
		Short:   []string{"30_follower_cut_from_leader"},
	})
}
