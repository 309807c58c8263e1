package jdbc

import (
	"fmt"
	"unicode/utf8"

	"github.com/simba-go/simba"
)

// Limits of the simba_mutex format that JVM Simba uses, in characters as MySQL and MariaDB
// count them for utf8mb4: one per Unicode code point, whatever its length in bytes.
const (
	// MaxMutexLength is the longest mutex name: the mutex column is varchar(66).
	MaxMutexLength = 66
	// MaxContenderIDLength is the longest contender ID: the owner_id column is
	// varchar(128).
	MaxContenderIDLength = 128
)

// ValidateMutex rejects names longer than MaxMutexLength characters. simba calls it when a
// service, locker or scheduler is created, before any I/O, after its own checks (not blank,
// valid UTF-8, no control characters, no white space at either end). The store cannot be
// left to reject such names itself; see the package documentation. The error wraps
// simba.ErrInvalidArgument.
func (b *Backend) ValidateMutex(name string) error {
	return checkLength("mutex", name, MaxMutexLength, "the mutex column is varchar(66)")
}

// ValidateContenderID rejects IDs longer than MaxContenderIDLength characters, before any
// I/O, like ValidateMutex. The error wraps simba.ErrInvalidArgument.
func (b *Backend) ValidateContenderID(id string) error {
	return checkLength("contender ID", id, MaxContenderIDLength, "the owner_id column is varchar(128)")
}

func checkLength(field, s string, limit int, why string) error {
	if !utf8.ValidString(s) {
		return simba.InvalidArgument(field, s, "must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(s); n > limit {
		return simba.InvalidArgument(field, s, fmt.Sprintf("must be at most %d characters (%s); it has %d", limit, why, n))
	}
	return nil
}

// fits checks a name against the real column Start found, which may be narrower than the
// format (a JVM Simba table with owner_id char(32), say). A mutex name is not quoted: the
// service's error names it already.
func fits(col column, field, s string, t tableName) error {
	n, unit := utf8.RuneCountInString(s), "characters"
	if col.bytes {
		n, unit = len(s), "bytes"
	}
	if n <= col.max {
		return nil
	}
	rule := fmt.Sprintf("must be at most %d %s, as column %s of table %s is %s; use a shorter one, or widen the column",
		col.max, unit, col.name, t, col.typ)
	if field == "mutex" {
		return simba.InvalidArgument(field, sized{n, unit}, rule)
	}
	return simba.InvalidArgument(field, s, fmt.Sprintf("%s (it has %d)", rule, n))
}

// sized stands for a value by its length in an error.
type sized struct {
	n    int
	unit string
}

func (s sized) String() string { return fmt.Sprintf("of %d %s", s.n, s.unit) }
