package main

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
)

// machine describes where a run happened.
type machine struct {
	CPU       string            `json:"cpu"`
	Cores     int               `json:"cores"`
	Kernel    string            `json:"kernel"`
	LoadStart string            `json:"load_start"` // /proc/loadavg: 1, 5 and 15 minutes
	LoadEnd   string            `json:"load_end"`
	Go        string            `json:"go"`
	Simba     string            `json:"simba"` // commit of the working tree
	Redis     string            `json:"redis,omitempty"`
	MariaDB   string            `json:"mariadb,omitempty"`
	Postgres  string            `json:"postgres,omitempty"`
	ZooKeeper string            `json:"zookeeper,omitempty"`
	Etcd      string            `json:"etcd,omitempty"`
	Modules   map[string]string `json:"modules"` // the peers' and clients' module versions
}

func describeMachine() machine {
	m := machine{
		CPU:       cpuModel(),
		Cores:     runtime.NumCPU(),
		Kernel:    strings.TrimSpace(readFile("/proc/sys/kernel/osrelease")),
		LoadStart: loadAverage(),
		Go:        runtime.Version(),
		Simba:     simbaCommit(),
		Modules:   map[string]string{},
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/go-redsync/redsync/v4", "github.com/bsm/redislock", "github.com/go-zookeeper/zk",
				"github.com/redis/go-redis/v9", "github.com/go-sql-driver/mysql", "github.com/jackc/pgx/v5":
				m.Modules[d.Path] = d.Version
			}
		}
	}
	return m
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// cpuModel returns the model name of the first processor in /proc/cpuinfo.
func cpuModel() string {
	sc := bufio.NewScanner(strings.NewReader(readFile("/proc/cpuinfo")))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// loadAverage returns the 1, 5 and 15 minute load averages.
func loadAverage() string {
	f := strings.Fields(readFile("/proc/loadavg"))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// simbaCommit names the commit of the library's working tree (the git repository around
// the working directory), marked when the library's code differs from it, by asking git
// (read-only); "unknown" without git.
func simbaCommit() string {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "unknown"
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	commit := strings.TrimSpace(string(out))
	// Changes to the library's code, not to this program, its results or tests.
	st, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".",
		":(exclude)bench", ":(exclude)README.md", ":(exclude,glob)**/*_test.go").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		commit += " + uncommitted changes"
	}
	return commit
}
