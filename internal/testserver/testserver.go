// Package testserver starts the real stores simba's tests run against (redis-server,
// MariaDB, PostgreSQL, ZooKeeper, etcd) as child processes on free loopback ports with private data
// directories, and stops, kills, pauses and restarts them by the PID it started, never
// touching a server it did not start.
package testserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrMissing is returned when a server's program is not installed.
var ErrMissing = errors.New("testserver: server program not installed")

// Required reports whether a missing server must fail the tests rather than skip them:
// SIMBA_REQUIRE_SERVERS=1, which `make test` and CI set.
func Required() bool { return os.Getenv("SIMBA_REQUIRE_SERVERS") == "1" }

// Server is one server process started by the tests. Start it again after Stop, Kill or
// a crash to restart it on the same port and data directory.
type Server struct {
	// Name is a short label for messages: "redis", "mariadb", "zookeeper".
	Name string
	// Host and Port are where it listens; Addr is "host:port".
	Host string
	Port int
	// Dir is its private directory (data, logs, configuration).
	Dir string

	args   func() []string                 // program and arguments, computed at every start
	env    []string                        // added to the test's environment, if set
	attr   func(*syscall.SysProcAttr)      // adjusts the process's attributes (the user it runs as), if set
	stop   syscall.Signal                  // the signal Stop sends; SIGTERM if zero
	tree   bool                            // signal the process's children too (PostgreSQL's backends)
	before func(ctx context.Context) error // runs before every start, if set
	ready  func(ctx context.Context) error
	setup  func(ctx context.Context) error // runs once, after the first start is ready
	repick func() error                    // picks the server's other ports (a cluster bus, a peer port) anew, if set

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the current process has exited
	stopped bool          // Stop or Kill was called: an exit is expected
	started bool          // it has started once: its port is fixed
	setUp   bool
	logPath string
}

// Addr returns "host:port".
func (s *Server) Addr() string { return net.JoinHostPort(s.Host, strconv.Itoa(s.Port)) }

// PID returns the process ID of the running process, or 0.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Start starts the process (again) and waits until it is ready or ctx ends. If the very
// first start finds a port taken, it moves to other free ports and tries again; later
// starts keep the ports, as a restarted server must.
func (s *Server) Start(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		err := s.start(ctx)
		s.mu.Lock()
		first := !s.started
		if err == nil {
			s.started = true
		}
		s.mu.Unlock()
		if err == nil || !first || attempt == 5 || !strings.Contains(err.Error(), "ddress already in use") {
			return err
		}
		port, perr := FreePort()
		if perr == nil && s.repick != nil {
			perr = s.repick()
		}
		if perr != nil {
			return err
		}
		s.Port = port
	}
}

func (s *Server) start(ctx context.Context) error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return fmt.Errorf("testserver: %s already running (pid %d)", s.Name, s.PID())
	}
	if s.before != nil {
		if err := s.before(ctx); err != nil {
			s.mu.Unlock()
			return fmt.Errorf("testserver: prepare %s: %w", s.Name, err)
		}
	}
	argv := s.args()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = s.Dir
	if s.env != nil {
		cmd.Env = append(os.Environ(), s.env...)
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	// A session of its own, so that signals meant for the test binary's group do not
	// reach it; killed with the test binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if s.attr != nil {
		s.attr(cmd.SysProcAttr)
	}
	if err := cmd.Start(); err != nil {
		s.mu.Unlock()
		_ = logf.Close()
		return fmt.Errorf("testserver: start %s: %w", s.Name, err)
	}
	exited := make(chan struct{})
	s.cmd, s.exited, s.stopped = cmd, exited, false
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		s.mu.Lock()
		if s.cmd == cmd {
			s.cmd = nil
		}
		s.mu.Unlock()
		close(exited)
	}()

	if err := s.waitReady(ctx, exited); err != nil {
		_ = s.Kill()
		return err
	}
	s.mu.Lock()
	first := !s.setUp && s.setup != nil
	s.setUp = true
	s.mu.Unlock()
	if first {
		if err := s.setup(ctx); err != nil {
			_ = s.Kill()
			return fmt.Errorf("testserver: set up %s: %w\n%s", s.Name, err, s.LogTail(20))
		}
	}
	return nil
}

func (s *Server) waitReady(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, ccancel := context.WithTimeout(ctx, time.Second)
		err := s.ready(cctx)
		ccancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("testserver: %s exited during start-up: %w\n%s", s.Name, err, s.LogTail(20))
		case <-ctx.Done():
			return fmt.Errorf("testserver: %s not ready: %w\n%s", s.Name, err, s.LogTail(20))
		case <-tick.C:
		}
	}
}

// Stop sends SIGTERM (or the server's own shutdown signal; and SIGCONT, in case it is
// paused), waits up to 30s, then kills.
func (s *Server) Stop() error {
	sig := s.stop
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	return s.signalAndWait(sig, 30*time.Second)
}

// Kill sends SIGKILL and waits for the process to exit: a crash. A server whose work is
// done by child processes (PostgreSQL) loses them all at once.
func (s *Server) Kill() error {
	return s.signalAndWait(syscall.SIGKILL, 30*time.Second)
}

func (s *Server) signalAndWait(sig syscall.Signal, grace time.Duration) error {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil {
		return nil
	}
	killed := s.send(cmd, sig)
	s.send(cmd, syscall.SIGCONT)
	select {
	case <-exited:
	case <-time.After(grace):
		killed = s.send(cmd, syscall.SIGKILL)
		<-exited
	}
	// Killed children may outlive the process for a moment: wait until they are gone,
	// so that a restart finds the data directory free.
	for deadline := time.Now().Add(grace); time.Now().Before(deadline) && slices.ContainsFunc(killed, running); {
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// send signals the process and, for a server whose children each lead a process group of
// their own (PostgreSQL's backends), its children; it returns the children it killed.
// The process is stopped while its children are listed and signalled, so that it starts
// no new one meanwhile. SIGINT and SIGTERM go to the process alone: it stops its children
// itself.
func (s *Server) send(cmd *exec.Cmd, sig syscall.Signal) (killed []int) {
	pid := cmd.Process.Pid
	if !s.tree || sig == syscall.SIGINT || sig == syscall.SIGTERM {
		_ = syscall.Kill(pid, sig)
		return nil
	}
	if sig != syscall.SIGCONT {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	kids := children(pid)
	for _, c := range kids {
		_ = syscall.Kill(c, sig)
	}
	_ = syscall.Kill(pid, sig)
	if sig == syscall.SIGKILL {
		return kids
	}
	return nil
}

// children returns the PIDs of the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _ := stat(child); ppid == pid {
			out = append(out, child)
		}
	}
	return out
}

// stat returns a process's parent PID and state ('R', 'S', 'Z', ...) from
// /proc/<pid>/stat; 0 and 0 when it is gone.
func stat(pid int) (ppid int, state byte) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	f := statFields(b)
	if len(f) < 2 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	return ppid, f[0][0]
}

// stateOf returns the state in a /proc stat line; 0 when it cannot be read.
func stateOf(b []byte) byte {
	if f := statFields(b); len(f) > 0 {
		return f[0][0]
	}
	return 0
}

// statFields returns the fields of a /proc stat line after the command name: state, ppid,
// ...; nil when there are none. The name may hold spaces and parentheses.
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) == 0 || len(f[0]) == 0 {
		return nil
	}
	return f
}

// running reports whether a process exists and is not a zombie (which holds no memory).
func running(pid int) bool {
	_, state := stat(pid)
	return state != 0 && state != 'Z'
}

// Pause stops the process (and, for PostgreSQL, its children) with SIGSTOP: connections
// stay open and nothing answers. It returns once every thread of those processes has
// stopped: kill(2) returns before they do, and a thread that runs on meanwhile can still
// answer a request sent after Pause returned.
func (s *Server) Pause() error {
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	procs := []int{pid}
	if s.tree {
		procs = append(procs, children(pid)...)
	}
	deadline := time.Now().Add(pauseWait)
	for !allStopped(procs) {
		if time.Now().After(deadline) {
			return fmt.Errorf("testserver: %s not stopped %v after SIGSTOP", s.Name, pauseWait)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// pauseWait bounds Pause's wait for the threads to stop.
const pauseWait = 5 * time.Second

// allStopped reports whether every thread of each process is stopped ('T'), or the
// process is a zombie or gone (either runs nothing).
func allStopped(procs []int) bool {
	for _, pid := range procs {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			continue // gone
		}
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
			if err != nil {
				continue
			}
			if state := stateOf(b); state != 'T' && state != 't' && state != 'Z' && state != 0 {
				return false
			}
		}
	}
	return true
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return fmt.Errorf("testserver: %s not running", s.Name)
	}
	if s.tree {
		s.send(s.cmd, sig)
		return nil
	}
	return s.cmd.Process.Signal(sig)
}

// LogTail returns the last n lines of the server's output.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// FreePort returns a loopback TCP port that was free a moment ago. It picks from below the
// kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range), where the ports of
// outgoing connections and of listeners on port 0 come from: a port from that range could
// be taken by any of those between now and the moment a server binds it.
func FreePort() (int, error) {
	low := ephemeralLow()
	for range 100 {
		port := 10000 + rand.IntN(low-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		return port, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low <= 11000 {
		return 32768
	}
	return low
}

// lookPath finds a program, also in the sbin directories that a non-root PATH may lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s (install it, or run make setup)", ErrMissing, name)
}

// newServer prepares a server in dir on a free port.
func newServer(name, dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	return &Server{Name: name, Host: "127.0.0.1", Port: port, Dir: dir, logPath: filepath.Join(dir, name+".log")}, nil
}

// dialCheck opens a TCP connection, writes req and reads until the answer contains want.
func dialCheck(ctx context.Context, addr, req, want string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		return err
	}
	var buf bytes.Buffer
	chunk := make([]byte, 4096)
	for !bytes.Contains(buf.Bytes(), []byte(want)) {
		n, err := conn.Read(chunk)
		buf.Write(chunk[:n])
		if err != nil {
			if bytes.Contains(buf.Bytes(), []byte(want)) {
				break
			}
			return fmt.Errorf("answer %q: %w", buf.String(), err)
		}
	}
	return nil
}

// Need reports err, the result of preparing or starting a server, through t: a missing
// server program skips the test in a -short run that does not require servers, and
// anything else fails it.
func Need(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, ErrMissing) && !Required() && testing.Short() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatalf("starting a test server: %v", err)
	}
}
