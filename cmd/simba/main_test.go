package main_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd/etcdurl"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

// The command under test, built by TestMain, and the servers it runs against.
var (
	binary    string
	stores    *testserver.Stores
	storesErr error
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "simba-cli-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, "simba")
		if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			return 1
		}
		if err := etcdurl.Register(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return testserver.RunWithStores(m, prepare, func(s *testserver.Stores, err error) { stores, storesErr = s, err })
	}())
}

// prepare creates simba's table in the SQL stores of s and starts an etcd beside them.
func prepare(ctx context.Context, s *testserver.Stores) error {
	if err := s.CreateTables(ctx); err != nil {
		return err
	}
	return s.StartEtcd(ctx)
}

// result is what one run of the command gave.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the command with args and stdin, and waits for it to exit.
func cli(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "SIMBA_STORE=")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("running simba: %v", err)
	}
	return result{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}

// holding opens the store at raw and holds mutex with a Locker as contender id until the
// test ends (or the returned lease is released).
func holding(t *testing.T, raw, mutex, id string) (*storeurl.Store, *simba.Lease) {
	t.Helper()
	return holdingFor(t, raw, mutex, id, 2*time.Second, time.Second)
}

// holdingFor is holding with the owner's TTL and transition.
func holdingFor(t *testing.T, raw, mutex, id string, ttl, transition time.Duration) (*storeurl.Store, *simba.Lease) {
	t.Helper()
	s, err := storeurl.Open(raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	l, err := simba.NewLocker(s.Backend(), mutex, simba.WithContenderID(id),
		simba.WithTTL(ttl), simba.WithTransition(transition))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	return s, lease
}

// record is the JSON of an owner record, as the command prints it.
type record struct {
	Mutex        string     `json:"mutex"`
	Owner        string     `json:"owner"`
	Token        uint64     `json:"token"`
	TTLAt        *time.Time `json:"ttl_at"`
	TransitionAt *time.Time `json:"transition_at"`
}

func TestGetAndList(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			mutex, id := "cli-get-"+scheme, "holder-"+scheme
			_, lease := holding(t, raw, mutex, id)

			r := cli(t, "", "--store", raw, "get", mutex, "--json")
			require.Equal(t, 0, r.code, r.stderr)
			var got record
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
			assert.Equal(t, mutex, got.Mutex)
			assert.Equal(t, id, got.Owner)
			if got.Token != 0 {
				assert.Equal(t, lease.Token(), got.Token)
			}
			require.NotNil(t, got.TransitionAt)
			assert.True(t, got.TransitionAt.After(time.Now().Add(-time.Second)), "the record is current")

			r = cli(t, "", "get", "--store="+raw, mutex)
			require.Equal(t, 0, r.code, r.stderr)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			require.Len(t, lines, 2, r.stdout)
			assert.Equal(t, []string{"MUTEX", "OWNER", "TOKEN", "HELD", "TTL", "LEFT", "TRANSITION", "LEFT"}, strings.Fields(lines[0]))
			assert.Equal(t, []string{mutex, id}, strings.Fields(lines[1])[:2])

			r = cli(t, "", "--store", raw, "--json", "list")
			require.Equal(t, 0, r.code, r.stderr)
			var all []record
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &all), r.stdout)
			found := false
			for _, rec := range all {
				found = found || (rec.Mutex == mutex && rec.Owner == id)
			}
			assert.True(t, found, "list shows %s owned by %s: %s", mutex, id, r.stdout)

			r = cli(t, "", "--store", raw, "list")
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, mutex)
		})
	}
}

// TestGetShowsOwnerValue: get shows the owner value of the tenure (WithOwnerValue), in
// JSON and as a last column of the table, on a store that keeps values.
func TestGetShowsOwnerValue(t *testing.T) {
	testserver.Need(t, storesErr)
	raw, ok := stores.URLs()["redis"]
	if !ok {
		t.Skip("no Redis")
	}
	const mutex, id, value = "cli-get-value", "holder-value", "10.0.0.7:8080 v1.2.3"
	s, err := storeurl.Open(raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	l, err := simba.NewLocker(s.Backend(), mutex, simba.WithContenderID(id), simba.WithOwnerValue(value))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	_, err = l.Acquire(t.Context())
	require.NoError(t, err)

	r := cli(t, "", "--store", raw, "get", mutex, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var got struct {
		Owner string `json:"owner"`
		Value string `json:"value"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, id, got.Owner)
	assert.Equal(t, value, got.Value)

	r = cli(t, "", "--store", raw, "get", mutex)
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	assert.True(t, strings.HasSuffix(strings.TrimSpace(lines[0]), "VALUE"), lines[0])
	assert.True(t, strings.HasSuffix(lines[1], value), lines[1])
}

func TestRelease(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			mutex, id := "cli-release-"+scheme, "stuck-"+scheme
			// An owner that renews while the command runs makes its release refuse the
			// record it looked up ("renewed since the lookup: look again"), as it must: a
			// 30 s TTL keeps renewals out of the test's way on a loaded machine.
			s, _ := holdingFor(t, raw, mutex, id, 30*time.Second, time.Second)
			owner := func() string {
				o, err := simba.Lookup(t.Context(), s.Backend(), mutex)
				require.NoError(t, err)
				return o.ID
			}

			r := cli(t, "not the name\n", "--store", raw, "release", mutex)
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "not confirmed")
			assert.Contains(t, r.stderr, "fencing", "says what a forced release means for fencing")
			assert.Equal(t, id, owner(), "nothing was released")

			r = cli(t, "", "--store", raw, "release", mutex)
			assert.Equal(t, 1, r.code, "no confirmation on a closed stdin")
			assert.Equal(t, id, owner())

			r = cli(t, mutex+"\n", "--store", raw, "release", mutex)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "released "+mutex+" from "+id)
			assert.Empty(t, owner())

			r = cli(t, "", "--store", raw, "release", mutex, "--yes")
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "nothing to release")

			mutex2 := mutex + "-2"
			holdingFor(t, raw, mutex2, id, 30*time.Second, time.Second) // as above
			r = cli(t, "", "--store", raw, "--yes", "--json", "release", mutex2)
			require.Equal(t, 0, r.code, r.stderr)
			var out struct{ Released record }
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
			assert.Equal(t, id, out.Released.Owner)
		})
	}
}

func TestWatch(t *testing.T) {
	testserver.Need(t, storesErr)
	for _, scheme := range []string{"redis", "zk", "etcd"} {
		t.Run(scheme, func(t *testing.T) {
			raw, mutex := stores.URLs()[scheme], "cli-watch-"+scheme
			cmd := exec.CommandContext(t.Context(), binary, "--store", raw, "--json", "watch", mutex)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var stderr syncBuffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			lines := make(chan record)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					var r record
					if json.Unmarshal(sc.Bytes(), &r) == nil {
						lines <- r
					}
				}
			}()
			next := func(want string) record {
				t.Helper()
				deadline := time.After(20 * time.Second)
				for {
					select {
					case r, ok := <-lines:
						require.True(t, ok, "watch ended early: %s", stderr.String())
						if r.Owner == want {
							return r
						}
					case <-deadline:
						t.Fatalf("watch never showed owner %q; stderr: %s", want, stderr.String())
					}
				}
			}
			next("") // the first line: nobody owns it
			_, lease := holding(t, raw, mutex, "watched-"+scheme)
			r := next("watched-" + scheme)
			assert.Equal(t, lease.Token(), r.Token)
			require.NoError(t, lease.Release(t.Context()))
			next("")

			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			for range lines {
			}
			require.NoError(t, cmd.Wait(), "an interrupt ends watch with status 0: %s", stderr.String())
		})
	}
}

// syncBuffer is a bytes.Buffer that a running command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"get", "m"}, // no store
		{"--store", "redis://127.0.0.1:1", "frobnicate"},
		{"--store", "redis://127.0.0.1:1", "get"},
		{"--store", "redis://127.0.0.1:1", "list", "extra"},
		{"--store", "redis://127.0.0.1:1", "get", "m", "--held"},
		{"--store", "redis://127.0.0.1:1", "release", "m", "--older-than", "1h"},
		{"--store", "redis://127.0.0.1:1", "prune", "--older-than", "-1h"},
		{"version", "extra"},
		{"--no-such-flag"},
	} {
		r := cli(t, "", args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "usage: simba")
	}
	for _, store := range []string{"ftp://host", "zk://host?session_timeout=500us", "::"} {
		r := cli(t, "", "--store", store, "get", "m")
		assert.Equal(t, 2, r.code, "a store URL that does not parse is bad usage: %s", r.stderr)
		assert.Contains(t, r.stderr, "store URL")
	}
	r := cli(t, "", "--store", "redis://127.0.0.1:1", "--timeout", "0s", "get", "m")
	assert.Equal(t, 2, r.code, r.stderr)
	r = cli(t, "", "--help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "release <mutex>")
}

// holdingWith is holding with the owner's TTL and transition.
func holdingWith(t *testing.T, raw, mutex, id string, ttl, transition time.Duration) *simba.Lease {
	t.Helper()
	_, lease := holdingFor(t, raw, mutex, id, ttl, transition)
	return lease
}

// Redis keeps one expiry (ttl + transition); the TTL end is derived from it with the
// transition --transition names (default 6s, simba's), and the output says so. It was
// derived with 6s whatever the owner's: TTL LEFT 0s for a healthy owner with 1s.
func TestTransitionOnRedis(t *testing.T) {
	testserver.Need(t, storesErr)
	raw, mutex := stores.URLs()["redis"], "cli-transition"
	holdingWith(t, raw, mutex, "owner", 4*time.Second, time.Second)

	began := time.Now()
	r := cli(t, "", "--store", raw, "--json", "--transition", "1s", "get", mutex)
	require.Equal(t, 0, r.code, r.stderr)
	var got record
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	require.NotNil(t, got.TTLAt)
	require.NotNil(t, got.TransitionAt)
	assert.Equal(t, time.Second, got.TransitionAt.Sub(*got.TTLAt), "derived with --transition")
	assert.True(t, got.TTLAt.After(began), "a healthy owner's TTL ends after the read: %v, read at %v", got.TTLAt, began)

	r = cli(t, "", "--store", raw, "--json", "get", mutex)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
	assert.Equal(t, simba.DefaultTransition, got.TransitionAt.Sub(*got.TTLAt), "derived with simba's default")
	assert.Contains(t, r.stderr, "--transition", "says how the TTL end was derived")

	r = cli(t, "", "--store", raw, "get", mutex)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "derived")

	r = cli(t, "", "--store", stores.URLs()["mysql"], "get", mutex)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stderr, "derived", "SQL keeps the TTL end")

	r = cli(t, "", "--help")
	assert.Contains(t, r.stdout, "--transition")
	for _, bad := range []string{"-1s", "1500us", "soon"} {
		r = cli(t, "", "--store", raw, "--transition", bad, "get", mutex)
		assert.Equal(t, 2, r.code, "--transition %s: %s", bad, r.stderr)
	}
}

// --timeout bounds each store call: a store that stalls for longer than simba's default
// call timeout (2.5s) but less than --timeout is waited for. The lookups ended at 2.5s.
func TestTimeoutBoundsEachCall(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, srv := range map[string]*testserver.Server{"redis": stores.Redis, "mysql": stores.MariaDB.Server} {
		t.Run(scheme, func(t *testing.T) {
			raw, mutex := stores.URLs()[scheme], "cli-timeout-"+scheme
			holdingWith(t, raw, mutex, "owner", 30*time.Second, time.Second) // outlives the stall
			require.NoError(t, srv.Pause())
			paused := true
			defer func() {
				if paused {
					_ = srv.Resume()
				}
			}()
			results := make(chan result, 2)
			go func() { results <- cli(t, "", "--store", raw, "--timeout", "60s", "get", mutex) }()
			go func() { results <- cli(t, "", "--store", raw, "--timeout", "60s", "list") }()
			select {
			case r := <-results:
				t.Fatalf("a command ended while the store stalled: %d %s", r.code, r.stderr)
			case <-time.After(8 * time.Second): // the stall: longer than simba's and go-redis's default timeouts
			}
			require.NoError(t, srv.Resume())
			paused = false
			for range 2 {
				r := <-results
				assert.Equal(t, 0, r.code, r.stderr)
				assert.Contains(t, r.stdout, mutex)
			}
		})
	}
}

// A stalled server makes get and list say the same: that it did not answer within
// --timeout. list said "i/o timeout" after 5s.
func TestStalledServerSaysNoAnswer(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, srv := range map[string]*testserver.Server{"redis": stores.Redis, "mysql": stores.MariaDB.Server} {
		t.Run(scheme, func(t *testing.T) {
			raw := stores.URLs()[scheme]
			holding(t, raw, "cli-stall-"+scheme, "owner")
			require.NoError(t, srv.Pause())
			defer func() { require.NoError(t, srv.Resume()) }()
			for _, args := range [][]string{{"get", "cli-stall-" + scheme}, {"list"}} {
				r := cli(t, "", append([]string{"--store", raw, "--timeout", "2s"}, args...)...)
				assert.Equal(t, 1, r.code, "%v", args)
				assert.Contains(t, r.stderr, "no answer from the server within 2s", "%v", args)
				assert.NotContains(t, r.stderr, "read_timeout", "the URL as given")
			}
		})
	}
}

func TestVersion(t *testing.T) {
	r := cli(t, "", "version")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "simba (devel)", "a build from a checkout")
	r = cli(t, "", "--json", "version")
	require.Equal(t, 0, r.code, r.stderr)
	var v struct{ Version, Go string }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &v), r.stdout)
	assert.Equal(t, "(devel)", v.Version)
	assert.NotEmpty(t, v.Go)
}

// heldAndFree returns two mutexes named after prefix: one held until the test ends, one
// acquired and released.
func heldAndFree(t *testing.T, raw, prefix string) (held, free string) {
	t.Helper()
	held, free = prefix+"-held", prefix+"-free"
	holding(t, raw, held, "owner")
	_, lease := holding(t, raw, free, "owner")
	require.NoError(t, lease.Release(t.Context()))
	return held, free
}

// list --held shows the mutexes with an owner only; list shows every row of a SQL table.
func TestListHeld(t *testing.T) {
	testserver.Need(t, storesErr)
	for _, scheme := range []string{"mysql", "redis", "etcd"} {
		t.Run(scheme, func(t *testing.T) {
			raw := stores.URLs()[scheme]
			held, free := heldAndFree(t, raw, "cli-list-"+scheme)

			r := cli(t, "", "--store", raw, "--json", "list", "--held")
			require.Equal(t, 0, r.code, r.stderr)
			var all []record
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &all), r.stdout)
			var names []string
			for _, rec := range all {
				assert.NotEmpty(t, rec.Owner, "list --held shows only owned mutexes: %s", r.stdout)
				names = append(names, rec.Mutex)
			}
			assert.Contains(t, names, held)
			assert.NotContains(t, names, free)
			if scheme == "mysql" {
				r = cli(t, "", "--store", raw, "list")
				require.Equal(t, 0, r.code, r.stderr)
				assert.Contains(t, r.stdout, free, "a SQL table keeps the rows of free mutexes")
			}
		})
	}
}

// prune deletes the rows of mutexes without an owner from a SQL table, once confirmed;
// the rows of held mutexes stay. Other stores have nothing to prune.
func TestPrune(t *testing.T) {
	testserver.Need(t, storesErr)
	for _, scheme := range []string{"mysql", "postgres"} {
		t.Run(scheme, func(t *testing.T) {
			raw := stores.URLs()[scheme]
			held, free := heldAndFree(t, raw, "cli-prune-"+scheme)
			listed := func() string {
				r := cli(t, "", "--store", raw, "list")
				require.Equal(t, 0, r.code, r.stderr)
				return r.stdout
			}

			r := cli(t, "no\n", "--store", raw, "prune", "--older-than", "0s")
			assert.Equal(t, 1, r.code)
			assert.Contains(t, r.stderr, "not confirmed")
			assert.Contains(t, listed(), free, "nothing was pruned")

			r = cli(t, "prune\n", "--store", raw, "prune", "--older-than", "0s")
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "pruned")
			all := listed()
			assert.NotContains(t, all, free)
			assert.Contains(t, all, held, "a held mutex's row stays")

			r = cli(t, "", "--store", raw, "--yes", "--json", "prune")
			require.Equal(t, 0, r.code, r.stderr)
			var out struct{ Pruned *int64 }
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
			require.NotNil(t, out.Pruned, r.stdout)
		})
	}
	r := cli(t, "", "--store", stores.URLs()["redis"], "--yes", "prune")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "SQL")
}
