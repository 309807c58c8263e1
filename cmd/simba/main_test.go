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
		return testserver.RunWithStores(m, createTable, func(s *testserver.Stores, err error) { stores, storesErr = s, err })
	}())
}

// createTable creates simba's table in the SQL stores of s.
func createTable(ctx context.Context, s *testserver.Stores) error { return s.CreateTables(ctx) }

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
	s, err := storeurl.Open(raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	l, err := simba.NewLocker(s.Backend(), mutex, simba.WithContenderID(id),
		simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
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

func TestRelease(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			mutex, id := "cli-release-"+scheme, "stuck-"+scheme
			s, _ := holding(t, raw, mutex, id)
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
			holding(t, raw, mutex2, id)
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
	for _, scheme := range []string{"redis", "zk"} {
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
		{"--no-such-flag"},
	} {
		r := cli(t, "", args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		assert.Contains(t, r.stderr, "usage: simba")
	}
	r := cli(t, "", "--store", "ftp://host", "get", "m")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "scheme")
	r = cli(t, "", "--help")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, "release <mutex>")
}
