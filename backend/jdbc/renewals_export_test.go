package jdbc

import (
	"context"
	"database/sql"
	"encoding/json"
	"strconv"
	"time"
)

// RememberClearings has the backend record n more mutex and contender pairs as cleared of
// their value rows (clearValue), as n other contenders' tenures would.
func (b *Backend) RememberClearings(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range n {
		if b.cleared == nil || len(b.cleared) >= maxCleared {
			b.cleared = make(map[string]struct{})
		}
		b.cleared["other-"+strconv.Itoa(i)+"\x00x"] = struct{}{}
	}
}

// MaxCleared is how many pairs a backend remembers having cleared.
const MaxCleared = maxCleared

// ExplainRenewMany runs the PostgreSQL statement that renews a batch of table's rows,
// each named by its mutex, owner and version, under EXPLAIN ANALYZE, and returns the plan's
// lines.
func ExplainRenewMany(ctx context.Context, db *sql.DB, table string, ttl time.Duration, rows []RenewRow) ([]string, error) {
	text, err := json.Marshal(rows)
	if err != nil {
		return nil, err
	}
	d := postgresDialect{}
	query, args := d.bound(schema{}, time.Second, d.renewStatement(tableName{name: table}, schema{}, ttl, ttl/2), string(text))
	answer, err := db.QueryContext(ctx, "EXPLAIN (ANALYZE) "+query, args...)
	if err != nil {
		return nil, err
	}
	defer answer.Close()
	var plan []string
	for answer.Next() {
		var line string
		if err := answer.Scan(&line); err != nil {
			return nil, err
		}
		plan = append(plan, line)
	}
	return plan, answer.Err()
}

// AnalyzeRenewManyMariaDB runs the MariaDB statement that renews a batch of table's rows
// under ANALYZE FORMAT=JSON, which executes it, and returns the plan with the rows read.
func AnalyzeRenewManyMariaDB(ctx context.Context, db *sql.DB, table string, ttl time.Duration, rows []RenewRow) (string, error) {
	batch := make([]renewRow, len(rows))
	for i, r := range rows {
		batch[i] = renewRow{mutex: r.Mutex, contender: r.Owner, version: r.Version}
	}
	d := mysqlDialect{}
	query := renewManyQuery(d.renewStatement(tableName{name: table}, schema{mariaDB: true}, ttl, ttl/2), len(rows))
	var plan string
	err := db.QueryRowContext(ctx, "ANALYZE FORMAT=JSON "+query, renewManyArgs(batch)...).Scan(&plan)
	return plan, err
}

// RenewRow is a row of ExplainRenewMany's batch, as the backend sends it.
type RenewRow struct {
	Mutex   string `json:"m"`
	Owner   string `json:"o"`
	Version uint64 `json:"v"`
}
