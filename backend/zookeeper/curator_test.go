package zookeeper_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/zookeeper"
)

// The interop of semaphores and read-write locks with Curator's
// InterProcessSemaphoreV2 and InterProcessReadWriteLock, each held by a Java process
// (testdata/Holds.java) that runs against Debian's Curator 5.4.0 (libcurator-recipes-java).

// curatorJars are the jars Holds.java needs, in /usr/share/java.
var curatorJars = []string{"curator-recipes", "curator-framework", "curator-client",
	"zookeeper", "zookeeper-jute", "guava", "slf4j-api", "slf4j-nop"}

// curatorClasspath compiles Holds.java against the Curator jars and returns the class
// path to run it with; it skips the test when java, javac or a jar is missing.
func curatorClasspath(t *testing.T) string {
	t.Helper()
	needServer(t)
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipping the Curator interop: no %s on PATH (a JDK is needed)", tool)
		}
	}
	var cp []string
	for _, j := range curatorJars {
		p := "/usr/share/java/" + j + ".jar"
		if _, err := os.Stat(p); err != nil {
			t.Skipf("skipping the Curator interop: %s is missing (apt-get install libcurator-recipes-java; make setup does)", p)
		}
		cp = append(cp, p)
	}
	dir := t.TempDir()
	out, err := exec.CommandContext(t.Context(), "javac", "-cp", strings.Join(cp, ":"), "-d", dir, "testdata/Holds.java").CombinedOutput()
	require.NoError(t, err, "javac: %s", out)
	return strings.Join(append(cp, dir), ":")
}

// curator is a Java process that holds one Curator semaphore lease or lock.
type curator struct {
	t     *testing.T
	stdin io.WriteCloser
	lines chan string // its stdout, closed at its end
}

// startCurator runs Holds.java with args (read|write|semaphore <path> [permits]); it
// acquires as soon as it is connected. The process ends when the test does.
func startCurator(t *testing.T, cp string, args ...string) *curator {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-cp", cp, "Holds", server.Addr()}, args...)...)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = t.Output()
	require.NoError(t, cmd.Start())
	c := &curator{t: t, stdin: stdin, lines: make(chan string, 16)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // it gives its hold back and ends
		select {
		case <-read:
		case <-time.After(holdBound):
			_ = cmd.Process.Kill()
			<-read
		}
		_ = cmd.Wait()
	})
	return c
}

// expect waits for the process's next line, which must begin with prefix.
func (c *curator) expect(prefix string) string {
	c.t.Helper()
	select {
	case line, ok := <-c.lines:
		require.True(c.t, ok, "the Curator process ended; want %q", prefix)
		require.True(c.t, strings.HasPrefix(line, prefix), "the Curator process said %q; want %q", line, prefix)
		return line
	case <-time.After(holdBound):
		c.t.Fatalf("the Curator process did not say %q within %v", prefix, holdBound)
		return ""
	}
}

// quiet fails the test if the process said anything yet.
func (c *curator) quiet(what string) {
	c.t.Helper()
	select {
	case line := <-c.lines:
		c.t.Fatalf("%s: the Curator process said %q", what, line)
	default:
	}
}

// release makes the process give its hold back.
func (c *curator) release() {
	c.t.Helper()
	_, err := io.WriteString(c.stdin, "\n")
	require.NoError(c.t, err)
	c.expect("released")
}

// children returns the names of path's children, none when it does not exist.
func children(t *testing.T, admin *zk.Conn, path string) []string {
	t.Helper()
	kids, _, err := admin.Children(path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	require.NoError(t, err)
	return kids
}

func TestCuratorInterop(t *testing.T) {
	cp := curatorClasspath(t)
	admin := adminConn(t)

	t.Run("curator writer, go reader", func(t *testing.T) {
		name := mutexName(t)
		w := startCurator(t, cp, "write", zookeeper.RWMutexPath(name))
		w.expect("connected")
		w.expect("held")
		m := newRWMutex(t, newBackend(t), name, "r")
		_, err := m.TryRLock(t.Context())
		assert.ErrorIs(t, err, simba.ErrHeld, "TryRLock while Curator writes")
		r := goAcquire(t, m.RLock)
		eventually(t, holdBound, "the Go reader's node", func() bool {
			return len(children(t, admin, zookeeper.RWMutexPath(name))) == 2
		})
		w.release()
		require.NoError(t, await(t, r, "the Go reader").Release(t.Context()))
	})

	t.Run("go writer, curator reader and writer", func(t *testing.T) {
		name := mutexName(t)
		parent := zookeeper.RWMutexPath(name)
		m := newRWMutex(t, newBackend(t), name, "w")
		wl, err := m.Lock(t.Context())
		require.NoError(t, err)
		r := startCurator(t, cp, "read", parent)
		r.expect("connected")
		eventually(t, holdBound, "the Curator reader's node", func() bool { return len(children(t, admin, parent)) == 2 })
		r.quiet("while Go writes")
		require.NoError(t, wl.Release(t.Context()))
		r.expect("held")
		// Readers of both share the lock; a writer of either waits for both.
		other := newRWMutex(t, newBackend(t), name, "r")
		rl, err := other.RLock(t.Context())
		require.NoError(t, err)
		w := startCurator(t, cp, "write", parent)
		w.expect("connected")
		eventually(t, holdBound, "the Curator writer's node", func() bool { return len(children(t, admin, parent)) == 3 })
		r.release()
		w.quiet("while the Go reader reads")
		require.NoError(t, rl.Release(t.Context()))
		w.expect("held")
		w.release()
	})

	t.Run("go downgrade, curator writer waiting", func(t *testing.T) {
		// CURATOR-621 across the two: the Curator writer waiting behind the Go writer
		// must wait for its downgraded reader too.
		name := mutexName(t)
		parent := zookeeper.RWMutexPath(name)
		b := newBackend(t)
		m := newRWMutex(t, b, name, "w")
		wl, err := m.Lock(t.Context())
		require.NoError(t, err)
		wNode := nodeOf(t, admin, parent, "w/w#0")
		w := startCurator(t, cp, "write", parent)
		w.expect("connected")
		eventually(t, holdBound, "the Curator writer's node", func() bool { return len(children(t, admin, parent)) == 2 })
		d, err := wl.Downgrade(t.Context())
		require.NoError(t, err)
		waitGone(t, admin, wNode, holdBound)
		dNode := nodeOf(t, admin, parent, "w/r#0")
		require.NotEmpty(t, dNode)
		// The Curator writer looks again once the Go writer's node is gone; waiting, it
		// watches its predecessor: the downgraded reader's node.
		eventually(t, holdBound, "the Curator writer to watch the downgraded reader's node", func() bool {
			return slices.ContainsFunc(watchersOf(t, dNode), func(s int64) bool { return s != zookeeper.SessionID(b.Backend) })
		})
		w.quiet("while the downgraded Go reader reads")
		require.NoError(t, d.Release(t.Context()))
		w.expect("held")
		w.release()
	})

	t.Run("curator permit, go waits", func(t *testing.T) {
		name := mutexName(t)
		c := startCurator(t, cp, "semaphore", zookeeper.SemaphorePath(name), "1")
		c.expect("connected")
		c.expect("held")
		s := newSemaphore(t, newBackend(t), name, 1, "g")
		_, err := s.TryAcquire(t.Context())
		assert.ErrorIs(t, err, simba.ErrHeld, "TryAcquire while Curator holds the permit")
		g := goAcquire(t, s.Acquire)
		eventually(t, holdBound, "the Go waiter's lease node", func() bool {
			return len(children(t, admin, zookeeper.SemaphorePath(name)+"/leases")) == 2
		})
		c.release()
		require.NoError(t, await(t, g, "the Go permit").Release(t.Context()))
	})

	t.Run("go permits, curator waits", func(t *testing.T) {
		name := mutexName(t)
		s := newSemaphore(t, newBackend(t), name, 2, "g")
		var held []*simba.Lease
		for range 2 {
			l, err := s.Acquire(t.Context())
			require.NoError(t, err)
			held = append(held, l)
		}
		c := startCurator(t, cp, "semaphore", zookeeper.SemaphorePath(name), "2")
		c.expect("connected")
		eventually(t, holdBound, "the Curator waiter's lease node", func() bool {
			return len(children(t, admin, zookeeper.SemaphorePath(name)+"/leases")) == 3
		})
		c.quiet("while Go holds both permits")
		require.NoError(t, held[0].Release(t.Context()))
		c.expect("held")
		// The Curator lease counts: a Go acquisition waits for it.
		_, err := s.TryAcquire(t.Context())
		assert.ErrorIs(t, err, simba.ErrHeld, "TryAcquire while Go and Curator hold both permits")
		c.release()
		require.NoError(t, held[1].Release(t.Context()))
	})
}

// watchersOf returns the sessions that watch path.
func watchersOf(t *testing.T, path string) []int64 {
	t.Helper()
	var out []int64
	session := int64(0)
	for _, line := range strings.Split(fourLetter(t, "wchc"), "\n") {
		if !strings.HasPrefix(line, "\t") {
			session = 0
			if s := strings.TrimSpace(line); strings.HasPrefix(s, "0x") {
				_, _ = fmt.Sscanf(s, "0x%x", &session)
			}
			continue
		}
		if strings.TrimSpace(line) == path && session != 0 {
			out = append(out, session)
		}
	}
	return out
}
