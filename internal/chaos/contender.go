package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
)

// ContenderConfig describes one contender of a scenario. The harness passes it to a
// contender process as JSON in the environment.
type ContenderConfig struct {
	Store       string        // kit name: "redis", "mariadb", "zookeeper"
	Addr        string        // the store address the contender uses (its proxy)
	Mutex       string        // the mutex contended for
	ID          string        // the contender ID
	TTL         time.Duration // the service options
	Transition  time.Duration
	CallTimeout time.Duration
	RenewalLead time.Duration // zero: simba's default
	Referee     string        // the referee's address
	Log         string        // the event log path
	WriteEvery  time.Duration // how often an owner writes to the referee
	IncPause    time.Duration // the pause inside a shadow-counter increment
	SessionTTL  time.Duration // ZooKeeper session timeout

	WorkPause    time.Duration // the time between checking the tenure context and writing
	SlowAcquired time.Duration // OnAcquired blocks this long after it begins (scenario 6)
	Panics       bool          // the callbacks panic after logging (scenario 6)

	// Hold, if set, makes the contender a holder of a semaphore or read-write lock of the
	// name Mutex instead of a mutex's service: see holder.
	Hold *HoldModel
	// HoldFor is how long a holder keeps each hold before it releases it.
	HoldFor time.Duration
	// SlotEvery, if set, makes the contender a simba.Scheduler whose slots are the
	// multiples of SlotEvery: see runScheduled.
	SlotEvery time.Duration

	// Debug, if set, gets the service's log from the debug level on: a contender process
	// writes it to its stderr, which the run keeps with the event logs, so that a failed
	// scenario's hand-overs and retries can be read afterwards.
	Debug io.Writer `json:"-"`
}

// roleEnv and configEnv carry a contender process's role and configuration.
const (
	roleEnv   = "SIMBA_CHAOS_ROLE"
	configEnv = "SIMBA_CHAOS_CONTENDER"
)

// ContenderMain runs a contender process if this process was started as one, and reports
// whether it was. A TestMain calls it first and exits with the code it returns.
func ContenderMain() (code int, isContender bool) {
	if os.Getenv(roleEnv) != "contender" {
		return 0, false
	}
	var cfg ContenderConfig
	if err := json.Unmarshal([]byte(os.Getenv(configEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos contender: bad configuration:", err)
		return 2, true
	}
	quietDrivers()
	cfg.Debug = os.Stderr
	commands := make(chan string)
	go func() { // ends with the process
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			commands <- strings.TrimSpace(sc.Text())
		}
		close(commands)
	}()
	if err := RunContender(context.Background(), cfg, commands); err != nil {
		fmt.Fprintln(os.Stderr, "chaos contender:", err)
		return 1, true
	}
	return 0, true
}

// RunContender runs one contender until commands closes or says "exit": "start" starts
// its service, "stop" stops it, "yield" steps down and goes on contending, "handoff ID"
// hands the mutex to the waiting contender ID and goes on contending (the deadline of
// both is T + G). While it believes it owns the mutex, it writes to the
// referee with its token and increments the shadow counter. Every step is logged.
func RunContender(ctx context.Context, cfg ContenderConfig, commands <-chan string) error {
	k, ok := kits[cfg.Store]
	if !ok {
		return fmt.Errorf("no store kit %q", cfg.Store)
	}
	log, err := CreateLog(cfg.Log, cfg.ID)
	if err != nil {
		return err
	}
	defer log.Close()
	// A contender started while its store's connections are slow (scenario 16) or the
	// server restarts may fail to check the store at first, as Start may.
	var (
		backend      simba.Backend
		closeBackend func()
	)
	err = retrying(log, func() error {
		var err error
		backend, closeBackend, err = k.Backend(ctx, cfg)
		return err
	})
	if err != nil {
		log.Add(KindError, 0, 0, "backend: "+err.Error())
		return err
	}
	defer closeBackend()
	ref, err := DialReferee(cfg.Referee)
	if err != nil {
		return err
	}
	defer ref.Close()
	if cfg.Hold != nil {
		return runHolder(ctx, cfg, backend, log, ref, commands)
	}
	if cfg.SlotEvery > 0 {
		return runScheduled(ctx, cfg, backend, log, commands)
	}

	c := &contender{cfg: cfg, log: log, ref: ref}
	opts := []simba.ServiceOption{simba.WithTTL(cfg.TTL), simba.WithTransition(cfg.Transition),
		simba.WithLogger(cfg.logger())}
	if cfg.CallTimeout > 0 {
		opts = append(opts, simba.WithCallTimeout(cfg.CallTimeout))
	}
	if cfg.RenewalLead > 0 {
		opts = append(opts, simba.WithRenewalLead(cfg.RenewalLead))
	}
	svc, err := simba.NewService(backend, simba.ContenderFuncs{
		MutexName: cfg.Mutex, ID: cfg.ID, Acquired: c.acquired, Released: c.released,
	}, opts...)
	if err != nil {
		return err
	}
	c.svc = svc
	defer svc.Close()
	for cmd := range commands {
		if to, ok := strings.CutPrefix(cmd, "handoff "); ok {
			log.Add(KindHandOff, 0, 0, to)
			hctx, cancel := context.WithTimeout(ctx, cfg.TTL+cfg.Transition)
			err := svc.HandOff(hctx, to)
			cancel()
			log.Add(KindHandedOff, 0, 0, errText(err))
			continue
		}
		switch cmd {
		case "start":
			log.Add(KindStart, 0, 0, "")
			err := startRetrying(ctx, svc, log)
			log.Add(KindStarted, 0, 0, errText(err))
		case "stop":
			log.Add(KindStop, 0, 0, "")
			err := svc.Stop(ctx)
			log.Add(KindStopped, 0, 0, errText(err))
		case "yield":
			log.Add(KindYield, 0, 0, "")
			yctx, cancel := context.WithTimeout(ctx, cfg.TTL+cfg.Transition)
			err := svc.Yield(yctx)
			cancel()
			log.Add(KindYielded, 0, 0, errText(err))
		case "exit":
			if svc.Status() == simba.StatusRunning {
				log.Add(KindStop, 0, 0, "")
				err := svc.Stop(ctx)
				log.Add(KindStopped, 0, 0, errText(err))
			}
			return nil
		}
	}
	return nil
}

// startRetrying starts svc, retrying a failed start-up (Start fails fast, and a server
// restarted by the previous fault may still be warming up), as a service would at its
// own start.
func startRetrying(ctx context.Context, svc interface{ Start(context.Context) error }, log *Log) error {
	return retrying(log, func() error {
		if err := svc.Start(ctx); !errors.Is(err, simba.ErrAlreadyStarted) {
			return err
		}
		return nil
	})
}

// retrying calls f until it succeeds or startPatience has passed, logging each failure
// as a retry, and returns f's last error.
func retrying(log *Log, f func() error) error {
	deadline := time.Now().Add(startPatience)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		log.Add(KindRetry, 0, 0, err.Error())
		time.Sleep(100 * time.Millisecond)
	}
}

// startPatience is how long a contender process retries its start-up (the backend's
// checks, then Start).
const startPatience = 10 * time.Second

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// contender is the callbacks' side of a contender: a writer runs while it believes.
type contender struct {
	cfg ContenderConfig
	log *Log
	ref *RefereeClient
	svc *simba.Service

	mu     sync.Mutex
	writer sync.WaitGroup
	seq    uint64
}

func (c *contender) acquired(ctx context.Context, s simba.State) {
	tok := s.After.Token
	// A tenure may have ended while this callback waited its turn (a Start that timed
	// out after the store had named this contender, say): the writer then writes nothing.
	c.log.Acquired(ctx, tok)
	c.writer.Go(func() { c.write(ctx, tok) })
	if c.cfg.SlowAcquired > 0 {
		time.Sleep(c.cfg.SlowAcquired)
	}
	if c.cfg.Panics {
		panic("chaos: OnAcquired panics on purpose")
	}
}

func (c *contender) released(s simba.State) {
	c.writer.Wait() // its context ended before OnReleased was delivered
	c.log.Add(KindReleased, s.Before.Token, 0, "")
	if c.cfg.Panics {
		panic("chaos: OnReleased panics on purpose")
	}
}

// write acts on the protected resource while ctx lives: a fenced write, then an unfenced
// read–pause–write increment of the shadow counter. It writes with the token the service
// reports for the tenure now (the one OnAcquired gave, unless a backend lets it drift),
// and WorkPause after it last checked ctx, as real work between a check and an act.
func (c *contender) write(ctx context.Context, token uint64) {
	every := c.cfg.WriteEvery
	if every <= 0 {
		every = 20 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			// Both were ready (the context ended while the last write was under way), and
			// select picked the tick: belief is checked right before the act.
			return
		}
		if o := c.svc.Owner(); o.ID == c.cfg.ID && o.Token != 0 {
			token = o.Token
		}
		if c.cfg.WorkPause > 0 {
			c.log.Add(KindWork, token, 0, "")
			time.Sleep(c.cfg.WorkPause)
		}
		c.mu.Lock()
		c.seq++
		seq := c.seq
		c.mu.Unlock()
		// The write and the increment are one act, begun after the check above: what a
		// pause can delay past the end of belief.
		if _, err := c.ref.Write(c.cfg.Mutex, token, c.cfg.ID, seq); err != nil {
			c.log.Add(KindError, token, seq, "referee: "+err.Error())
			return
		}
		if err := c.ref.Increment(c.cfg.Mutex, c.cfg.IncPause); err != nil {
			c.log.Add(KindError, token, seq, "shadow: "+err.Error())
			return
		}
		c.log.Add(KindIncrement, token, seq, "")
	}
}

// quietDrivers silences what the store clients print on their own (go-redis's failed
// dials, go-sql-driver's broken connections): in the fault suite those are the faults.
func quietDrivers() {
	goredis.SetLogger(discardRedisLog{})
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
}

type discardRedisLog struct{}

func (discardRedisLog) Printf(context.Context, string, ...any) {}

// logger is the logger of the contender's service: Debug's, or none.
func (cfg ContenderConfig) logger() *slog.Logger {
	if cfg.Debug == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(cfg.Debug, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
