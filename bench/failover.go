package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Environment of a holder process: the library it runs, the endpoints (JSON) and the
// mutex.
const (
	holderEnv    = "SIMBA_BENCH_HOLDER"
	endpointsEnv = "SIMBA_BENCH_ENDPOINTS"
	mutexEnv     = "SIMBA_BENCH_MUTEX"
)

// holderReady is the line a holder process prints once it holds the mutex.
const holderReady = "held"

// failoverResult is the failover figure of one library.
type failoverResult struct {
	Store     string        `json:"store"`
	Library   string        `json:"library"`
	ID        string        `json:"id"`
	Takeovers sample        `json:"takeovers_ns"` // from the kill to the next owner's acquire returning
	Bound     time.Duration `json:"bound_ns"`
	Simulated bool          `json:"simulated"` // the owner's backend was closed in-process (memory)
}

// measureFailover kills an owner n times and times how long the next owner takes. The
// owner is a process of its own (this program, re-run as a holder), killed with
// SIGKILL at a random moment of its lease (uniform in [0, failoverLease) after it
// acquired); the waiter has been waiting since before. On memory, which cannot be shared
// with another process, the owner's backend is closed instead, which stops its renewals
// as a crash would.
func measureFailover(ctx context.Context, e *env, lib library, n int) (failoverResult, error) {
	res := failoverResult{Store: lib.store, Library: lib.name, ID: lib.id, Bound: lib.bound, Simulated: !lib.process}
	for range n {
		took, err := failOver(ctx, e, lib)
		if err != nil {
			return res, err
		}
		res.Takeovers = append(res.Takeovers, took)
	}
	return res, nil
}

func failOver(ctx context.Context, e *env, lib library) (time.Duration, error) {
	mutex := e.mutex("f", lib.id)
	var crash func()
	if lib.process {
		h, err := startHolder(ctx, lib, e.endpoints, mutex)
		if err != nil {
			return 0, err
		}
		defer h.kill()
		crash = h.kill
	} else {
		hc, err := lib.open(ctx, e, mutex, openOptions{failover: true})
		if err != nil {
			return 0, err
		}
		defer hc.close()
		release, err := hc.acquire(ctx)
		if err != nil {
			return 0, fmt.Errorf("holder: %w", err)
		}
		defer func() { _ = release(context.WithoutCancel(ctx)) }() // fails: the backend is closed
		sc, ok := hc.(*simbaClient)
		if !ok || sc.crash == nil {
			return 0, fmt.Errorf("%s cannot crash in-process", lib.id)
		}
		crash = sc.crash
	}
	w, err := lib.open(ctx, e, mutex, openOptions{failover: true})
	if err != nil {
		return 0, err
	}
	defer w.close()
	if err := w.armWait(ctx); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, lib.bound+time.Minute)
	defer cancel()
	got := make(chan acquired, 1)
	go func() {
		r, err := w.acquire(wctx)
		got <- acquired{r, time.Now(), err}
	}()
	if err := waitFor(ctx, 10*time.Second, time.Millisecond, "waiter waiting", w.waiting); err != nil {
		crash()
		return 0, err
	}
	if err := sleep(ctx, rand.N(failoverLease)); err != nil {
		crash()
		return 0, err
	}
	select {
	case a := <-got:
		crash()
		if a.err == nil {
			_ = a.release(context.WithoutCancel(ctx))
		}
		return 0, errors.New("the waiter acquired while the owner lived")
	default:
	}
	killed := time.Now()
	crash()
	a := <-got
	if a.err != nil {
		return 0, fmt.Errorf("waiter: %w", a.err)
	}
	_ = a.release(context.WithoutCancel(ctx))
	return a.at.Sub(killed), nil
}

// holder is a holder process.
type holder struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startHolder runs this program as a holder of mutex with lib and returns once it holds.
func startHolder(ctx context.Context, lib library, ep endpoints, mutex string) (*holder, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	epJSON, err := json.Marshal(ep)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), holderEnv+"="+lib.id, endpointsEnv+"="+string(epJSON), mutexEnv+"="+mutex)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with this process
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	h := &holder{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := sc.Scan() && sc.Text() == holderReady
		ready <- ok
		for sc.Scan() { // drain until the process exits
		}
		_ = cmd.Wait()
		close(h.exited)
	}()
	select {
	case ok := <-ready:
		if ok {
			return h, nil
		}
		h.kill()
		return nil, fmt.Errorf("holder %s did not acquire: %s", lib.id, strings.TrimSpace(stderr.String()))
	case <-time.After(30 * time.Second):
		h.kill()
		return nil, fmt.Errorf("holder %s did not acquire within 30s: %s", lib.id, strings.TrimSpace(stderr.String()))
	case <-ctx.Done():
		h.kill()
		return nil, ctx.Err()
	}
}

// kill sends SIGKILL and waits until the process has exited. Calling it again does
// nothing.
func (h *holder) kill() {
	select {
	case <-h.exited:
		return
	default:
	}
	_ = h.cmd.Process.Signal(syscall.SIGKILL)
	<-h.exited
}

// runHolder is the holder role: acquire the mutex of the environment with the library
// named id, print holderReady, and hold (renewing, where the library does not) until
// killed. It gives up after ten minutes, in case nobody kills it.
func runHolder(id string) int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "holder:", err)
		return 1
	}
	lib, err := libraryByID(id)
	if err != nil {
		return fail(err)
	}
	var ep endpoints
	if err := json.Unmarshal([]byte(os.Getenv(endpointsEnv)), &ep); err != nil {
		return fail(fmt.Errorf("endpoints: %w", err))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := &env{endpoints: ep, names: new(atomic.Int64)} // no admin connections: a holder checks nothing
	c, err := lib.open(ctx, e, os.Getenv(mutexEnv), openOptions{failover: true})
	if err != nil {
		return fail(err)
	}
	defer c.close()
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	release, err := c.acquire(actx)
	acancel()
	if err != nil {
		return fail(err)
	}
	if k, ok := c.(keeper); ok {
		go k.keep(ctx)
	}
	fmt.Println(holderReady)
	<-ctx.Done()
	_ = release(context.Background())
	return 0
}
