package jdbc

import (
	"errors"
	"strings"
)

// ErrSchema marks a table that does not match the simba_mutex format, or a connection
// whose settings would corrupt names: Start fails with a *SchemaError that wraps it.
var ErrSchema = errors.New("simba/jdbc: table does not match the simba_mutex format")

// SchemaError lists what is wrong with the table (or the connection) that Start checked.
// It wraps ErrSchema.
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

// Unwrap returns ErrSchema.
func (e *SchemaError) Unwrap() error { return ErrSchema }
