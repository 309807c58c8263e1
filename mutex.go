package simba

import (
	"github.com/simba-go/simba/backend"

	"reflect"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidateMutex checks a name against every store's rules: not blank, valid UTF-8,
// no control characters, no space at either end. Backends add theirs.
func ValidateMutex(name string) error {
	return validateText("mutex", name)
}

// ValidateContenderID checks a contender ID against ValidateMutex's rules.
func ValidateContenderID(id string) error {
	return validateText("contender ID", id)
}

func validateText(field, s string) error {
	switch {
	case strings.TrimSpace(s) == "":
		return invalid(field, s, "must not be blank")
	case !utf8.ValidString(s):
		return invalid(field, s, "must be valid UTF-8")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return invalid(field, s, "must not contain control characters")
	case strings.TrimSpace(s) != s: // a PAD SPACE collation (MySQL) would fold trailing space
		return invalid(field, s, "must not begin or end with white space")
	}
	return nil
}

// validateNames applies the common rules and the backend's own to the mutex name and, for
// a contender, to its ID (a retriever has none).
func validateNames(b Backend, mutex, id string, contender bool) error {
	if err := ValidateMutex(mutex); err != nil {
		return err
	}
	if contender {
		if err := ValidateContenderID(id); err != nil {
			return err
		}
	}
	v, ok := b.(backend.Validator)
	if !ok {
		return nil
	}
	if err := v.ValidateMutex(mutex); err != nil {
		return err
	}
	if contender {
		return v.ValidateContenderID(id)
	}
	return nil
}

// isNil reports whether v is nil or a nil pointer, map, func, channel or slice in an
// interface, so that a typed nil is rejected instead of panicking later.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
