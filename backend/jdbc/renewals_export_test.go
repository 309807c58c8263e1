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

// ExplainRenewMany runs the PostgreSQL statement that renews rows (mutex, contender,
// version) of table in one batch under EXPLAIN ANALYZE, and returns the plan's lines.
func ExplainRenewMany(ctx context.Context, db *sql.DB, table string, ttl time.Duration, rows [][3]any) ([]string, error) {
	d := postgresDialect{}
	list := make([]renewRow, len(rows))
	for i, r := range rows {
		list[i] = renewRow{mutex: r[0].(string), contender: r[1].(string), version: uint64(r[2].(int))}
	}
	text, err := json.Marshal(func() []map[string]any {
		out := make([]map[string]any, len(list))
		for i, r := range list {
			out[i] = map[string]any{"m": r.mutex, "o": r.contender, "v": r.version}
		}
		return out
	}())
	if err != nil {
		return nil, err
	}
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
