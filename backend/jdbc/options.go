package jdbc

import (
	"fmt"
	"strings"

	"github.com/simba-go/simba"
)

// DefaultTable is the name of the table JVM Simba uses.
const DefaultTable = "simba_mutex"

// Option configures New, CreateTable and DDL.
type Option func(*config)

type config struct {
	table    string
	dialect  Dialect
	pins     int  // connections the hand-over may hold; 0: no hand-over
	prepared bool // the MySQL dialect prepares its cycles' statements on pinned connections
}

// DefaultHandOverConnections is how many connections of the pool the hand-over of one
// Backend holds at most, by default: what an application whose pool has 10 can spare.
const DefaultHandOverConnections = 2

// WithTable sets the table, optionally qualified by its schema ("db.simba_mutex"; on
// PostgreSQL the schema is a schema of the DSN's database). Each part must be an
// identifier of at most 64 ASCII letters, digits, '_' and '$' (PostgreSQL: 63), starting
// with a letter or '_'; it is quoted in every statement, so on PostgreSQL it is
// case-sensitive. Default "simba_mutex"; without a schema, the table is looked up in the
// DSN's database (PostgreSQL: on the session's search_path).
func WithTable(name string) Option { return func(c *config) { c.table = name } }

// WithDialect sets the SQL dialect: MySQL (MySQL and MariaDB) or Postgres (PostgreSQL).
// Default MySQL; must not be nil.
func WithDialect(d Dialect) Option { return func(c *config) { c.dialect = d } }

// WithHandOver turns the fast hand-over on or off: with it, a waiting contender learns of
// a graceful release within milliseconds; without it, at its next contend period, as JVM
// Simba's do (up to ttl + transition + 1 s, 17 s by default). Default true;
// WithHandOver(false) is WithHandOverConnections(0). See the package doc, Hand-over, end
// to end, and Connections for what it holds.
func WithHandOver(enabled bool) Option {
	return func(c *config) {
		switch {
		case !enabled:
			c.pins = 0
		case c.pins == 0:
			c.pins = DefaultHandOverConnections
		}
	}
}

// WithHandOverConnections sets how many connections of the pool the backend's hand-over
// holds at most at a time, over all its contentions: a contention that finds none free
// contends without the hand-over (it polls on its contend period) until one is. Default
// DefaultHandOverConnections (2); must be >= 0 (0 turns the hand-over off). Size it, with
// the pool, from the package documentation's connection budget.
func WithHandOverConnections(n int) Option { return func(c *config) { c.pins = n } }

// WithPreparedStatements turns server-side prepared statements on or off for the MySQL
// dialect's acquire and release on the hand-over's pinned connections: each is prepared
// once per connection, which spares the server parsing it at every cycle. A server or
// proxy that refuses to prepare them turns them off by itself. Default true; PostgreSQL
// ignores it.
func WithPreparedStatements(enabled bool) Option { return func(c *config) { c.prepared = enabled } }

func newConfig(opts []Option) (config, tableName, error) {
	c := config{table: DefaultTable, dialect: MySQL, pins: DefaultHandOverConnections, prepared: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.dialect == nil {
		return c, tableName{}, simba.InvalidArgument("dialect", nil, "must not be nil")
	}
	if c.pins < 0 {
		return c, tableName{}, simba.InvalidArgument("hand-over connections", c.pins, "must be >= 0")
	}
	t, err := parseTable(c.table, c.dialect.maxIdentifier())
	return c, t, err
}

// tableName is a validated table name, optionally qualified by its schema.
type tableName struct {
	schema, name string
}

// String returns the name as given: "schema.table" or "table".
func (t tableName) String() string {
	if t.schema == "" {
		return t.name
	}
	return t.schema + "." + t.name
}

// parseTable validates a table name of the form "table" or "schema.table", whose parts
// have at most maxLen characters.
func parseTable(s string, maxLen int) (tableName, error) {
	parts := strings.Split(s, ".")
	if len(parts) > 2 {
		return tableName{}, simba.InvalidArgument("table", s, "must be \"table\" or \"schema.table\"")
	}
	for _, p := range parts {
		if err := checkIdentifier(p, maxLen); err != nil {
			return tableName{}, simba.InvalidArgument("table", s, err.Error())
		}
	}
	if len(parts) == 2 {
		return tableName{schema: parts[0], name: parts[1]}, nil
	}
	return tableName{name: parts[0]}, nil
}

func checkIdentifier(p string, maxLen int) error {
	if p == "" || len(p) > maxLen {
		return fmt.Errorf("each part must have 1 to %d characters", maxLen)
	}
	for i, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case (r >= '0' && r <= '9' || r == '$') && i > 0:
		default:
			return fmt.Errorf("character %q not allowed: use ASCII letters, digits, '_' and '$', not starting with a digit or '$'", r)
		}
	}
	return nil
}
