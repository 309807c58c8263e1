package storeurl

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	goredis "github.com/redis/go-redis/v9"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend"
	"github.com/simba-go/simba/backend/redis"
	"github.com/simba-go/simba/backend/zookeeper"
)

// Holder is one hold of a semaphore or read-write lock as the store keeps it.
type Holder struct {
	Kind backend.Kind // backend.Semaphore or backend.RWLock
	Name string
	ID   string // the holder's contender ID (a Curator holder's node data)
	// Shared tells a read-write lock's read hold; a write hold otherwise.
	Shared bool
	// Token is the hold's fencing token (ZooKeeper: its node's mzxid), which
	// ReleaseHolder checks; zero when the store keeps none.
	Token uint64
	// AcquiredAt, TTLAt and TransitionAt are the hold's admission, TTL end and transition
	// end, on the local clock; zero where the store does not keep them (ZooKeeper holds
	// live as long as the holder's session).
	AcquiredAt, TTLAt, TransitionAt time.Time
}

// holds is what a store does for Holders and ReleaseHolder.
type holds struct {
	// list returns the holders of the names of kind k, or of name alone when it is not "".
	list func(ctx context.Context, k backend.Kind, name string) ([]Holder, error)
	// release frees h's hold if it is still that tenure, and reports whether it did.
	release func(ctx context.Context, h Holder) (bool, error)
}

// Holders returns the holders of the semaphores (kind backend.Semaphore) or read-write
// locks (backend.RWLock) the store keeps, or of name alone when it is not "", sorted by
// name and admission: on Redis the holds under simba:sem:{name} and simba:rw:{name}, in SQL
// the holders' rows of the hold table (<table>_hold), in ZooKeeper the admitted nodes
// under /simba-semaphore/<name>/leases and /simba-rwlock/<name>, and for a registered
// scheme what its Opener's Holders returns (etcd: the holds' marker keys). Waiters are not
// holders. A store that lists none says so (simba.ErrInvalidArgument).
func (s *Store) Holders(ctx context.Context, k backend.Kind, name string) ([]Holder, error) {
	if err := s.checkHolds(k, name); err != nil {
		return nil, err
	}
	var list []Holder
	err := s.bounded(ctx, func() (err error) {
		list, err = s.holds.list(ctx, k, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("storeurl: list the %ss of %s: %w", k, s.url, err)
	}
	slices.SortStableFunc(list, func(a, b Holder) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), a.AcquiredAt.Compare(b.AcquiredAt), cmp.Compare(a.Token, b.Token), strings.Compare(a.ID, b.ID))
	})
	return list, nil
}

// ReleaseHolder frees the hold h, as Holders listed it, whatever its holder is doing: an
// administrator's tool for a holder that is stuck. It frees that tenure only: a hold the
// same ID took since has another token and is left alone, and so is a hold that has
// ended; released tells whether it freed one. The holder is not told, and goes on
// believing until its next renewal (ZooKeeper: at once, as its node goes); only a fencing
// token protects the resource meanwhile, as with Release. A hold without a token (one a
// JVM or Curator process took where the store keeps none) cannot be told from a later
// one and is refused (simba.ErrInvalidArgument).
func (s *Store) ReleaseHolder(ctx context.Context, h Holder) (released bool, err error) {
	if err := s.checkHolds(h.Kind, h.Name); err != nil {
		return false, err
	}
	if h.Name == "" || h.ID == "" || h.Token == 0 {
		return false, simba.InvalidArgument("holder", h.ID, "must be a hold as Holders lists it: a name, a holder ID and a token")
	}
	err = s.bounded(ctx, func() (err error) {
		released, err = s.holds.release(ctx, h)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("storeurl: release %s of %v %q on %s: %w", h.ID, h.Kind, h.Name, s.url, err)
	}
	return released, nil
}

// checkHolds checks the kind and the name ("": every name) of a call about holds.
func (s *Store) checkHolds(k backend.Kind, name string) error {
	switch {
	case k != backend.Semaphore && k != backend.RWLock:
		return simba.InvalidArgument("kind", k.String(), "must be a semaphore or a read-write lock (mutexes: List and Release)")
	case s.holds.list == nil:
		return simba.InvalidArgument("store", s.url, "lists no semaphores or read-write locks")
	case name == "":
		return nil
	}
	if err := simba.ValidateMutex(name); err != nil {
		return err
	}
	if v, ok := s.backend.(backend.Validator); ok {
		return v.ValidateMutex(name)
	}
	return nil
}

// redisHolds lists and releases the holds of a Redis store, in the keys the backend's
// package doc describes: simba:sem:{name}:* and simba:rw:{name}:*.
func redisHolds(client goredis.UniversalClient, b *redis.Backend) holds {
	prefix := func(k backend.Kind) string {
		if k == backend.Semaphore {
			return "simba:sem:{"
		}
		return "simba:rw:{"
	}
	const holdersSuffix = "}:holders"
	list := func(ctx context.Context, k backend.Kind, name string) ([]Holder, error) {
		names := []string{name}
		if name == "" {
			names = nil
			iter := client.Scan(ctx, 0, prefix(k)+"*"+holdersSuffix, 1000).Iterator()
			for iter.Next(ctx) {
				n := strings.TrimSuffix(strings.TrimPrefix(iter.Val(), prefix(k)), holdersSuffix)
				names = append(names, n)
			}
			if err := iter.Err(); err != nil {
				return nil, err
			}
			slices.Sort(names)
			names = slices.Compact(names)
		}
		var all []Holder
		for _, n := range names {
			list, err := redisHolders(ctx, client, k, n, prefix(k)+n+"}")
			if err != nil {
				return nil, err
			}
			all = append(all, list...)
		}
		return all, nil
	}
	release := func(ctx context.Context, h Holder) (bool, error) {
		return b.ReleaseHolder(ctx, h.Kind, h.Name, h.ID, h.Token)
	}
	return holds{list: list, release: release}
}

// redisHolders reads the holders of one name, whose keys begin with base, in one
// transaction with the server's clock.
func redisHolders(ctx context.Context, client goredis.UniversalClient, k backend.Kind, name, base string) ([]Holder, error) {
	var (
		now     *goredis.TimeCmd
		holders *goredis.ZSliceCmd
		holds   *goredis.MapStringStringCmd
	)
	sent := time.Now()
	_, err := client.TxPipelined(ctx, func(p goredis.Pipeliner) error {
		now = p.Time(ctx)
		holders = p.ZRangeWithScores(ctx, base+":holders", 0, -1)
		holds = p.HGetAll(ctx, base+":holds")
		return nil
	})
	if err != nil {
		return nil, err
	}
	nowMs := now.Val().UnixMilli()
	at := func(ms int64) time.Time { return sent.Add(time.Duration(ms-nowMs) * time.Millisecond) }
	writer := holds.Val()["@@writer"]
	var list []Holder
	for _, z := range holders.Val() {
		id, _ := z.Member.(string)
		transitionEnd := int64(z.Score)
		if transitionEnd <= nowMs {
			continue // ended: the next script that runs drops it
		}
		parts := strings.Split(holds.Val()[id], "@@") // token, ttl end, admitted at
		if len(parts) != 3 {
			return nil, fmt.Errorf("holder %q of %v %q: unexpected hold %q", id, k, name, holds.Val()[id])
		}
		var n [3]int64
		for i, p := range parts {
			if n[i], err = strconv.ParseInt(p, 10, 64); err != nil {
				return nil, fmt.Errorf("holder %q of %v %q: unexpected hold %q", id, k, name, holds.Val()[id])
			}
		}
		list = append(list, Holder{
			Kind: k, Name: name, ID: id, Shared: k == backend.RWLock && id != writer, Token: uint64(n[0]),
			AcquiredAt: at(n[2]), TTLAt: at(n[1]), TransitionAt: at(transitionEnd),
		})
	}
	return list, nil
}

// sqlHolds lists and releases the holds of a SQL store, in the hold table beside the
// mutex table (backend/jdbc's package doc); quoted is the hold table's quoted name, now
// the dialect's expression of the database's clock in epoch ms, and dollars numbers the
// placeholders for PostgreSQL.
func sqlHolds(db *sql.DB, quoted, now string, dollars bool) holds {
	number := func(q string) string {
		if !dollars {
			return q
		}
		var out strings.Builder
		n := 0
		for _, r := range q {
			if r == '?' {
				n++
				out.WriteString("$" + strconv.Itoa(n))
				continue
			}
			out.WriteRune(r)
		}
		return out.String()
	}
	// A waiter's row has token 0; a holder's whose window has ended waits to be pruned.
	const columns = "SELECT name, holder, shared, token, acquired_at, ttl_at, expires_at, %[2]s FROM %[1]s " +
		"WHERE kind = ? AND holder <> '' AND token <> 0 AND expires_at > %[2]s"
	listAll := number(fmt.Sprintf(columns, quoted, now))
	listOne := number(fmt.Sprintf(columns+" AND name = ?", quoted, now))
	// The decisions of the backend lock the name's row first: so does a release, so that
	// none of them reads the holder's row while it goes.
	lock := number(fmt.Sprintf("SELECT 1 FROM %s WHERE kind = ? AND name = ? AND holder = '' FOR UPDATE", quoted))
	remove := number(fmt.Sprintf("DELETE FROM %s WHERE kind = ? AND name = ? AND holder = ? AND token = ?", quoted))
	list := func(ctx context.Context, k backend.Kind, name string) ([]Holder, error) {
		sent := time.Now()
		var rows *sql.Rows
		var err error
		if name == "" {
			rows, err = db.QueryContext(ctx, listAll, int64(k))
		} else {
			rows, err = db.QueryContext(ctx, listOne, int64(k), name)
		}
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var list []Holder
		for rows.Next() {
			h := Holder{Kind: k}
			var acquired, ttl, expires, nowMs int64
			if err := rows.Scan(&h.Name, &h.ID, &h.Shared, &h.Token, &acquired, &ttl, &expires, &nowMs); err != nil {
				return nil, err
			}
			at := func(ms int64) time.Time { return sent.Add(time.Duration(ms-nowMs) * time.Millisecond) }
			h.AcquiredAt, h.TTLAt, h.TransitionAt = at(acquired), at(ttl), at(expires)
			h.Shared = h.Shared && k == backend.RWLock
			list = append(list, h)
		}
		return list, rows.Err()
	}
	release := func(ctx context.Context, h Holder) (released bool, err error) {
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return false, err
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback()
			}
		}()
		rows, err := tx.QueryContext(ctx, lock, int64(h.Kind), h.Name)
		if err != nil {
			return false, err
		}
		if err := rows.Close(); err != nil {
			return false, err
		}
		res, err := tx.ExecContext(ctx, remove, int64(h.Kind), h.Name, h.ID, h.Token)
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return false, err
		}
		return n == 1, tx.Commit()
	}
	return holds{list: list, release: release}
}

// zkHolds lists and releases the holds of a ZooKeeper store, in the nodes of Curator's
// recipes (backend/zookeeper's package doc).
func zkHolds(conn *zk.Conn) holds {
	list := func(ctx context.Context, k backend.Kind, name string) ([]Holder, error) {
		names := []string{name}
		if name == "" {
			root := strings.TrimSuffix(zkHoldPath(k, "x"), "/x")
			var err error
			names, _, err = conn.Children(root)
			if errors.Is(err, zk.ErrNoNode) {
				return nil, nil
			} else if err != nil {
				return nil, err
			}
			slices.Sort(names)
		}
		var all []Holder
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			nodes, err := zkHeld(conn, k, n)
			if err != nil {
				return nil, err
			}
			for _, node := range nodes {
				all = append(all, node.holder)
			}
		}
		return all, nil
	}
	release := func(ctx context.Context, h Holder) (bool, error) {
		nodes, err := zkHeld(conn, h.Kind, h.Name)
		if err != nil {
			return false, err
		}
		for _, n := range nodes {
			if n.holder.ID != h.ID || n.holder.Token != h.Token {
				continue
			}
			// The version read with the token: a node written since is not deleted.
			err := conn.Delete(n.path, n.version)
			switch {
			case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrBadVersion):
				return false, nil
			case err != nil:
				return false, err
			}
			return true, nil
		}
		return false, nil
	}
	return holds{list: list, release: release}
}

// zkHoldPath returns the node of name of kind k.
func zkHoldPath(k backend.Kind, name string) string {
	if k == backend.Semaphore {
		return zookeeper.SemaphorePath(name)
	}
	return zookeeper.RWMutexPath(name)
}

// zkNode is a held node of a semaphore or read-write lock.
type zkNode struct {
	path    string
	version int32
	holder  Holder
}

// zkHeld returns the held nodes of name of kind k. A semaphore's holders are its first
// lease nodes, at most its permit count (which Go lease nodes tell in their names; all
// of Curator's, which tell none): only the guard's owner, which waits, has a lease beyond
// it. A read-write lock's are its first node, if a writer's, with the downgrade's read
// node beside it, or else the read nodes before the first writer's.
func zkHeld(conn *zk.Conn, k backend.Kind, name string) ([]zkNode, error) {
	dir := zkHoldPath(k, name)
	markers := []string{"__READ__", "__WRIT__"}
	if k == backend.Semaphore {
		dir, markers = dir+"/leases", []string{"lease-"}
	}
	kids, _, err := conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	type node struct {
		name, marker, seq string
	}
	var nodes []node
	for _, kid := range kids {
		for _, m := range markers {
			if seq, ok := sequenceAfter(kid, m); ok {
				nodes = append(nodes, node{kid, m, seq})
				break
			}
		}
	}
	slices.SortFunc(nodes, func(a, b node) int { return cmp.Or(strings.Compare(a.seq, b.seq), strings.Compare(a.name, b.name)) })
	var held []node
	switch {
	case k == backend.Semaphore:
		permits := len(nodes)
		for _, n := range nodes {
			if p, ok := leasePermits(n.name); ok {
				permits = min(permits, p)
			}
		}
		held = nodes[:permits]
	case len(nodes) > 0 && nodes[0].marker == "__WRIT__":
		for _, n := range nodes {
			if n.seq == nodes[0].seq {
				held = append(held, n)
			}
		}
	default:
		for _, n := range nodes {
			if n.marker == "__WRIT__" {
				break
			}
			held = append(held, n)
		}
	}
	out := make([]zkNode, 0, len(held))
	for _, n := range held {
		path := dir + "/" + n.name
		data, st, err := conn.Get(path)
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the list
		} else if err != nil {
			return nil, err
		}
		out = append(out, zkNode{path: path, version: st.Version, holder: Holder{
			Kind: k, Name: name, ID: string(data), Shared: n.marker == "__READ__", Token: uint64(st.Mzxid),
		}})
	}
	return out, nil
}

// leasePermits returns the permit count a Go lease node's name tells,
// "..permits-<n>-lease-<seq>"; ok is false for a Curator lease node, which tells none.
func leasePermits(name string) (n int, ok bool) {
	i := strings.LastIndex(name, "lease-")
	j := strings.LastIndex(name[:max(i, 0)], "permits-")
	if i < 0 || j < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSuffix(name[j+len("permits-"):i], "-"))
	return n, err == nil && n > 0
}

// sequenceAfter returns the 10 digits of a sequential node's name after the last marker,
// which they must end.
func sequenceAfter(name, marker string) (string, bool) {
	i := strings.LastIndex(name, marker)
	if i < 0 || len(name)-i-len(marker) != 10 {
		return "", false
	}
	seq := name[i+len(marker):]
	return seq, strings.Trim(seq, "0123456789") == ""
}
