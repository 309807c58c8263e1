package main_test

import (
	"bufio"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

// hold is the JSON of a holder, as the command prints it.
type hold struct {
	Kind   string     `json:"kind"`
	Name   string     `json:"name"`
	Holder string     `json:"holder"`
	Mode   string     `json:"mode"`
	Token  uint64     `json:"token"`
	TTLAt  *time.Time `json:"ttl_at"`
}

// openStore opens raw, with the hold table on SQL stores, until the test ends.
func openStore(t *testing.T, raw string) *storeurl.Store {
	t.Helper()
	s, err := storeurl.Open(raw)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.CreateTable(t.Context()))
	return s
}

func TestHoldsGetListRelease(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			s := openStore(t, raw)
			name := "cli-holds-" + scheme
			sem, err := simba.NewSemaphore(s.Backend(), name, 3, simba.WithContenderID("sem-"+scheme))
			require.NoError(t, err)
			defer sem.Close()
			rw, err := simba.NewRWMutex(s.Backend(), name, simba.WithContenderID("rw-"+scheme))
			require.NoError(t, err)
			defer rw.Close()
			p1, err := sem.Acquire(t.Context())
			require.NoError(t, err)
			p2, err := sem.Acquire(t.Context())
			require.NoError(t, err)
			r, err := rw.RLock(t.Context())
			require.NoError(t, err)

			out := cli(t, "", "--store", raw, "--json", "list", "--kind", "semaphore")
			require.Equal(t, 0, out.code, out.stderr)
			var listed []hold
			require.NoError(t, json.Unmarshal([]byte(out.stdout), &listed), out.stdout)
			mine := map[string]hold{}
			for _, h := range listed {
				if h.Name == name {
					mine[h.Holder] = h
				}
			}
			require.Len(t, mine, 2, out.stdout)
			for _, l := range []*simba.Lease{p1, p2} {
				h := mine[l.Owner().ID]
				assert.Equal(t, "semaphore", h.Kind)
				assert.Equal(t, "permit", h.Mode)
				assert.Equal(t, l.Token(), h.Token)
				keepsTTL := scheme != "zk" && scheme != "etcd" // their holds live with a session or lease
				assert.Equal(t, keepsTTL, h.TTLAt != nil, "a TTL end where the store keeps one")
			}

			out = cli(t, "", "--store", raw, "get", "--kind", "rwlock", name)
			require.Equal(t, 0, out.code, out.stderr)
			assert.Contains(t, out.stdout, "RWLOCK")
			assert.Contains(t, out.stdout, r.Owner().ID)
			assert.Contains(t, out.stdout, "shared")

			// The release asks for the holder's ID, frees that hold and no other.
			out = cli(t, "wrong\n", "--store", raw, "release", "--kind", "semaphore", name, p1.Owner().ID)
			assert.Equal(t, 1, out.code)
			assert.Contains(t, out.stderr, "not confirmed")
			out = cli(t, p1.Owner().ID+"\n", "--store", raw, "release", "--kind", "semaphore", name, p1.Owner().ID)
			require.Equal(t, 0, out.code, out.stderr)
			assert.Contains(t, out.stdout, "released "+p1.Owner().ID)
			left, err := s.Holders(t.Context(), backend.Semaphore, name)
			require.NoError(t, err)
			require.Len(t, left, 1)
			assert.Equal(t, p2.Owner().ID, left[0].ID)

			// A holder the name does not have is a one-line error.
			out = cli(t, "", "--store", raw, "--yes", "release", "--kind", "semaphore", name, "nobody")
			assert.Equal(t, 1, out.code)
			assert.Equal(t, 1, strings.Count(out.stderr, "\n"), out.stderr)
			assert.Contains(t, out.stderr, `has no holder "nobody"`)
			// A name without holders: nothing to release.
			out = cli(t, "", "--store", raw, "--yes", "release", "--kind", "rwlock", name+"-idle", "nobody")
			assert.Equal(t, 1, out.code)
			assert.Contains(t, out.stderr, "no holders")
		})
	}
}

func TestHoldsUsage(t *testing.T) {
	testserver.Need(t, storesErr)
	raw := stores.URLs()["redis"]
	for _, args := range [][]string{
		{"--store", raw, "list", "--kind", "queue"},
		{"--store", raw, "release", "--kind", "semaphore", "name"}, // no holder
		{"--store", raw, "release", "name", "holder"},              // a mutex has no holder argument
		{"--store", raw, "get", "--kind", "rwlock", "a{b}"},
		{"--store", raw, "exec", "--kind", "semaphore", "name", "--", "true"},
	} {
		r := cli(t, "", args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.stderr)
		assert.Equal(t, "simba:", strings.SplitN(r.stderr, " ", 2)[0], r.stderr)
	}
}

func TestHoldsWatch(t *testing.T) {
	testserver.Need(t, storesErr)
	raw := stores.URLs()["redis"]
	s := openStore(t, raw)
	name := "cli-holds-watch"
	cmd := exec.CommandContext(t.Context(), binary, "--store", raw, "--json", "watch", "--kind", "semaphore", name)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	type change struct {
		Holders []hold `json:"holders"`
	}
	lines := make(chan change)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var c change
			if json.Unmarshal(sc.Bytes(), &c) == nil {
				lines <- c
			}
		}
	}()
	next := func(want int) change {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case c, ok := <-lines:
				require.True(t, ok, "watch ended early: %s", stderr.String())
				if len(c.Holders) == want {
					return c
				}
			case <-deadline:
				t.Fatalf("watch never showed %d holders; stderr: %s", want, stderr.String())
			}
		}
	}
	next(0)
	sem, err := simba.NewSemaphore(s.Backend(), name, 2)
	require.NoError(t, err)
	defer sem.Close()
	lease, err := sem.Acquire(t.Context())
	require.NoError(t, err)
	c := next(1)
	assert.Equal(t, lease.Token(), c.Holders[0].Token)
	require.NoError(t, lease.Release(t.Context()))
	next(0)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for range lines {
	}
	require.NoError(t, cmd.Wait(), "an interrupt ends watch with status 0: %s", stderr.String())
}
