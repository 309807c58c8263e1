package chaos

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Referee stands for the resource a mutex protects. Contenders that believe they own the
// mutex write to it with their fencing token; it accepts a write only if the token is at
// least the highest it has seen for the mutex, and logs every accept and reject. Beside
// it, an unfenced shadow counter that contenders update read–pause–write: increments lost
// there prove that two contenders really acted at once.
type Referee struct {
	ln  net.Listener
	log *Log

	mu      sync.Mutex
	highest map[string]uint64
	holds   map[string]*holdFence // by the name of a semaphore or read-write lock
	shadow  map[string]int64
	fenced  bool // false only in the mutation run that disables fencing
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// NewReferee listens on a free loopback port and logs to log. fenced false turns the token
// check off (a mutation the checker must catch).
func NewReferee(log *Log, fenced bool) (*Referee, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Referee{ln: ln, log: log, highest: map[string]uint64{}, holds: map[string]*holdFence{}, shadow: map[string]int64{}, fenced: fenced, conns: map[net.Conn]struct{}{}}
	r.wg.Go(r.accept)
	return r, nil
}

// Addr returns the referee's address.
func (r *Referee) Addr() string { return r.ln.Addr().String() }

// Shadow returns the shadow counter of mutex.
func (r *Referee) Shadow(mutex string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.shadow[mutex]
}

// Close stops the referee and waits for its goroutines.
func (r *Referee) Close() error {
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *Referee) accept() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.mu.Lock()
		r.conns[c] = struct{}{}
		r.mu.Unlock()
		r.wg.Go(func() {
			defer func() {
				r.mu.Lock()
				delete(r.conns, c)
				r.mu.Unlock()
				_ = c.Close()
			}()
			r.serve(c)
		})
	}
}

// serve answers one client. Requests, one per line:
//
//	W <mutex> <token> <proc> <seq>   -> OK | STALE <highest>
//	H <name> <mode> <permits> <token> <proc> <seq>   -> OK | STALE (a hold's act, see holdFence)
//	G <mutex>                        -> <shadow value>
//	S <mutex> <value>                -> OK
func (r *Referee) serve(c net.Conn) {
	in := bufio.NewScanner(c)
	out := bufio.NewWriter(c)
	for in.Scan() {
		f := strings.Fields(in.Text())
		var reply string
		switch {
		case len(f) == 5 && f[0] == "W":
			tok, err1 := strconv.ParseUint(f[2], 10, 64)
			seq, err2 := strconv.ParseUint(f[4], 10, 64)
			if err1 != nil || err2 != nil {
				reply = "ERR bad number"
				break
			}
			reply = r.write(f[1], tok, f[3], seq)
		case len(f) == 7 && f[0] == "H":
			permits, err1 := strconv.Atoi(f[3])
			tok, err2 := strconv.ParseUint(f[4], 10, 64)
			seq, err3 := strconv.ParseUint(f[6], 10, 64)
			if err1 != nil || err2 != nil || err3 != nil {
				reply = "ERR bad number"
				break
			}
			reply = r.hold(f[1], f[2], permits, tok, f[5], seq)
		case len(f) == 2 && f[0] == "G":
			r.mu.Lock()
			reply = strconv.FormatInt(r.shadow[f[1]], 10)
			r.mu.Unlock()
		case len(f) == 3 && f[0] == "S":
			v, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				reply = "ERR bad number"
				break
			}
			r.mu.Lock()
			r.shadow[f[1]] = v
			r.mu.Unlock()
			reply = "OK"
		default:
			reply = "ERR bad request"
		}
		_, _ = out.WriteString(reply + "\n")
		if out.Flush() != nil {
			return
		}
	}
}

func (r *Referee) write(mutex string, token uint64, proc string, seq uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	high := r.highest[mutex]
	if r.fenced && token < high {
		r.log.Put(Event{At: Now(), Proc: proc, Kind: KindWriteStale, Token: token, Seq: seq, Note: mutex})
		return "STALE " + strconv.FormatUint(high, 10)
	}
	r.highest[mutex] = max(high, token)
	r.log.Put(Event{At: Now(), Proc: proc, Kind: KindWriteOK, Token: token, Seq: seq, Note: mutex})
	return "OK"
}

// hold judges an act of a hold of name by the name's fence.
func (r *Referee) hold(name, mode string, permits int, token uint64, proc string, seq uint64) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	fence := r.holds[name]
	if fence == nil {
		fence = newHoldFence(permits)
		r.holds[name] = fence
	}
	e := Event{At: Now(), Proc: proc, Kind: KindWriteOK, Token: token, Seq: seq, Note: name, Mode: mode}
	if r.fenced && !fence.admit(token, mode, e.At) {
		e.Kind = KindWriteStale
		r.log.Put(e)
		return "STALE"
	}
	r.log.Put(e)
	return "OK"
}

// RefereeClient talks to a referee over one connection. It is not safe for concurrent use.
type RefereeClient struct {
	c  net.Conn
	rd *bufio.Reader
}

// DialReferee connects to the referee at addr.
func DialReferee(addr string) (*RefereeClient, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &RefereeClient{c: c, rd: bufio.NewReader(c)}, nil
}

func (rc *RefereeClient) call(req string) (string, error) {
	_ = rc.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write([]byte(req + "\n")); err != nil {
		return "", err
	}
	line, err := rc.rd.ReadString('\n')
	return strings.TrimSpace(line), err
}

// Write writes to the protected resource with a fencing token; it reports whether the
// referee accepted it.
func (rc *RefereeClient) Write(mutex string, token uint64, proc string, seq uint64) (bool, error) {
	reply, err := rc.call(fmt.Sprintf("W %s %d %s %d", mutex, token, proc, seq))
	if err != nil {
		return false, err
	}
	return reply == "OK", nil
}

// Hold acts on the protected resource as a hold of mode (modePermit, modeRead,
// modeWrite) of a semaphore of permits (zero: a read-write lock); it reports whether the
// referee accepted the act.
func (rc *RefereeClient) Hold(name, mode string, permits int, token uint64, proc string, seq uint64) (bool, error) {
	reply, err := rc.call(fmt.Sprintf("H %s %s %d %d %s %d", name, mode, permits, token, proc, seq))
	if err != nil {
		return false, err
	}
	return reply == "OK", nil
}

// Increment adds one to the shadow counter the unfenced way: read, pause, write.
func (rc *RefereeClient) Increment(mutex string, pause time.Duration) error {
	reply, err := rc.call("G " + mutex)
	if err != nil {
		return err
	}
	v, err := strconv.ParseInt(reply, 10, 64)
	if err != nil {
		return fmt.Errorf("shadow value %q: %w", reply, err)
	}
	time.Sleep(pause)
	_, err = rc.call(fmt.Sprintf("S %s %d", mutex, v+1))
	return err
}

// Close closes the connection.
func (rc *RefereeClient) Close() error { return rc.c.Close() }
