package jdbc

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"

	"github.com/simba-go/simba"
)

// refusal is a store's answer that no retry can cure (see the package documentation,
// Refusals): it matches simba.ErrRefused and the store's error, and says what to fix.
type refusal struct {
	err error
	fix string
}

func (r *refusal) Error() string {
	if r.fix == "" {
		return r.err.Error()
	}
	return r.err.Error() + "; fix: " + r.fix
}

func (r *refusal) Unwrap() []error { return []error{r.err, simba.ErrRefused} }

// refused returns err marked as a refusal when the store's answer in it is one (see
// refusalFix), and err as it is otherwise: an outage, a context's end, or a refusal
// marked already. t is the table, for the GRANT a missing privilege needs.
func refused(err error, t string) error {
	if err == nil || errors.Is(err, simba.ErrRefused) {
		return err
	}
	if fix, ok := refusalFix(err, t); ok {
		return &refusal{err: err, fix: fix}
	}
	return err
}

// isRefusal reports whether err holds a store's answer that no retry can cure.
func isRefusal(err error) bool {
	if errors.Is(err, simba.ErrRefused) {
		return true
	}
	_, ok := refusalFix(err, "")
	return ok
}

// What to fix, by kind of refusal; %[1]s stands for the table.
const (
	fixLogin     = "check the user and password the pool connects with, and that the account may log in from this host"
	fixDatabase  = "check the database the DSN names, and that the user may use it"
	fixPrivilege = "GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s TO the user"
	fixTable     = "the table changed after Start checked it: create it again (CreateTable), or restore its columns"
	fixWritable  = "connect to a writable primary, with a read-write session"
	fixSQL       = "check the dialect (WithDialect) and the server's version: MySQL 5.7, MariaDB 10.3, PostgreSQL 13 or later"
	fixTLS       = "make the DSN's TLS settings (tls=, sslmode=, the CA) match the server's"
	fixBlocked   = "unblock the host: mariadb-admin flush-hosts (FLUSH HOSTS)"
	fixDSN       = "correct the DSN"
)

// mysqlRefusals are the MySQL and MariaDB error numbers that are refusals, and what to fix.
// Every other number is an outage, retried: among them 1040 (too many connections), 1203
// and 1226 (max_user_connections and the other per-user limits), 1205 (lock wait timeout), 1213
// (deadlock), 1053 (server shutdown), 1927 (connection killed), 1317 (query interrupted)
// and 1969 (max_statement_time exceeded).
var mysqlRefusals = map[int]string{
	1045: fixLogin,     // ER_ACCESS_DENIED_ERROR: wrong user or password
	1698: fixLogin,     // ER_ACCESS_DENIED_NO_PASSWORD_ERROR
	1130: fixLogin,     // ER_HOST_NOT_PRIVILEGED: the account may not connect from this host
	1251: fixLogin,     // ER_NOT_SUPPORTED_AUTH_MODE
	1820: fixLogin,     // ER_MUST_CHANGE_PASSWORD
	1862: fixLogin,     // ER_MUST_CHANGE_PASSWORD_LOGIN: the password expired
	3118: fixLogin,     // MySQL's ER_ACCOUNT_HAS_BEEN_LOCKED
	4151: fixLogin,     // MariaDB's ER_ACCOUNT_HAS_BEEN_LOCKED
	1129: fixBlocked,   // ER_HOST_IS_BLOCKED: after many connection errors, until unblocked
	1044: fixDatabase,  // ER_DBACCESS_DENIED_ERROR: no privilege on the database (or it does not exist)
	1049: fixDatabase,  // ER_BAD_DB_ERROR: unknown database
	1142: fixPrivilege, // ER_TABLEACCESS_DENIED_ERROR: a statement's privilege on the table
	1143: fixPrivilege, // ER_COLUMNACCESS_DENIED_ERROR
	1146: fixTable,     // ER_NO_SUCH_TABLE
	1054: fixTable,     // ER_BAD_FIELD_ERROR: unknown column
	1290: fixWritable,  // ER_OPTION_PREVENTS_STATEMENT: --read-only (and other options)
	1792: fixWritable,  // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION: a read-only session
	1836: fixWritable,  // ER_READ_ONLY_MODE
	1036: fixWritable,  // ER_OPEN_AS_READONLY: the table is read-only
	1064: fixSQL,       // ER_PARSE_ERROR: the server does not understand the statement
	1305: fixSQL,       // ER_SP_DOES_NOT_EXIST: nor a function it calls
}

// pgRefusals are the PostgreSQL SQLSTATEs, by class (two characters) or code, that are
// refusals, and what to fix. Every other code is an outage, retried: among them 53300
// (too many connections), 57P01 (shutting down), 57P03 (cannot connect now: starting up,
// in recovery), class 08 (connection exceptions), 40001 (serialization failure), 40P01
// (deadlock), 55P03 (lock_timeout) and 57014 (a statement cancelled).
var pgRefusals = map[string]string{
	"28":    fixLogin,     // invalid authorization: 28P01 wrong password, 28000 no pg_hba.conf entry, no LOGIN
	"3D000": fixDatabase,  // invalid_catalog_name: no such database
	"3F000": fixDatabase,  // invalid_schema_name: no such schema
	"42501": fixPrivilege, // insufficient_privilege
	"42P01": fixTable,     // undefined_table
	"42703": fixTable,     // undefined_column
	"42":    fixSQL,       // the rest of class 42: syntax errors, undefined functions, type mismatches
	"0A000": fixSQL,       // feature_not_supported
	"25006": fixWritable,  // read_only_sql_transaction: a standby, or a read-only session
}

// refusingDriverErrors are the messages of driver errors, without a code of the server's,
// that are refusals: a server without the TLS the client requires, and authentication the
// client will not do. (The drivers' errors are compared by text: the package imports no
// driver.)
var refusingDriverErrors = map[string]string{
	"server refused TLS connection":                           fixTLS,   // pgx
	"TLS requested but server does not support TLS":           fixTLS,   // go-sql-driver
	"this user requires mysql native password authentication": fixLogin, // go-sql-driver
	"this authentication plugin is not supported":             fixLogin, // go-sql-driver
}

// refusalFix reports whether err is a refusal, and what fixes it. t is the table.
func refusalFix(err error, t string) (string, bool) {
	fix, ok := "", false
	var st sqlState
	var verify *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &st):
		code := st.SQLState()
		if fix, ok = pgRefusals[code]; !ok && len(code) == 5 {
			fix, ok = pgRefusals[code[:2]]
		}
	case errors.As(err, &verify), errors.As(err, &authority), errors.As(err, &host), errors.As(err, &invalid):
		fix, ok = fixTLS, true
	default:
		if n, found := mysqlErrorNumber(err); found {
			fix, ok = mysqlRefusals[n]
		} else {
			fix, ok = driverRefusal(err)
		}
	}
	if fix == fixPrivilege {
		fix = fmt.Sprintf(fix, t)
	}
	return fix, ok
}

// serverAnswered reports whether err holds the server's error answer to a statement (an
// error with the server's code): the statement has ended without changing anything.
func serverAnswered(err error) bool {
	var st sqlState
	if errors.As(err, &st) {
		return true
	}
	_, ok := mysqlErrorNumber(err)
	return ok
}

// mysqlError matches the text of go-sql-driver's *MySQLError: "Error 1045 (28000): ..."
// or, without a SQLSTATE, "Error 1045: ...".
var mysqlError = regexp.MustCompile(`^Error (\d{1,5})(?: \([0-9A-Z]{5}\))?: `)

// mysqlErrorNumber returns the server's error number of the MySQL error in err's tree.
func mysqlErrorNumber(err error) (int, bool) {
	for _, leaf := range leaves(err) {
		if m := mysqlError.FindStringSubmatch(leaf.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n, true
		}
	}
	return 0, false
}

// driverRefusal reports whether a leaf of err's tree is one of refusingDriverErrors, or an
// error of err's tree is pgx's *pgconn.ParseConfigError ("cannot parse `<DSN>`: ..."): pgx
// parses the DSN when it connects, not when the pool is opened.
func driverRefusal(err error) (string, bool) {
	for e := range tree(err) {
		if strings.HasPrefix(e.Error(), "cannot parse `") {
			return fixDSN, true
		}
	}
	for _, leaf := range leaves(err) {
		if fix, ok := refusingDriverErrors[leaf.Error()]; ok {
			return fix, true
		}
	}
	return "", false
}

// tree yields err and every error it wraps, depth first.
func tree(err error) iter.Seq[error] {
	return func(yield func(error) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if e == nil {
				return true
			}
			if !yield(e) {
				return false
			}
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, c := range u.Unwrap() {
					if !walk(c) {
						return false
					}
				}
			case interface{ Unwrap() error }:
				return walk(u.Unwrap())
			}
			return true
		}
		walk(err)
	}
}

// leaves returns the errors of err's tree that wrap none.
func leaves(err error) []error {
	var out []error
	for e := range tree(err) {
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			if len(u.Unwrap()) > 0 {
				continue
			}
		case interface{ Unwrap() error }:
			if u.Unwrap() != nil {
				continue
			}
		}
		out = append(out, e)
	}
	return out
}
