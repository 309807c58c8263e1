package jdbc

import (
	"errors"
	"strings"

	"github.com/simba-go/simba"
)

// ErrSchema marks a table that does not match the simba_mutex format, or a connection
// whose settings would corrupt names, or a session that may not use the table: Start fails
// with a *SchemaError that wraps it.
var ErrSchema = errors.New("simba/jdbc: table does not match the simba_mutex format")

// SchemaError lists what is wrong with the table (or the connection) that Start checked.
// It matches ErrSchema and simba.ErrRefused: no retry cures it.
type SchemaError struct {
	// Table is the table checked, as "database.table".
	Table string
	// Problems says what is wrong, one problem each, with a fix where there is one.
	Problems []string
}

// Error formats the error as "simba/jdbc: table <table>: <problem>; <problem>".
func (e *SchemaError) Error() string {
	return "simba/jdbc: table " + e.Table + ": " + strings.Join(e.Problems, "; ")
}

// Unwrap returns ErrSchema and simba.ErrRefused.
func (e *SchemaError) Unwrap() []error { return []error{ErrSchema, simba.ErrRefused} }
