package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/storeurl"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

const usage = `usage: simba [flags] <command> [arguments]

commands:
  get <mutex>       show the owner record of a mutex
  list [--held]     list the mutexes the store holds records for, with their owners
                    (--held: only those with an owner)
  watch <mutex>     print every change of owner until interrupted
  release <mutex>   release a mutex whoever owns it (asks for confirmation)
  prune             SQL only: delete the rows of mutexes without an owner for longer
                    than --older-than (asks for confirmation)
  exec <mutex> -- <command> [args]
                    run a command while holding the mutex; the command gets SIMBA_MUTEX,
                    SIMBA_OWNER and SIMBA_FENCING_TOKEN, and simba exits with its status
                    (3: the mutex is held; 4: the lease was lost and the command stopped)
  version           print the version of this command

  get, list, watch and release --kind semaphore|rwlock <name> [holder]
                    the same for semaphores and read-write locks: their holders (mode
                    permit, shared or exclusive, token, time left); watch polls every
                    second; release takes the holder's ID and frees that hold only

flags (before or after the command):
  --store URL       the store: redis://, redis-sentinel://, mysql://, postgres://, zk://, etcd://
                    (default $SIMBA_STORE)
  --json            print JSON (watch: one object a line)
  --timeout D       bound each store call but watch's (default 10s, at most 24h); a Redis
                    URL's dial_timeout, read_timeout and write_timeout default to it
  --transition D    the owners' transition (default 6s): Redis keeps only when an owner's
                    transition ends, and the TTL end shown there is derived with D
  --older-than D    prune: rows without an owner for longer than D (default 1h)
  --yes             release or prune without asking
  --kind K          get, list, watch, release: mutex (default), semaphore or rwlock
  --wait            exec: wait for the mutex (for at most --timeout, if given) instead of
                    giving up at once when it is held
  --ttl D           exec: the lease's TTL (default 10s); its transition is --transition
  --grace D         exec: when the lease is lost or simba is interrupted, the command's
                    process group gets SIGTERM, and SIGKILL D later (default half the
                    transition; less than the transition, so that the command is gone
                    before another owner can acquire)
`

// Bounds of the flags.
const maxTimeout = 24 * time.Hour

// cli is one invocation: its flags and streams.
type cli struct {
	store      string
	json       bool
	timeout    time.Duration
	transition time.Duration
	held       bool
	olderThan  time.Duration
	yes        bool
	wait       bool
	ttl        time.Duration
	grace      time.Duration
	kind       string
	holdKind   backend.Kind // --kind's
	timeoutSet bool         // --timeout was given
	stdin      *bufio.Reader
	stdinRaw   io.Reader
	stdout     io.Writer
	stderr     io.Writer
	shown      *strings.Replacer // nil, or shows the store's URL as given where the opened one (clientTimeouts) appears
}

// onlyFor names the commands a flag applies to, for the flags that apply to few.
var onlyFor = map[string][]string{
	"held":       {"list"},
	"older-than": {"prune"},
	"yes":        {"release", "prune"},
	"wait":       {"exec"},
	"ttl":        {"exec"},
	"grace":      {"exec"},
	"kind":       {"get", "list", "watch", "release"},
}

// args is how many arguments each command takes; exec takes the mutex and a command line.
var args = map[string]int{"get": 1, "list": 0, "watch": 1, "release": 1, "prune": 0, "version": 0, "exec": 2}

// run runs the command line argv and returns the exit status.
func run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: bufio.NewReader(stdin), stdinRaw: stdin, stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("simba", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.store, "store", os.Getenv("SIMBA_STORE"), "")
	fs.BoolVar(&c.json, "json", false, "")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "")
	fs.DurationVar(&c.transition, "transition", simba.DefaultTransition, "")
	fs.BoolVar(&c.held, "held", false, "")
	fs.DurationVar(&c.olderThan, "older-than", time.Hour, "")
	fs.BoolVar(&c.yes, "yes", false, "")
	fs.BoolVar(&c.wait, "wait", false, "")
	fs.DurationVar(&c.ttl, "ttl", simba.DefaultTTL, "")
	fs.DurationVar(&c.grace, "grace", 0, "")
	fs.StringVar(&c.kind, "kind", "mutex", "")
	pos, err := parse(fs, argv)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	case err != nil:
		return c.usage(err.Error())
	case len(pos) == 0:
		return c.usage("no command")
	}
	cmd, pos := pos[0], pos[1:]
	want, ok := args[cmd]
	if !ok {
		return c.usage(fmt.Sprintf("unknown command %q", cmd))
	}
	if c.holdKind, ok = kinds[c.kind]; !ok {
		return c.usage(fmt.Sprintf("--kind %q must be mutex, semaphore or rwlock", c.kind))
	}
	if msg := c.checkArity(cmd, pos, want); msg != "" {
		return c.usage(msg)
	}
	if msg := c.check(fs, cmd); msg != "" {
		return c.usage(msg)
	}
	if cmd == "version" {
		return c.done(c.version())
	}
	s, err := storeurl.Open(clientTimeouts(c.store, c.timeout))
	if err != nil {
		return c.done(err)
	}
	defer s.Close()
	if u, err := url.Parse(c.store); err == nil {
		c.shown = strings.NewReplacer(s.String(), u.Redacted()) // the URL as given, in messages
	}
	return c.dispatch(ctx, s, cmd, pos)
}

// checkArity returns what is wrong with the number of arguments pos of cmd, which takes
// want, or "".
func (c *cli) checkArity(cmd string, pos []string, want int) string {
	switch {
	case c.holdKind != backend.Mutex && cmd == "release":
		if len(pos) != 2 {
			return fmt.Sprintf("release --kind %s takes the name and the holder's ID, got %d argument(s)", c.kind, len(pos))
		}
	case cmd == "exec" && len(pos) < want:
		return "exec takes a mutex and a command: exec <mutex> -- <command> [args]"
	case cmd != "exec" && len(pos) != want:
		return fmt.Sprintf("%s takes %d argument(s), got %d", cmd, want, len(pos))
	}
	return ""
}

// dispatch runs cmd with its arguments pos on store s and returns the exit status.
func (c *cli) dispatch(ctx context.Context, s *storeurl.Store, cmd string, pos []string) int {
	var err error
	if c.holdKind != backend.Mutex {
		switch cmd {
		case "get":
			err = c.getHolds(ctx, s, pos[0])
		case "list":
			err = c.getHolds(ctx, s, "")
		case "watch":
			err = c.watchHolds(ctx, s, pos[0])
		case "release":
			err = c.releaseHold(ctx, s, pos[0], pos[1])
		}
		return c.done(err)
	}
	switch cmd {
	case "get":
		err = c.get(ctx, s, pos[0])
	case "list":
		err = c.list(ctx, s)
	case "watch":
		err = c.watch(ctx, s, pos[0])
	case "release":
		err = c.release(ctx, s, pos[0])
	case "prune":
		err = c.prune(ctx, s)
	case "exec":
		return c.execCmd(ctx, s, pos[0], pos[1:])
	}
	return c.done(err)
}

// check returns what is wrong with the flags for cmd, or "".
func (c *cli) check(fs *flag.FlagSet, cmd string) string {
	var msg string
	fs.Visit(func(f *flag.Flag) {
		if cmds, ok := onlyFor[f.Name]; ok && !slices.Contains(cmds, cmd) && msg == "" {
			msg = fmt.Sprintf("--%s applies to %s only", f.Name, strings.Join(cmds, " and "))
		}
		c.timeoutSet = c.timeoutSet || f.Name == "timeout"
	})
	if cmd == "exec" && msg == "" {
		msg = c.checkExec()
	}
	switch {
	case msg != "":
		return msg
	case cmd == "version":
		return ""
	case c.store == "":
		return "no store: give --store or set SIMBA_STORE"
	case c.timeout <= 0 || c.timeout > maxTimeout:
		return fmt.Sprintf("--timeout %s must be more than 0 and at most %s", c.timeout, maxTimeout)
	case c.transition < 0 || c.transition%time.Millisecond != 0:
		return fmt.Sprintf("--transition %s must be >= 0 and a whole number of milliseconds", c.transition)
	case c.olderThan < 0:
		return fmt.Sprintf("--older-than %s must be >= 0", c.olderThan)
	}
	return ""
}

// checkExec returns what is wrong with exec's flags, or "", and defaults --grace to half
// the transition.
func (c *cli) checkExec() string {
	if c.grace == 0 {
		c.grace = c.transition / 2
	}
	switch {
	case c.ttl <= 0 || c.ttl%time.Millisecond != 0:
		return fmt.Sprintf("--ttl %s must be more than 0 and a whole number of milliseconds", c.ttl)
	case c.transition <= 0:
		return "exec needs a transition (--transition) longer than --grace: the command must be gone before another owner can acquire"
	case c.grace <= 0 || c.grace >= c.transition:
		return fmt.Sprintf("--grace %s must be more than 0 and less than the transition (%s)", c.grace, c.transition)
	}
	return ""
}

// clientTimeouts returns a Redis URL with its client's own timeouts (dial_timeout,
// read_timeout, write_timeout: 5s and 3s by default) set to d where it does not name them,
// so that d, not those, bounds a call; other URLs as they are.
func clientTimeouts(raw string, d time.Duration) string {
	u, err := url.Parse(raw)
	if err != nil || !strings.HasPrefix(u.Scheme, "redis") {
		return raw // Open reports what is wrong with it
	}
	q := u.Query()
	for _, name := range []string{"dial_timeout", "read_timeout", "write_timeout"} {
		if !q.Has(name) {
			q.Set(name, d.String())
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// parse parses flags anywhere among args and returns the other arguments.
// Everything after "--" is an argument, flags or not (exec's command line).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		rest := args
		if i := slices.Index(args, "--"); i >= 0 {
			args, rest = args[:i], args[i:]
		} else {
			rest = nil
		}
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			if len(rest) > 0 {
				return append(pos, rest[1:]...), nil
			}
			return pos, nil
		}
		pos, args = append(pos, args[0]), append(args[1:], rest...)
	}
}

func (c *cli) usage(msg string) int {
	fmt.Fprintf(c.stderr, "simba: %s\n\n%s", msg, usage)
	return exitUsage
}

// done reports err, if any, and returns the exit status: bad input (a store URL that does
// not parse, a mutex name the store refuses) is bad usage.
func (c *cli) done(err error) int {
	return c.fail(err, exitFail)
}

// fail prints err, if any, on one line and returns its exit status: 0 without an error,
// exitUsage for bad input, code otherwise.
func (c *cli) fail(err error, code int) int {
	if err == nil {
		return exitOK
	}
	msg := strings.TrimPrefix(err.Error(), "simba: ")
	if c.shown != nil {
		msg = c.shown.Replace(msg)
	}
	fmt.Fprintf(c.stderr, "simba: %s\n", msg)
	if errors.Is(err, simba.ErrInvalidArgument) {
		return exitUsage
	}
	return code
}

// record is an owner record as the command prints it.
type record struct {
	Mutex        string     `json:"mutex"`
	Owner        string     `json:"owner"`
	Token        uint64     `json:"token,omitempty"`
	AcquiredAt   *time.Time `json:"acquired_at,omitempty"`
	TTLAt        *time.Time `json:"ttl_at,omitempty"`
	TransitionAt *time.Time `json:"transition_at,omitempty"`
	Value        string     `json:"value,omitempty"` // the owner value (simba.WithOwnerValue)
}

func newRecord(mutex string, o simba.Owner) record {
	r := record{Mutex: mutex, Owner: o.ID, Token: o.Token, Value: o.Value}
	r.AcquiredAt, r.TTLAt, r.TransitionAt = instant(o.AcquiredAt), instant(o.TTLAt), instant(o.TransitionAt)
	return r
}

// call runs f, the store call what, bounded by the timeout. A call that the timeout ends
// says so in the same words whatever it was waiting for (a connection, a session, an
// answer).
func (c *cli) call(ctx context.Context, what string, f func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := f(cctx)
	if err != nil && ctx.Err() == nil && cctx.Err() != nil {
		return &noAnswerError{what: what, after: c.timeout, err: err}
	}
	return err
}

// noAnswerError is a store call that the timeout ended.
type noAnswerError struct {
	what  string
	after time.Duration
	err   error
}

func (e *noAnswerError) Error() string {
	return fmt.Sprintf("%s: no answer from the server within %s (--timeout)", e.what, e.after)
}

func (e *noAnswerError) Unwrap() error { return e.err }

// lookup reads the owner of mutex. Its store calls are bounded by the timeout, not by
// simba's default call timeout (a quarter of the TTL, which must exceed it: a reader's
// TTL is used for nothing else), and a Redis owner's TTL end is derived with the
// transition.
func (c *cli) lookup(ctx context.Context, s *storeurl.Store, mutex string) (o simba.Owner, err error) {
	ttl := max(simba.DefaultTTL, c.timeout.Truncate(time.Millisecond)+time.Millisecond)
	err = c.call(ctx, fmt.Sprintf("look up %q", mutex), func(ctx context.Context) error {
		o, err = simba.Lookup(ctx, s.Backend(), mutex,
			simba.WithTTL(ttl), simba.WithCallTimeout(c.timeout), simba.WithTransition(c.transition))
		return err
	})
	return o, err
}

func (c *cli) get(ctx context.Context, s *storeurl.Store, mutex string) error {
	o, err := c.lookup(ctx, s, mutex)
	if err != nil {
		return err
	}
	c.noteDerived(s, o)
	return c.print([]record{newRecord(mutex, o)}, false)
}

func (c *cli) list(ctx context.Context, s *storeurl.Store) error {
	var names []string
	err := c.call(ctx, "list", func(ctx context.Context) (err error) {
		names, err = s.List(ctx)
		return err
	})
	if err != nil {
		return err
	}
	records := make([]record, 0, len(names))
	var owned simba.Owner
	for _, name := range names {
		o, err := c.lookup(ctx, s, name)
		if err != nil {
			return err
		}
		if c.held && !o.HasOwner(time.Now()) {
			continue
		}
		if !o.IsZero() {
			owned = o
		}
		records = append(records, newRecord(name, o))
	}
	c.noteDerived(s, owned)
	return c.print(records, true)
}

// noteDerived says, on a Redis store, how the TTL end of owner o was derived.
func (c *cli) noteDerived(s *storeurl.Store, o simba.Owner) {
	if s.RedisClient() != nil && !o.IsZero() {
		fmt.Fprintf(c.stderr, "simba: Redis keeps only when an owner's transition ends; the TTL end is derived from it with --transition %s\n", c.transition)
	}
}

// print writes records as a JSON value (an array when many) or a table.
func (c *cli) print(records []record, many bool) error {
	if c.json {
		var v any = records
		if !many {
			v = records[0]
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	now := time.Now()
	// The VALUE column only where an owner has a value: the table stays as it was for
	// scripts that read it from stores or services that keep none.
	values := slices.ContainsFunc(records, func(r record) bool { return r.Value != "" })
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	head := "MUTEX\tOWNER\tTOKEN\tHELD\tTTL LEFT\tTRANSITION LEFT"
	if values {
		head += "\tVALUE"
	}
	fmt.Fprintln(w, head)
	for _, r := range records {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s", r.Mutex, dash(r.Owner), token(r.Token),
			since(now, r.AcquiredAt), until(now, r.TTLAt), until(now, r.TransitionAt))
		if values {
			fmt.Fprintf(w, "\t%s", dash(r.Value))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func token(t uint64) string {
	if t == 0 {
		return "-"
	}
	return strconv.FormatUint(t, 10)
}

// tokenNote is " (token N)", or nothing when the store does not tell the token.
func tokenNote(t uint64) string {
	if t == 0 {
		return ""
	}
	return " (token " + strconv.FormatUint(t, 10) + ")"
}

func since(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return now.Sub(*t).Round(time.Millisecond).String()
}

func until(now time.Time, t *time.Time) string {
	if t == nil {
		return "-"
	}
	return max(t.Sub(now), 0).Round(time.Millisecond).String()
}

// watch prints the owner of mutex, then every change, until ctx ends (an interrupt).
func (c *cli) watch(ctx context.Context, s *storeurl.Store, mutex string) error {
	first, err := c.lookup(ctx, s, mutex)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	changes, err := simba.Observe(ctx, s.Backend(), mutex) // its start is bounded by the call timeout
	if err != nil {
		return err
	}
	last := first.ID
	if err := c.change(mutex, first); err != nil {
		return err
	}
	for o := range changes {
		if o.ID == last {
			continue
		}
		last = o.ID
		if err := c.change(mutex, o); err != nil {
			cancel()
			for range changes { // wait for the observation to stop
			}
			return err
		}
	}
	return nil
}

// change prints one owner of a watch: a JSON object a line, or a line of text.
func (c *cli) change(mutex string, o simba.Owner) error {
	r := newRecord(mutex, o)
	if c.json {
		type event struct {
			At time.Time `json:"at"`
			record
		}
		return json.NewEncoder(c.stdout).Encode(event{time.Now().Round(0).Truncate(time.Millisecond), r})
	}
	line := fmt.Sprintf("%s  %s  owner %s  token %s", time.Now().Format(time.RFC3339Nano), mutex, dash(r.Owner), token(r.Token))
	if r.Value != "" {
		line += "  value " + r.Value
	}
	_, err := fmt.Fprintln(c.stdout, line)
	return err
}

// release releases mutex whoever owns it, once the owner it looked up is confirmed.
func (c *cli) release(ctx context.Context, s *storeurl.Store, mutex string) error {
	o, err := c.lookup(ctx, s, mutex)
	if err != nil {
		return err
	}
	if o.IsZero() {
		fmt.Fprintf(c.stdout, "%s has no owner: nothing to release\n", mutex)
		return nil
	}
	fmt.Fprintf(c.stderr, `%s is owned by %s%s.
A forced release frees the mutex on the store only. The owner is not told: it goes on
believing it owns the mutex until its next renewal finds out, up to a TTL from now, while
another contender may acquire at once. Only the fencing token protects the resource then:
the next owner's token is greater, and a resource that rejects lower tokens refuses the old
owner's writes. A resource that does not check tokens may see both owners write.
`, mutex, o.ID, tokenNote(o.Token))
	if err := c.confirm("Type the mutex name to release it: ", mutex, "release"); err != nil {
		return err
	}
	if err := c.call(ctx, fmt.Sprintf("release %q", mutex), func(ctx context.Context) error { return s.Release(ctx, mutex, o) }); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(c.stdout).Encode(struct {
			Released record `json:"released"`
		}{newRecord(mutex, o)})
	}
	fmt.Fprintf(c.stdout, "released %s from %s%s\n", mutex, o.ID, tokenNote(o.Token))
	return nil
}

// confirm asks the user to type want, unless --yes was given, and fails when they do not.
func (c *cli) confirm(prompt, want, what string) error {
	if c.yes {
		return nil
	}
	fmt.Fprint(c.stderr, prompt)
	line, err := c.stdin.ReadString('\n')
	if strings.TrimSpace(line) != want {
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		return fmt.Errorf("%s not confirmed: nothing was done", what)
	}
	return nil
}

// prune deletes the rows of mutexes without an owner for longer than --older-than from
// a SQL store's table (jdbc.Backend.Prune), once confirmed.
func (c *cli) prune(ctx context.Context, s *storeurl.Store) error {
	b, ok := s.Backend().(*jdbc.Backend)
	if !ok {
		return simba.InvalidArgument("prune", s.String(), "only SQL stores keep rows of mutexes nobody holds; this one has nothing to prune")
	}
	fmt.Fprintf(c.stderr, `prune deletes from the table of %s the rows of mutexes that have had no owner
for more than %s. A row with an owner is never deleted, and a pruned mutex gets its row
back at its next use.
`, s, c.olderThan)
	if err := c.confirm("Type prune to go on: ", "prune", "prune"); err != nil {
		return err
	}
	var n int64
	err := c.call(ctx, "prune", func(ctx context.Context) (err error) {
		n, err = b.Prune(ctx, c.olderThan)
		return err
	})
	if err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(c.stdout).Encode(struct {
			Pruned int64 `json:"pruned"`
		}{n})
	}
	_, err = fmt.Fprintf(c.stdout, "pruned %d rows of mutexes without an owner for more than %s\n", n, c.olderThan)
	return err
}

// version prints the module version this command was built from: "(devel)" from a
// checkout, a tag with go install ...@version.
func (c *cli) version() error {
	v, goVersion := "unknown", runtime.Version()
	if info, ok := debug.ReadBuildInfo(); ok {
		v, goVersion = info.Main.Version, info.GoVersion
	}
	if c.json {
		return json.NewEncoder(c.stdout).Encode(struct {
			Version string `json:"version"`
			Go      string `json:"go"`
		}{v, goVersion})
	}
	_, err := fmt.Fprintf(c.stdout, "simba %s %s\n", v, goVersion)
	return err
}
