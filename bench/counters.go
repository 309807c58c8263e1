package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// Names of the store counters the figures read (storeCounts keys).
const (
	// countRequests is the store's count of what its clients asked: Redis commands (those
	// run inside scripts included), MariaDB statements (Questions), PostgreSQL statements
	// (pg_stat_statements: top-level statements, BEGIN and COMMIT included), ZooKeeper
	// packets received (requests and pings).
	countRequests = "requests"
	// countScripts: Redis scripts run (EVAL, EVALSHA and their _RO forms, FCALL).
	countScripts = "scripts"
	// countCPU: the Redis server's CPU time in µs, user and system, of its main thread
	// (INFO cpu), which runs every command and client's I/O. The usec of INFO commandstats
	// would count a script's inner commands twice: once in the script's, once in theirs.
	countCPU = "cpu_us"
	// countCommitStatements: MariaDB and PostgreSQL statements that end a transaction
	// (COMMIT, ROLLBACK), included in countRequests.
	countCommitStatements = "commit_statements"
	// countUpdates: MariaDB UPDATE statements (Com_update, and Com_update_multi for those
	// that join another table, as the batched renewal does).
	countUpdates = "updates"
	// countFsyncs: MariaDB fsyncs (Innodb_data_fsyncs: the redo log's at every durable
	// commit, and the data files' at checkpoints).
	countFsyncs = "fsyncs"
	// countCommits: PostgreSQL transactions committed in the database (xact_commit of
	// pg_stat_database; it reaches the view up to a second late).
	countCommits = "commits"
)

// storeCounts is a reading of a store's own counters, by name; a counter the store or the
// server does not have is absent.
type storeCounts map[string]int64

// since returns how much each counter grew from before to c.
func (c storeCounts) since(before storeCounts) storeCounts {
	d := storeCounts{}
	for k, v := range c {
		if b, ok := before[k]; ok {
			d[k] = v - b
		}
	}
	return d
}

// per returns counter k divided by n, and false when it was not read or n is 0.
func (c storeCounts) per(k string, n float64) (float64, bool) {
	v, ok := c[k]
	if !ok || n <= 0 {
		return 0, false
	}
	return float64(v) / n, true
}

// mariaDBReadings counts the statements this program sent to MariaDB to read its
// counters, so that the counts leave them out.
var mariaDBReadings atomic.Int64

// readCounts reads the counters of store, over the run's admin connection; none for
// memory. What reading them costs is left out: Redis's INFO, the status statements on
// MariaDB (by their number) and the statistics queries on PostgreSQL (by their text).
func readCounts(ctx context.Context, e *env, store string) (storeCounts, error) {
	c := storeCounts{}
	switch store {
	case storeRedis:
		info, err := e.redis.Info(ctx, "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("redis commandstats: %w", err)
		}
		var calls, scripts int64
		for _, line := range strings.Split(info, "\n") {
			name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
			cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
			if !ok || !isCmd || cmd == "info" {
				continue
			}
			n, err := statField(stats, "calls")
			if err != nil {
				return nil, fmt.Errorf("redis commandstats %q: %w", line, err)
			}
			calls += n
			switch cmd {
			case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
				scripts += n
			}
		}
		usec, err := redisCPU(ctx, e)
		if err != nil {
			return nil, err
		}
		c[countRequests], c[countScripts], c[countCPU] = calls, scripts, usec
	case storeSQL:
		read := mariaDBReadings.Add(1) // Questions counts this statement too
		rows, err := e.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN "+
			"('Questions', 'Com_commit', 'Com_rollback', 'Com_update', 'Com_update_multi', 'Innodb_data_fsyncs')")
		if err != nil {
			return nil, fmt.Errorf("mariadb status: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			var v int64
			if err := rows.Scan(&name, &v); err != nil {
				return nil, fmt.Errorf("mariadb status: %w", err)
			}
			switch name {
			case "Questions":
				c[countRequests] = v - read
			case "Com_commit", "Com_rollback":
				c[countCommitStatements] += v
			case "Com_update", "Com_update_multi":
				c[countUpdates] += v
			case "Innodb_data_fsyncs":
				c[countFsyncs] = v
			}
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("mariadb status: %w", err)
		}
	case storePostgres:
		var commits int64
		if err := e.pg.QueryRowContext(ctx, "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()").Scan(&commits); err != nil {
			return nil, fmt.Errorf("postgres pg_stat_database: %w", err)
		}
		c[countCommits] = commits
		// Only when the server loads pg_stat_statements (the one this program starts does).
		var all, tx int64
		err := e.pg.QueryRowContext(ctx, "SELECT coalesce(sum(calls), 0), "+
			"coalesce(sum(calls) FILTER (WHERE upper(query) IN ('COMMIT', 'ROLLBACK', 'END')), 0) "+
			"FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "+
			"AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE '%pg_stat_database%' AND query NOT LIKE '%pg_stat_activity%'").Scan(&all, &tx)
		if err == nil {
			c[countRequests], c[countCommitStatements] = all, tx
		}
	case storeZooKeeper:
		n, err := zkPacketsReceived(ctx, e)
		if err != nil {
			return nil, err
		}
		c[countRequests] = n
	case storeEtcd:
		m, err := etcdMetrics(ctx, e.Etcd, etcdRequests, etcdCommits)
		if err != nil {
			return nil, err
		}
		c[countRequests], c[countCommits] = m[etcdRequests], m[etcdCommits]
	}
	return c, nil
}

// redisCPU returns the CPU time, in µs, that the Redis server's main thread has used
// (the whole process's before Redis 6.2, which has no _main_thread fields).
func redisCPU(ctx context.Context, e *env) (int64, error) {
	info, err := e.redis.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis cpu: %w", err)
	}
	var total float64
	for _, name := range []string{"used_cpu_user", "used_cpu_sys"} {
		v := infoField(info, name+"_main_thread")
		if v == "" {
			v = infoField(info, name)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("redis cpu %s: %w", name, err)
		}
		total += f
	}
	return int64(total * 1e6), nil
}

// statField returns the integer field name of a Redis commandstats value
// ("calls=3,usec=12,...").
func statField(stats, name string) (int64, error) {
	for _, kv := range strings.Split(stats, ",") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s", name)
}

// zkPacketsReceived returns the ZooKeeper server's count of packets received.
func zkPacketsReceived(ctx context.Context, e *env) (int64, error) {
	answer, err := fourLetter(ctx, e.ZooKeeper, "mntr")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(answer, "\n") {
		if k, v, ok := strings.Cut(line, "\t"); ok && k == "zk_packets_received" {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("zookeeper mntr: no zk_packets_received")
}

// storeConnections returns how many client connections the store has open now (Redis
// connected_clients, MariaDB Threads_connected, PostgreSQL's client backends in the
// database), and false for a store without a count.
func storeConnections(ctx context.Context, e *env, store string) (int64, bool, error) {
	var n int64
	var err error
	switch store {
	case storeRedis:
		var info string
		info, err = e.redis.Info(ctx, "clients").Result()
		if err == nil {
			n, err = strconv.ParseInt(infoField(info, "connected_clients"), 10, 64)
		}
	case storeSQL:
		var name string
		mariaDBReadings.Add(1)
		err = e.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &n)
	case storePostgres:
		err = e.pg.QueryRowContext(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'").Scan(&n)
	default:
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("%s connections: %w", store, err)
	}
	return n, true, nil
}
