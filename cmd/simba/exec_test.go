package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/internal/faultproxy"
	"github.com/simba-go/simba/internal/testserver"
	"github.com/simba-go/simba/storeurl"
)

// TestExecRunsWhileHolding: exec runs the command while it holds the mutex, gives it the
// lease in its environment, exits with its status and releases the mutex.
func TestExecRunsWhileHolding(t *testing.T) {
	testserver.Need(t, storesErr)
	for scheme, raw := range stores.URLs() {
		t.Run(scheme, func(t *testing.T) {
			mutex := "cli-exec-" + scheme
			r := cli(t, "", "--store", raw, "exec", mutex, "--",
				"sh", "-c", `echo "$SIMBA_MUTEX $SIMBA_FENCING_TOKEN $SIMBA_OWNER"; exit 7`)
			require.Equal(t, 7, r.code, "the command's status: %s", r.stderr)
			fields := strings.Fields(r.stdout)
			require.Len(t, fields, 3, r.stdout)
			assert.Equal(t, mutex, fields[0])
			token, err := strconv.ParseUint(fields[1], 10, 64)
			require.NoError(t, err)
			assert.NotZero(t, token, "the fencing token")
			assert.NotEmpty(t, fields[2], "the owner")

			s, err := storeurl.Open(raw)
			require.NoError(t, err)
			defer s.Close()
			o, err := simba.Lookup(t.Context(), s.Backend(), mutex)
			require.NoError(t, err)
			assert.True(t, o.IsZero(), "released after the command: %v", o)
		})
	}
}

// TestExecHeld: a held mutex ends exec at once with status 3, or, with --wait, exec waits
// for it (for at most --timeout, when given).
func TestExecHeld(t *testing.T) {
	testserver.Need(t, storesErr)
	raw := stores.URLs()["redis"]
	mutex := "cli-exec-held"
	_, lease := holding(t, raw, mutex, "holder")

	r := cli(t, "", "--store", raw, "exec", mutex, "--", "true")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.Contains(t, r.stderr, "held by another contender")

	began := time.Now()
	r = cli(t, "", "--store", raw, "--wait", "--timeout", "500ms", "exec", mutex, "--", "true")
	assert.Equal(t, 3, r.code, r.stderr)
	assert.GreaterOrEqual(t, time.Since(began), 500*time.Millisecond, "it waited")

	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = lease.Release(t.Context())
	}()
	r = cli(t, "", "--store", raw, "--wait", "exec", mutex, "--", "sh", "-c", "echo ran")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "ran\n", r.stdout)

	r = cli(t, "", "--store", "redis://127.0.0.1:1", "exec", mutex, "--", "true")
	assert.Equal(t, 1, r.code, "an unreachable store is a failure, not a held mutex: %s", r.stderr)
	r = cli(t, "", "--store", raw, "--grace", "6s", "exec", mutex, "--", "true")
	assert.Equal(t, 2, r.code, "a grace not shorter than the transition: %s", r.stderr)
}

// TestExecStopsTheCommandBeforeASuccessor: exec's store is cut off while the command runs
// (a command that ignores SIGTERM, with a child of its own): the command's whole process
// group is gone before another contender acquires the mutex, and exec exits with 4.
func TestExecStopsTheCommandBeforeASuccessor(t *testing.T) {
	testserver.Need(t, storesErr)
	proxy, err := faultproxy.New(stores.Redis.Addr())
	require.NoError(t, err)
	defer proxy.Close()
	mutex := "cli-exec-lost"
	beats := filepath.Join(t.TempDir(), "beats")
	script := `trap "" TERM; (trap "" TERM; while :; do date +%s%N >> "$1"; sleep 0.02; done) & wait`

	type outcome struct {
		res  result
		took time.Duration
	}
	done := make(chan outcome, 1)
	var cut time.Time
	go func() {
		r := cli(t, "", "--store", "redis://"+proxy.Addr(), "--ttl", "1s", "--transition", "1s", "--grace", "300ms",
			"exec", mutex, "--", "sh", "-c", script, "sh", beats)
		done <- outcome{r, time.Since(cut)}
	}()
	waitFile(t, beats)
	cut = time.Now()
	proxy.Blackhole(faultproxy.Both)

	s, err := storeurl.Open(stores.URLs()["redis"])
	require.NoError(t, err)
	defer s.Close()
	l, err := simba.NewLocker(s.Backend(), mutex, simba.WithContenderID("successor"),
		simba.WithTTL(time.Second), simba.WithTransition(time.Second))
	require.NoError(t, err)
	defer l.Close()
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	successor := time.Now()
	defer lease.Release(t.Context())

	var o outcome
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("exec did not exit")
	}
	assert.Equal(t, 4, o.res.code, o.res.stderr)
	assert.Contains(t, o.res.stderr, "was lost")
	last := lastBeat(t, beats)
	assert.True(t, last.Before(successor), "the command wrote at %s, after the successor acquired at %s",
		last.Format(time.StampMicro), successor.Format(time.StampMicro))
	t.Logf("exec exited %s after the cut; the command's last write %s before the successor acquired",
		o.took.Round(time.Millisecond), successor.Sub(last).Round(time.Millisecond))
	time.Sleep(200 * time.Millisecond) // a live group would write again within 20ms
	assert.Equal(t, last, lastBeat(t, beats), "the command's group is gone")
}

// waitFile waits until path exists and is not empty.
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// lastBeat returns the last instant written to path, one line of nanoseconds each.
func lastBeat(t *testing.T, path string) time.Time {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := strings.Fields(string(data))
	require.NotEmpty(t, lines)
	ns, err := strconv.ParseInt(lines[len(lines)-1], 10, 64)
	require.NoError(t, err)
	return time.Unix(0, ns)
}

// TestExecInterrupted: an interrupted exec stops the command's group, releases the mutex
// and exits with the command's status.
func TestExecInterrupted(t *testing.T) {
	testserver.Need(t, storesErr)
	raw := stores.URLs()["redis"]
	mutex := "cli-exec-interrupted"
	beats := filepath.Join(t.TempDir(), "beats")
	cmd := exec.Command(binary, "--store", raw, "exec", mutex, "--",
		"sh", "-c", `while :; do date +%s%N >> "$1"; sleep 0.02; done`, "sh", beats)
	require.NoError(t, cmd.Start())
	waitFile(t, beats)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("exec did not exit after SIGINT")
	}
	assert.Equal(t, 128+15, cmd.ProcessState.ExitCode(), "the command's status: ended by SIGTERM")
	last := lastBeat(t, beats)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, last, lastBeat(t, beats), "the command's group is gone")

	s, err := storeurl.Open(raw)
	require.NoError(t, err)
	defer s.Close()
	o, err := simba.Lookup(t.Context(), s.Backend(), mutex)
	require.NoError(t, err)
	assert.True(t, o.IsZero(), "released: %v", o)
}
