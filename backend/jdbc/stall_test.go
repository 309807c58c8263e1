package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
	"github.com/simba-go/simba/internal/options"
)

// TestStopWhileTheServerStalls: mariadbd is stopped with SIGSTOP while a
// contender owns the mutex. Stop returns within the call timeout, after OnReleased; when
// the server resumes, another contender acquires.
func TestStopWhileTheServerStalls(t *testing.T) {
	const ttl, transition = time.Second, 500 * time.Millisecond
	needServer(t)
	mutex := mutexName(t)
	opts := []simba.Option{simba.WithTTL(ttl), simba.WithTransition(transition)}
	a := newContender(t, newBackend(t), mutex, "a", opts...)
	require.NoError(t, a.svc.Start(t.Context()))
	first := wait(t, a.acquired, 10*time.Second, "acquisition by a")

	require.NoError(t, server.Pause())
	t.Cleanup(func() { _ = server.Resume() })
	began := time.Now()
	err := a.svc.Stop(t.Context())
	took := time.Since(began)
	t.Logf("Stop returned after %v: %v", took, err)
	assert.Error(t, err, "the release could not reach the store")
	assert.Less(t, took, 3*time.Second, "Stop is bounded by the call timeout (%v)", ttl/4)
	assert.Len(t, a.released, 1, "OnReleased before Stop returned")
	time.Sleep(2 * (ttl + transition)) // the stall's length
	require.NoError(t, server.Resume())

	l, err := simba.NewLocker(newBackend(t), mutex, options.As[simba.LockerOption](opts)...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	lease, err := l.Acquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, lease.Token(), first.After.Token)
	require.NoError(t, lease.Release(t.Context()))
}

// TestReleaseBehindARowLock: an administrator holds the row with SELECT ...
// FOR UPDATE. The release waits for the row lock only as long as its context allows (not
// InnoDB's 50 s), and the server drops the statement then: when the administrator commits,
// nothing is released behind the owner's back; its lease lapses on its own.
func TestReleaseBehindARowLock(t *testing.T) {
	const ttl, transition = time.Second, 500 * time.Millisecond
	mutex := mutexName(t)
	db := openDB(t)
	opts := []simba.LockerOption{simba.WithTTL(ttl), simba.WithTransition(transition), simba.WithContenderID("holder")}
	l, err := simba.NewLocker(newBackend(t), mutex, opts...)
	require.NoError(t, err)
	lease, err := l.Acquire(t.Context())
	require.NoError(t, err)
	held := readRow(t, db, mutex)

	tx, _ := lockRow(t, db, mutex)

	began := time.Now()
	err = lease.Release(t.Context())
	t.Logf("Release behind a row lock returned after %v: %v", time.Since(began), err)
	assert.Error(t, err)
	assert.Less(t, time.Since(began), 5*time.Second, "bounded by the call timeout, not by innodb_lock_wait_timeout")
	waitUntil(t, 5*time.Second, "the server to drop the release", func() bool {
		var n int
		err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM information_schema.PROCESSLIST "+
			"WHERE USER = 'simba' AND INFO LIKE '%SET owner_id = ''''%' AND ID <> CONNECTION_ID()").Scan(&n)
		return err == nil && n == 0
	})
	require.NoError(t, tx.Commit())
	after := readRow(t, db, mutex)
	assert.Equal(t, "holder", after.Owner, "no late release when the row lock went")
	assert.Equal(t, held.Version, after.Version)

	other, err := simba.NewLocker(newBackend(t), mutex, simba.WithTTL(ttl), simba.WithTransition(transition))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	next, err := other.Acquire(ctx)
	require.NoError(t, err, "the lease lapsed")
	assert.Greater(t, next.Token(), lease.Token())
	require.NoError(t, next.Release(t.Context()))
}

// TestLateReleaseCannotEraseALaterTenure: a release whose caller gave up on it
// reaches the server only after the same contender ID acquired the mutex again (from
// another pool: a later lifecycle, as a Locker's next Acquire is). It is conditioned on the
// version its contention knew, so it changes nothing, and the later tenure goes on.
func TestLateReleaseCannotEraseALaterTenure(t *testing.T) {
	needServer(t)
	mutex := mutexName(t)
	p := newHoldProxy(t, server.Addr())
	viaProxy := openDSN(t, fmt.Sprintf("simba:simba@tcp(%s)/simba?interpolateParams=true", p.addr()))
	direct := openDB(t)
	ba, err := jdbc.New(viaProxy)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ba.Close() })

	la, err := simba.NewLocker(ba, mutex, simba.WithContenderID("x"), simba.WithTTL(2*time.Second), simba.WithTransition(time.Second))
	require.NoError(t, err)
	// Two cycles first, so that the release held below is a prepared statement's
	// execution, which the server runs when it arrives (a text's second call prepares it,
	// and a prepare held instead would run nothing).
	for range 2 {
		cycle, err := la.Acquire(t.Context())
		require.NoError(t, err)
		require.NoError(t, cycle.Release(t.Context()))
	}
	first, err := la.Acquire(t.Context())
	require.NoError(t, err)

	p.hold()
	err = first.Release(t.Context())
	require.Error(t, err, "the release never answered")
	t.Log(err)

	// The same contender ID acquires again through another pool, before the late
	// release arrives. Its default TTL means no renewal during the test, and without the
	// hand-over it is not woken when the old session ends: the row's version stays put
	// unless the late release changes it.
	lb, err := simba.NewLocker(newBackend(t, jdbc.WithHandOver(false)), mutex, simba.WithContenderID("x"))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	second, err := lb.Acquire(ctx)
	require.NoError(t, err)
	assert.Greater(t, second.Token(), first.Token())
	before := readRow(t, direct, mutex)
	require.Equal(t, "x", before.Owner)

	// The release is an UPDATE, as text or prepared (Com_stmt_execute).
	executed := func() int64 {
		return globalStatus(t, direct, "Com_update") + globalStatus(t, direct, "Com_stmt_execute")
	}
	updates := executed()
	p.flush(t) // the held statements reach the server, which executes them
	assert.Greater(t, executed(), updates, "the late release was executed")
	after := readRow(t, direct, mutex)
	assert.Equal(t, "x", after.Owner, "the later tenure was not erased")
	assert.Equal(t, before.Version, after.Version)
	assert.NoError(t, second.Context().Err())
	require.NoError(t, second.Release(t.Context()))
	assert.Empty(t, readRow(t, direct, mutex).Owner)
}

func openDSN(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// globalStatus returns one of the server's counters, summed over every session: for
// example Com_update (UPDATE statements executed) or Questions (statements received).
func globalStatus(t *testing.T, db *sql.DB, counter string) int64 {
	t.Helper()
	var name string
	var n int64
	require.NoError(t, db.QueryRowContext(t.Context(), "SHOW GLOBAL STATUS LIKE ?", counter).Scan(&name, &n))
	return n
}

// holdProxy forwards connections to a server; while held, it keeps what clients send,
// and flush delivers it late: a statement whose caller has long given up.
type holdProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	held  bool
	links []*holdLink
	wg    sync.WaitGroup
}

type holdLink struct {
	client, server net.Conn
	kept           []byte        // client bytes held back
	clientGone     bool          // the client closed its side
	serverGone     chan struct{} // closed when the server closed its side
}

func newHoldProxy(t *testing.T, upstream string) *holdProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &holdProxy{ln: ln, upstream: upstream}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

func (p *holdProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &holdLink{client: c, server: s, serverGone: make(chan struct{})}
		p.mu.Lock()
		p.links = append(p.links, l)
		p.mu.Unlock()
		p.wg.Go(func() { p.up(l) })
		p.wg.Go(func() {
			_, _ = io.Copy(io.Discard, io.TeeReader(s, writerIgnoringErrors{c}))
			close(l.serverGone)
			_ = c.Close()
		})
	}
}

// up forwards or keeps what the client sends.
func (p *holdProxy) up(l *holdLink) {
	buf := make([]byte, 32*1024)
	for {
		n, err := l.client.Read(buf)
		p.mu.Lock()
		if n > 0 {
			if p.held {
				l.kept = append(l.kept, buf[:n]...)
			} else {
				_, _ = l.server.Write(buf[:n])
			}
		}
		if err != nil {
			l.clientGone = true
			if !p.held {
				_ = l.server.(*net.TCPConn).CloseWrite()
			}
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

func (p *holdProxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
}

// flush delivers what was kept and waits until the server has closed every connection
// whose client is gone (so it has executed what it was sent).
func (p *holdProxy) flush(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	p.held = false
	var gone []*holdLink
	for _, l := range p.links {
		if len(l.kept) > 0 {
			_, _ = l.server.Write(l.kept)
			l.kept = nil
		}
		if l.clientGone {
			_ = l.server.(*net.TCPConn).CloseWrite()
			gone = append(gone, l)
		}
	}
	p.mu.Unlock()
	for _, l := range gone {
		select {
		case <-l.serverGone:
		case <-time.After(10 * time.Second):
			t.Fatal("the server did not finish the late statements")
		}
	}
}

func (p *holdProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, l := range p.links {
		_ = l.client.Close()
		_ = l.server.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// writerIgnoringErrors writes to a connection that may be closed, without stopping the
// copy that feeds it.
type writerIgnoringErrors struct{ net.Conn }

func (w writerIgnoringErrors) Write(b []byte) (int, error) {
	_, _ = w.Conn.Write(b)
	return len(b), nil
}
