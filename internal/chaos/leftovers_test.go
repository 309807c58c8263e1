package chaos

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simba-go/simba/internal/goroutine"
)

// The goroutine checks of a scenario see only what the scenario started. The stores'
// scenarios run in parallel, so a snapshot of the whole process also holds what another
// store's scenario does meanwhile (its test server starting, its contenders' calls); goleak
// cannot tell the two apart. A goroutine counts here when its stack runs code of the
// library under test for this store (the core, the store's backend and client) and none
// of another store's, and it was not there at the baseline.

// libraries names the packages each store's goroutines run: the backend and its client.
// The two SQL stores share the backend and database/sql; only their drivers tell them
// apart.
var libraries = map[string][]string{
	"redis":     {"github.com/simba-go/simba/backend/redis", "github.com/redis/go-redis/"},
	"mariadb":   {"github.com/simba-go/simba/backend/jdbc", "github.com/go-sql-driver/mysql", "database/sql."},
	"postgres":  {"github.com/simba-go/simba/backend/jdbc", "github.com/jackc/pgx/", "database/sql."},
	"zookeeper": {"github.com/simba-go/simba/backend/zookeeper", "github.com/go-zookeeper/zk"},
}

// core is the prefix of the core package's functions ("github.com/simba-go/simba.(*Service).stop").
const core = "github.com/simba-go/simba."

// goroutineStacks returns the stack of every goroutine, by number.
func goroutineStacks() map[uint64]string {
	out := map[uint64]string{}
	for _, block := range goroutine.Stacks() {
		header, _, _ := strings.Cut(block, " [")
		id, err := strconv.ParseUint(strings.TrimPrefix(header, "goroutine "), 10, 64)
		if err == nil {
			out[id] = block
		}
	}
	return out
}

// ownedBy reports whether stack runs code of the library under test for store: none of
// another store's own packages (those store does not share).
func ownedBy(stack, store string) bool {
	for other, pkgs := range libraries {
		for _, p := range pkgs {
			if other != store && strings.Contains(stack, p) && !slices.Contains(libraries[store], p) {
				return false
			}
		}
	}
	if strings.Contains(stack, core) {
		return true
	}
	for _, p := range libraries[store] {
		if strings.Contains(stack, p) {
			return true
		}
	}
	return false
}

// goroutineBaseline records the goroutines that exist now.
func goroutineBaseline() map[uint64]bool {
	seen := map[uint64]bool{}
	for id := range goroutineStacks() {
		seen[id] = true
	}
	return seen
}

// leftovers returns the stacks of the goroutines of store's library that were not in
// baseline and are still there after waiting up to wait for them to end.
func leftovers(store string, baseline map[uint64]bool, wait time.Duration) []string {
	deadline := time.Now().Add(wait)
	for {
		var left []string
		for id, stack := range goroutineStacks() {
			if !baseline[id] && ownedBy(stack, store) {
				left = append(left, stack)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}
