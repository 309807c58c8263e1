package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/storeurl"
)

// Exit statuses of exec besides the command's own.
const (
	exitHeld = 3 // the mutex is held (without --wait), or --timeout ended the wait
	exitLost = 4 // the lease was lost while the command ran: the command was stopped
)

// execCmd runs argv while holding mutex: it acquires the mutex, starts argv in a process
// group of its own with the lease in its environment, and gives the mutex back when the
// command exits, with the command's status. When the lease is lost (the store cannot be
// reached, another took the mutex over), or when simba is interrupted, the command's
// whole group gets SIGTERM, and SIGKILL c.grace later: a grace shorter than the
// transition window, so that the command is gone before another owner can acquire.
func (c *cli) execCmd(ctx context.Context, s *storeurl.Store, mutex string, argv []string) int {
	l, err := simba.NewLocker(s.Backend(), mutex, simba.WithTTL(c.ttl), simba.WithTransition(c.transition))
	if err != nil {
		return c.done(err)
	}
	defer l.Close()
	lease, err := c.acquire(ctx, l)
	switch {
	case errors.Is(err, simba.ErrHeld):
		return c.fail(err, exitHeld)
	case err != nil:
		return c.done(err)
	}
	code, lost := c.runHolding(ctx, lease, l.ContenderID(), mutex, argv)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	if err := lease.Release(rctx); err != nil && !lost {
		c.fail(fmt.Errorf("exec: releasing the mutex: %w", err), exitFail)
	}
	if lost {
		fmt.Fprintf(c.stderr, "simba: exec: the lease of %q was lost (%v): the command was stopped\n", mutex, context.Cause(lease.Context()))
		return exitLost
	}
	return code
}

// acquire takes the mutex: one attempt, or, with --wait, until it is free, for at most
// --timeout if that was given.
func (c *cli) acquire(ctx context.Context, l *simba.Locker) (*simba.Lease, error) {
	if !c.wait {
		tctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		return l.TryAcquire(tctx)
	}
	if c.timeoutSet {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return l.Acquire(ctx)
}

// runHolding runs argv while lease holds and returns its exit status, and whether the
// lease was lost while it ran.
func (c *cli) runHolding(ctx context.Context, lease *simba.Lease, id, mutex string, argv []string) (code int, lost bool) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdinFile(), c.stdout, c.stderr
	cmd.Env = append(os.Environ(),
		"SIMBA_MUTEX="+mutex,
		"SIMBA_OWNER="+id,
		"SIMBA_FENCING_TOKEN="+strconv.FormatUint(lease.Token(), 10),
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(c.stderr, "simba: exec:", err)
		return exitFail, false
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		return exitCode(err), false
	case <-lease.Done():
		lost = true
	case <-ctx.Done(): // interrupted
	}
	return c.stopGroup(cmd.Process.Pid, exited), lost
}

// stopGroup sends SIGTERM to the process group pgid, SIGKILL c.grace later if it has not
// exited, and returns its exit status.
func (c *cli) stopGroup(pgid int, exited <-chan error) int {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	grace := time.NewTimer(c.grace)
	defer grace.Stop()
	select {
	case err := <-exited:
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // what the leader left behind
		return exitCode(err)
	case <-grace.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		return exitCode(<-exited)
	}
}

// stdinFile returns standard input for the command: simba's own when it is a file, so that
// a terminal stays one.
func (c *cli) stdinFile() io.Reader {
	if f, ok := c.stdinRaw.(*os.File); ok {
		return f
	}
	return c.stdin
}

// exitCode is a finished command's exit status, 128 + the signal when a signal ended it.
func exitCode(err error) int {
	var exit *exec.ExitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exit.ExitCode()
	}
	return exitFail
}
