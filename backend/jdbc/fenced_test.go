package jdbc_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// fencedStore is a store for the fenced-write tests: a pool, a backend whose tenures give
// the tokens, and the UPDATE of ExecFenced's doc comment in the store's dialect.
type fencedStore struct {
	db      *sql.DB
	backend simba.Backend
	write   string // state, token, id, token
}

func fencedStores() map[string]func(t *testing.T, table string) fencedStore {
	return map[string]func(t *testing.T, table string) fencedStore{
		"mariadb": func(t *testing.T, table string) fencedStore {
			return fencedStore{db: openDB(t, "clientFoundRows=true"), backend: newBackend(t),
				write: "UPDATE " + table + " SET state = ?, fence = ? WHERE id = ? AND fence <= ?"}
		},
		"postgres": func(t *testing.T, table string) fencedStore {
			return fencedStore{db: openPG(t), backend: newPGBackend(t),
				write: "UPDATE " + table + " SET state = $1, fence = $2 WHERE id = $3 AND fence <= $4"}
		},
	}
}

// The statements of ExecFenced's doc comment, on each store: once a later tenure has
// written, an earlier tenure's late write is refused and changes nothing; the later
// tenure may write the same again.
func TestExecFencedRejectsAnEarlierTenure(t *testing.T) {
	for name, open := range fencedStores() {
		t.Run(name, func(t *testing.T) {
			table := strings.ReplaceAll(mutexName(t), "-", "_")
			s := open(t, table)
			_, err := s.db.ExecContext(t.Context(), "CREATE TABLE "+table+" (id INT PRIMARY KEY, state VARCHAR(64) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)")
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = s.db.Exec("DROP TABLE " + table) })
			_, err = s.db.ExecContext(t.Context(), "INSERT INTO "+table+" (id, state) VALUES (1, 'new')")
			require.NoError(t, err)

			mutex := mutexName(t)
			tokens := make([]uint64, 2)
			for i := range tokens {
				l, err := simba.NewLocker(s.backend, mutex)
				require.NoError(t, err)
				lease, err := l.Acquire(t.Context())
				require.NoError(t, err)
				tokens[i] = lease.Token()
				require.NoError(t, l.Close())
			}
			earlier, later := tokens[0], tokens[1]
			require.Less(t, earlier, later)

			write := func(state string, token uint64) error {
				return jdbc.ExecFenced(t.Context(), s.db, s.write, state, token, 1, token)
			}
			state := func() string {
				var v string
				require.NoError(t, s.db.QueryRowContext(t.Context(), "SELECT state FROM "+table+" WHERE id = 1").Scan(&v))
				return v
			}
			require.NoError(t, write("earlier", earlier))
			require.NoError(t, write("later", later))
			require.ErrorIs(t, write("late", earlier), simba.ErrFencedOut)
			require.Equal(t, "later", state())
			require.NoError(t, write("later", later), "the same write again by the same tenure")
			require.Equal(t, "later", state())
		})
	}
}

// Without clientFoundRows, MySQL counts only the rows a statement changed: a write that
// changes nothing reads as fenced out, as the doc comment warns.
func TestExecFencedNeedsClientFoundRowsOnMySQL(t *testing.T) {
	db := openDB(t)
	table := strings.ReplaceAll(mutexName(t), "-", "_")
	_, err := db.ExecContext(t.Context(), "CREATE TABLE "+table+" (id INT PRIMARY KEY, state VARCHAR(64) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)")
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.Exec("DROP TABLE " + table) })
	_, err = db.ExecContext(t.Context(), "INSERT INTO "+table+" (id, state) VALUES (1, 'new')")
	require.NoError(t, err)
	q := "UPDATE " + table + " SET state = ?, fence = ? WHERE id = ? AND fence <= ?"
	require.NoError(t, jdbc.ExecFenced(t.Context(), db, q, "s", 5, 1, 5))
	require.ErrorIs(t, jdbc.ExecFenced(t.Context(), db, q, "s", 5, 1, 5), simba.ErrFencedOut)
}

func TestExecFencedRejectsBadInput(t *testing.T) {
	db := openDB(t)
	for name, err := range map[string]error{
		"nil db": jdbc.ExecFenced(t.Context(), nil, "UPDATE t SET a = 1"),
		"insert": jdbc.ExecFenced(t.Context(), db, "INSERT INTO t VALUES (1)"),
		"empty":  jdbc.ExecFenced(t.Context(), db, "  "),
	} {
		if !errors.Is(err, simba.ErrInvalidArgument) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalidArgument", name, err)
		}
	}
}
