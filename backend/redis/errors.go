package redis

import (
	"context"
	"errors"
	"strings"

	"github.com/simba-go/simba"
)

// ErrUnexpectedReply is returned, wrapped with the reply, when Redis answers a script in a
// shape this package does not write: typically another program's data under a simba key.
// The answer is then unknown to the caller, as with any store error.
var ErrUnexpectedReply = errors.New("simba/redis: unexpected reply")

var (
	// ErrUnreachable is returned, wrapped with its cause, by a start-up check (see
	// Backend.StartContend) that met an outage: the server did not answer (refused the
	// connection, timed out) or answered that it cannot serve now (LOADING, BUSY, ...).
	ErrUnreachable = errors.New("simba/redis: server unreachable")
	// ErrRefused is returned, wrapped with the server's answer, by the start-up check and
	// by every later call that the server refused in a way no retry can cure: NOAUTH or
	// WRONGPASS, NOPERM (an ACL user without the scripts' permissions), READONLY (a
	// replica), and the others of the package documentation's table. It matches
	// simba.ErrRefused.
	ErrRefused error = &kindError{"simba/redis: server refused the client", simba.ErrRefused}
)

// kindError is a sentinel error of this package that matches one of simba's.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }

// backendError is an error of this package: one line, with the package's prefix once, that
// matches each of its causes.
type backendError struct {
	detail string // the message without the prefix
	causes []error
}

func (e *backendError) Error() string   { return "simba/redis: " + e.detail }
func (e *backendError) Unwrap() []error { return e.causes }

// wrap returns an error "simba/redis: <what>: <cause>" (or "simba/redis: <cause>" when
// what is empty) that matches cause and also, and whose message names each cause once
// and the prefix once.
func wrap(what string, cause error, also ...error) error {
	detail := bare(cause)
	if what != "" {
		detail = what + ": " + detail
	}
	for _, a := range also {
		detail += " (" + bare(a) + ")"
	}
	return &backendError{detail: detail, causes: append([]error{cause}, also...)}
}

// failure returns the error of a call that failed with err: "simba/redis: <what>: <err>"
// (or "simba/redis: <err>" when what is empty) on one line, matching err, kind unless it
// is nil, and ctx.Err() when ctx had ended (go-redis reports a missed deadline as a
// network timeout).
func failure(ctx context.Context, what string, err, kind error) error {
	e := &backendError{detail: bare(err), causes: []error{err}}
	if what != "" {
		e.detail = what + ": " + e.detail
	}
	if kind != nil {
		e.causes = append(e.causes, kind)
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		e.detail += " (" + cerr.Error() + ")"
		e.causes = append(e.causes, cerr)
	}
	return e
}

// bare returns err's message without this package's prefix, for an error that goes into
// another's message.
func bare(err error) string { return strings.ReplaceAll(err.Error(), "simba/redis: ", "") }

// joined returns the messages of errs on one line.
func joined(errs []error) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = bare(err)
	}
	return strings.Join(parts, "; ")
}
