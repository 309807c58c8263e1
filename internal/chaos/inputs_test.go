package chaos

import (
	"context"
	"database/sql"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/backend/zookeeper"
	"github.com/simba-go/simba/internal/zkdial"
)

// countingListener stands for a server and counts the connections made to it: bad input
// must be rejected before any of them.
type countingListener struct {
	net.Listener
	accepted atomic.Int32
	done     chan struct{}
}

func listen(t *testing.T) *countingListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: ln, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			l.accepted.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close(); <-l.done })
	return l
}

// inputRow is one row of the bad-input catalogue for one backend.
type inputRow struct {
	name string
	make func() error
}

// 24. The bad-input catalogue, for every backend: a typed error wrapping
// simba.ErrInvalidArgument, before any connection to the server, without a goroutine
// left, without a panic.
func TestBadInputCatalogue(t *testing.T) {
	server := listen(t)
	addr := server.Addr().String()
	client := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	defer client.Close()
	rb, err := redis.New(client)
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	db, err := sql.Open("mysql", mariadbDSN(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	jb, err := jdbc.New(db)
	if err != nil {
		t.Fatal(err)
	}
	defer jb.Close()
	pdb, err := sql.Open("pgx", postgresDSN(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	pb, err := jdbc.New(pdb, jdbcOptions("postgres")...)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.Close()
	// The ZooKeeper backend connects at once, whatever its input: its session goes to a
	// listener of its own, which is not counted.
	zkServer := listen(t)
	zb, err := zookeeper.New(func(ev zk.EventCallback) (*zk.Conn, <-chan zk.Event, error) {
		return zk.Connect([]string{zkServer.Addr().String()}, time.Second, zk.WithEventCallback(ev), zk.WithLogger(quietZK{}), zk.WithDialer(zkdial.Dial))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer zb.Close()
	mb, err := memory.New(memory.NewStore())
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]simba.Backend{"memory": mb, "redis": rb, "mariadb": jb, "postgres": pb, "zookeeper": zb}
	long := func(n int) string { return strings.Repeat("m", n) }
	common := []struct {
		name, mutex, id string
		opts            []simba.ServiceOption
	}{
		{"empty mutex", "", "c", nil},
		{"blank mutex", " \t", "c", nil},
		{"leading space", " m", "c", nil},
		{"trailing space", "m ", "c", nil},
		{"NUL", "a\x00b", "c", nil},
		{"control character", "a\nb", "c", nil},
		{"invalid UTF-8", "a\xffb", "c", nil},
		{"empty contender ID", "m", "", nil},
		{"ttl 0", "m", "c", []simba.ServiceOption{simba.WithTTL(0)}},
		{"ttl below 1ms", "m", "c", []simba.ServiceOption{simba.WithTTL(time.Microsecond)}},
		{"ttl not whole ms", "m", "c", []simba.ServiceOption{simba.WithTTL(1500 * time.Microsecond)}},
		{"transition < 0", "m", "c", []simba.ServiceOption{simba.WithTransition(-time.Millisecond)}},
		{"ttl + transition too long", "m", "c", []simba.ServiceOption{simba.WithTTL(1 << 62), simba.WithTransition(1 << 62)}},
		{"call timeout not below ttl", "m", "c", []simba.ServiceOption{simba.WithTTL(time.Second), simba.WithCallTimeout(time.Second)}},
		{"initial delay < 0", "m", "c", []simba.ServiceOption{simba.WithInitialDelay(-time.Second)}},
	}
	specific := map[string][]struct{ name, mutex, id string }{
		"redis":     {{"{ in name", "a{b", "c"}, {"} in name", "}a", "c"}, {"@@ in ID", "m", "a@@b"}},
		"mariadb":   {{"name of 67 characters", long(67), "c"}, {"ID of 129 characters", "m", long(129)}},
		"postgres":  {{"name of 67 characters", long(67), "c"}, {"ID of 129 characters", "m", long(129)}},
		"zookeeper": {{"/ in name", "a/b", "c"}, {". as name", ".", "c"}, {".. as name", "..", "c"}},
	}
	before := goleak.IgnoreCurrent()
	rows := 0
	for store, b := range backends {
		var list []inputRow
		for _, c := range common {
			list = append(list, inputRow{c.name, func() error {
				_, err := simba.NewService(b, simba.ContenderFuncs{MutexName: c.mutex, ID: c.id}, c.opts...)
				return err
			}})
		}
		for _, c := range specific[store] {
			list = append(list, inputRow{c.name, func() error {
				_, err := simba.NewService(b, simba.ContenderFuncs{MutexName: c.mutex, ID: c.id})
				return err
			}}, inputRow{c.name + " (Locker)", func() error {
				_, err := simba.NewLocker(b, c.mutex, simba.WithContenderID(c.id))
				return err
			}})
		}
		list = append(list,
			inputRow{"scheduler period 0", func() error {
				_, err := simba.NewScheduler(b, "m", simba.Schedule{}, func(context.Context, simba.Owner) {})
				return err
			}},
			inputRow{"scheduler nil work", func() error {
				_, err := simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second}, nil)
				return err
			}},
			inputRow{"nil contender", func() error { _, err := simba.NewService(b, nil); return err }},
			inputRow{"nil ctx", func() error {
				l, err := simba.NewLocker(b, "m")
				if err != nil {
					return err
				}
				var nilCtx context.Context
				_, err = l.Acquire(nilCtx)
				return err
			}},
		)
		for _, row := range list {
			t.Run(store+"/"+row.name, func(t *testing.T) {
				var err error
				func() {
					defer func() {
						if v := recover(); v != nil {
							t.Fatalf("panicked: %v", v)
						}
					}()
					err = row.make()
				}()
				if !errors.Is(err, simba.ErrInvalidArgument) {
					t.Errorf("got %v, want an error wrapping simba.ErrInvalidArgument", err)
				}
				var ae *simba.ArgumentError
				if !errors.As(err, &ae) {
					t.Errorf("%v is not a *simba.ArgumentError naming the field", err)
				}
			})
			rows++
		}
	}
	nilRows := []inputRow{
		{"nil Redis client", func() error { _, err := redis.New(nil); return err }},
		{"nil *sql.DB", func() error { _, err := jdbc.New(nil); return err }},
		{"nil ZooKeeper connect", func() error { _, err := zookeeper.New(nil); return err }},
		{"empty Redis quorum", func() error { _, err := redis.NewQuorum(nil); return err }},
	}
	for _, row := range nilRows {
		t.Run(row.name, func(t *testing.T) {
			if err := row.make(); !errors.Is(err, simba.ErrInvalidArgument) {
				t.Errorf("got %v, want an error wrapping simba.ErrInvalidArgument", err)
			}
		})
		rows++
	}
	if want := 4 * (len(common) + 4); rows < want {
		t.Errorf("only %d rows ran, want at least %d: a backend was left out", rows, want)
	}
	if n := server.accepted.Load(); n != 0 {
		t.Errorf("bad input reached the server: %d connections", n)
	}
	if err := goleak.Find(before); err != nil {
		t.Errorf("bad input started goroutines: %v", err)
	}
	resultsMu.Lock()
	results = append(results, &Result{Scenario: 24, Name: "bad_input_catalogue", Store: "all",
		Notes:  []string{strconv.Itoa(rows) + " rows of the bad-input catalogue over memory, Redis, MariaDB and ZooKeeper: typed errors, no connection, no goroutine"},
		Failed: t.Failed()})
	resultsMu.Unlock()
}

// 23. Client clock jumps: simba never does lease arithmetic on wall-clock time, which a
// jump would move; every instant it compares comes from time.Now and carries the
// monotonic reading. The service's decisions under an injected clock are tested in the
// root package; here the library's sources are checked for the calls that would read or
// build wall-clock instants. (A Scheduler's slot is a wall-clock instant by definition, a
// Timetable's; its records are converted in package backend only: Slot.Nanos, SlotAt.)
func TestNoWallClockArithmetic(t *testing.T) {
	root := filepath.Join("..", "..")
	forbidden := map[string]bool{"Unix": true, "UnixMilli": true, "UnixMicro": true, "UnixNano": true, "UnixMilliTime": true}
	var found []string
	var files int
	for _, dir := range []string{".", "backend/memory", "backend/redis", "backend/jdbc", "backend/zookeeper"} {
		paths, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if strings.HasSuffix(p, "_test.go") {
				continue
			}
			files++
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(token.NewFileSet(), p, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if forbidden[sel.Sel.Name] || sel.Sel.Name == "Round" || sel.Sel.Name == "Truncate" {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "time" || forbidden[sel.Sel.Name] {
						found = append(found, p+": "+sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
	if files == 0 {
		t.Fatal("no library sources found")
	}
	for _, f := range found {
		t.Errorf("wall-clock arithmetic in the library: %s", f)
	}
	resultsMu.Lock()
	results = append(results, &Result{Scenario: 23, Name: "client_clock_jumps", Store: "all",
		Notes:  []string{strconv.Itoa(files) + " library files: no wall-clock reads or instants (Unix*, time.Unix); leases count from monotonic send times"},
		Failed: t.Failed()})
	resultsMu.Unlock()
}
