package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/simba-go/simba"
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
  list              list the mutexes the store holds records for, with their owners
  watch <mutex>     print every change of owner until interrupted
  release <mutex>   release a mutex whoever owns it (asks for confirmation)

flags (before or after the command):
  --store URL       the store: redis://, redis-sentinel://, mysql://, postgres://, zk:// (default $SIMBA_STORE)
  --json            print JSON (watch: one object a line)
  --timeout D       bound every store call but watch's (default 10s)
  --yes             release without asking
`

// cli is one invocation: its flags and streams.
type cli struct {
	store   string
	json    bool
	timeout time.Duration
	yes     bool
	stdin   *bufio.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// run runs the command line args and returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: bufio.NewReader(stdin), stdout: stdout, stderr: stderr}
	fs := flag.NewFlagSet("simba", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.store, "store", os.Getenv("SIMBA_STORE"), "")
	fs.BoolVar(&c.json, "json", false, "")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "")
	fs.BoolVar(&c.yes, "yes", false, "")
	pos, err := parse(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK
	case err != nil:
		return c.usage(err.Error())
	case len(pos) == 0:
		return c.usage("no command")
	case c.store == "":
		return c.usage("no store: give --store or set SIMBA_STORE")
	case c.timeout <= 0:
		return c.usage("--timeout must be positive")
	}
	cmd, pos := pos[0], pos[1:]
	want := 1
	if cmd == "list" {
		want = 0
	}
	switch cmd {
	case "get", "list", "watch", "release":
	default:
		return c.usage(fmt.Sprintf("unknown command %q", cmd))
	}
	if len(pos) != want {
		return c.usage(fmt.Sprintf("%s takes %d argument(s), got %d", cmd, want, len(pos)))
	}
	s, err := storeurl.Open(c.store)
	if err != nil {
		return c.fail(err)
	}
	defer s.Close()
	switch cmd {
	case "get":
		err = c.get(ctx, s, pos[0])
	case "list":
		err = c.list(ctx, s)
	case "watch":
		err = c.watch(ctx, s, pos[0])
	case "release":
		err = c.release(ctx, s, pos[0])
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}

// parse parses flags anywhere among args and returns the other arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

func (c *cli) usage(msg string) int {
	fmt.Fprintf(c.stderr, "simba: %s\n\n%s", msg, usage)
	return exitUsage
}

func (c *cli) fail(err error) int {
	fmt.Fprintf(c.stderr, "simba: %s\n", strings.TrimPrefix(err.Error(), "simba: "))
	return exitFail
}

// record is an owner record as the command prints it.
type record struct {
	Mutex        string     `json:"mutex"`
	Owner        string     `json:"owner"`
	Token        uint64     `json:"token,omitempty"`
	AcquiredAt   *time.Time `json:"acquired_at,omitempty"`
	TTLAt        *time.Time `json:"ttl_at,omitempty"`
	TransitionAt *time.Time `json:"transition_at,omitempty"`
}

func newRecord(mutex string, o simba.Owner) record {
	r := record{Mutex: mutex, Owner: o.ID, Token: o.Token}
	instant := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		t = t.Round(0).Truncate(time.Millisecond)
		return &t
	}
	r.AcquiredAt, r.TTLAt, r.TransitionAt = instant(o.AcquiredAt), instant(o.TTLAt), instant(o.TransitionAt)
	return r
}

// lookup reads the owner of mutex, bounded by the timeout.
func (c *cli) lookup(ctx context.Context, s *storeurl.Store, mutex string) (simba.Owner, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return simba.Lookup(ctx, s.Backend(), mutex)
}

func (c *cli) get(ctx context.Context, s *storeurl.Store, mutex string) error {
	o, err := c.lookup(ctx, s, mutex)
	if err != nil {
		return err
	}
	return c.print([]record{newRecord(mutex, o)}, false)
}

func (c *cli) list(ctx context.Context, s *storeurl.Store) error {
	lctx, cancel := context.WithTimeout(ctx, c.timeout)
	names, err := s.List(lctx)
	cancel()
	if err != nil {
		return err
	}
	records := make([]record, 0, len(names))
	for _, name := range names {
		o, err := c.lookup(ctx, s, name)
		if err != nil {
			return err
		}
		records = append(records, newRecord(name, o))
	}
	return c.print(records, true)
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
	w := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "MUTEX\tOWNER\tTOKEN\tHELD\tTTL LEFT\tTRANSITION LEFT")
	for _, r := range records {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Mutex, dash(r.Owner), token(r.Token),
			since(now, r.AcquiredAt), until(now, r.TTLAt), until(now, r.TransitionAt))
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
	_, err := fmt.Fprintf(c.stdout, "%s  %s  owner %s  token %s\n",
		time.Now().Format(time.RFC3339Nano), mutex, dash(r.Owner), token(r.Token))
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
	if !c.yes {
		fmt.Fprintf(c.stderr, "Type the mutex name to release it: ")
		line, err := c.stdin.ReadString('\n')
		if strings.TrimSpace(line) != mutex {
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			return errors.New("release not confirmed: nothing was done")
		}
	}
	rctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := s.Release(rctx, mutex, o); err != nil {
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
