package jdbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"time"
)

// Server-side prepared statements for the statements of every cycle on the MySQL dialect's
// pinned connections (the acquire that takes the named lock and the release that lets it
// go): MariaDB parses a statement sent as text each time, which cost an uncontended cycle
// about a quarter of its server CPU. Each is prepared once per connection and text and
// executed with COM_STMT_EXECUTE from then on.
const (
	// maxPreparedPerConn bounds the statements kept per connection: the least recently
	// used is closed on the server when a new one would pass it.
	maxPreparedPerConn = 8
	// maxPreparedConns bounds the connections statements are kept for (more than a
	// MariaDB server takes by default, 151): once that many were used within
	// idleConnAfter, others run their statements as text.
	maxPreparedConns = 256
	// idleConnAfter is how long a connection goes unused before its entry may give way
	// to another's: the pool has closed it by then, or it comes back so seldom that
	// preparing its statements again (leaving the earlier ones on the server until it
	// closes) costs little.
	idleConnAfter = 10 * time.Minute
)

// Error numbers of a statement the server no longer knows or would have to prepare again,
// and of a server or proxy that prepares none.
const (
	erUnknownStmtHandler          = 1243
	erNeedReprepare               = 1615
	erUnknownCom                  = 1047
	erMaxPreparedStmtCountReached = 1461
	erUnsupportedPS               = 1295
)

// preparedStmts are the backend's prepared statements, by driver connection and text. A
// connection's are used only inside conn.Raw, by the goroutine that holds the connection.
type preparedStmts struct {
	mu       sync.Mutex
	off      bool // prepared statements are not used: WithPreparedStatements(false), or refused
	conns    map[any]*connStmts
	maxConns int // how many connections statements are kept for: maxPreparedConns
	tick     uint64
}

type connStmts struct {
	at    time.Time // when it was used last
	stmts map[string]*cachedStmt
	seen  map[string]bool // the texts called on it, prepared or not
}

type cachedStmt struct {
	stmt driver.Stmt
	used uint64
}

// prepared returns q as a querier whose ExecContext runs prepared statements, when q is a
// pinned connection and the backend uses them; else q.
func (b *Backend) prepared(q querier) querier {
	conn, ok := q.(*sql.Conn)
	if !ok || b.stmts == nil || b.stmts.disabled() {
		return q
	}
	return preparedConn{Conn: conn, stmts: b.stmts}
}

// preparedConn is a pinned connection whose ExecContext prepares its statement once.
type preparedConn struct {
	*sql.Conn
	stmts *preparedStmts
}

// ExecContext runs query as a prepared statement of the connection, preparing it the first
// time, and again when the server has forgotten it. A statement the server (or a proxy)
// will not prepare runs as text; one that prepares none (or no more: too many on the
// server) turns prepared statements off for the backend.
func (p preparedConn) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res driver.Result
	err := p.Raw(func(dc any) error {
		named, err := namedValues(dc, args)
		if err != nil {
			return err
		}
		for again := true; ; again = false {
			stmt, fresh, err := p.stmts.get(ctx, dc, query)
			if err != nil {
				return err
			}
			ec, ok := stmt.(driver.StmtExecContext)
			if !ok {
				p.stmts.turnOff()
				return errLeftToDatabaseSQL
			}
			res, err = ec.ExecContext(ctx, named)
			if n, _ := mysqlErrorNumber(err); again && !fresh && (n == erUnknownStmtHandler || n == erNeedReprepare) {
				p.stmts.forget(dc, query)
				continue
			}
			if v, ok := dc.(driver.Validator); err != nil && (errors.Is(err, driver.ErrBadConn) || ok && !v.IsValid()) {
				p.stmts.forgetConn(dc) // its statements went with its session
			}
			return err
		}
	})
	if errors.Is(err, errLeftToDatabaseSQL) {
		return p.Conn.ExecContext(ctx, query, args...)
	}
	return res, err
}

func (s *preparedStmts) disabled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.off
}

func (s *preparedStmts) turnOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.off = true
}

// get returns dc's statement for query, preparing it (fresh) if dc has none. A refusal to
// prepare turns prepared statements off and returns errLeftToDatabaseSQL; a connection
// that failed returns its error.
func (s *preparedStmts) get(ctx context.Context, dc any, query string) (driver.Stmt, bool, error) {
	now := time.Now()
	s.mu.Lock()
	s.tick++
	cs := s.conns[dc]
	if cs != nil {
		cs.at = now
		if c := cs.stmts[query]; c != nil {
			c.used = s.tick
			s.mu.Unlock()
			return c.stmt, false, nil
		}
	}
	if cs == nil {
		if len(s.conns) >= s.maxConns && !s.dropIdleConn(now) {
			// Every connection kept was used lately: forgetting one that is still open
			// would leave its statements on the server, to be prepared again when it
			// came back. This one runs as text.
			s.mu.Unlock()
			return nil, false, errLeftToDatabaseSQL
		}
		if s.conns == nil {
			s.conns = make(map[any]*connStmts)
		}
		cs = &connStmts{at: now, stmts: make(map[string]*cachedStmt), seen: make(map[string]bool)}
		s.conns[dc] = cs
	}
	if !cs.seen[query] {
		// A text's first call runs as text: one that does not come again (its time limit
		// is a caller's deadline, not the call timeout) is not worth a prepare's round
		// trip, nor the place of one that does.
		if len(cs.seen) >= 4*maxPreparedPerConn {
			clear(cs.seen)
		}
		cs.seen[query] = true
		s.mu.Unlock()
		return nil, false, errLeftToDatabaseSQL
	}
	s.mu.Unlock()
	pc, ok := dc.(driver.ConnPrepareContext)
	if !ok {
		s.turnOff()
		return nil, false, errLeftToDatabaseSQL
	}
	stmt, err := pc.PrepareContext(ctx, query)
	if err != nil {
		if n, answered := mysqlErrorNumber(err); answered {
			// The server (or a proxy) answered: the text tells the caller what is wrong
			// with the statement, if anything; a refusal to prepare at all turns them off.
			if n == erUnknownCom || n == erMaxPreparedStmtCountReached || n == erUnsupportedPS {
				s.turnOff()
			}
			return nil, false, errLeftToDatabaseSQL
		}
		return nil, false, err
	}
	var evict driver.Stmt
	s.mu.Lock()
	if len(cs.stmts) >= maxPreparedPerConn {
		evict = cs.dropOldest()
	}
	cs.at = now
	cs.stmts[query] = &cachedStmt{stmt: stmt, used: s.tick}
	s.mu.Unlock()
	if evict != nil {
		_ = evict.Close() // on dc, which this goroutine holds
	}
	return stmt, true, nil
}

// forget drops dc's statement for query, which the server no longer knows.
func (s *preparedStmts) forget(dc any, query string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cs := s.conns[dc]; cs != nil {
		delete(cs.stmts, query)
	}
}

// forgetConn drops dc's statements: dc is broken, and its statements went with its session.
func (s *preparedStmts) forgetConn(dc any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, dc)
}

// dropIdleConn forgets the connection used least lately if it has not been used for
// idleConnAfter, and reports whether it did. A connection the pool closed is never used
// again: its statements went with its session. Called with s.mu held.
func (s *preparedStmts) dropIdleConn(now time.Time) bool {
	var oldest any
	var at time.Time
	for dc, cs := range s.conns {
		if oldest == nil || cs.at.Before(at) {
			oldest, at = dc, cs.at
		}
	}
	if oldest == nil || now.Sub(at) < idleConnAfter {
		return false
	}
	delete(s.conns, oldest)
	return true
}

func (cs *connStmts) dropOldest() driver.Stmt {
	var oldest string
	var c *cachedStmt
	for q, s := range cs.stmts {
		if c == nil || s.used < c.used {
			oldest, c = q, s
		}
	}
	delete(cs.stmts, oldest)
	return c.stmt
}
