package redis

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// separator joins the parts of replies and messages in JVM Simba's format.
const separator = "@@"

// releaseChannelSuffix makes the release channel of a mutex, simba:{mutex}:@@released,
// from its owner key (see the package doc, Keys and channels).
const releaseChannelSuffix = ":" + separator + "released"

// maxRemaining bounds the remaining time of an owner key a reply may report, far below
// where duration arithmetic could overflow (the same bound simba puts on ttl + transition).
const maxRemaining = 100 * 365 * 24 * time.Hour

// answer is what a script reports about a mutex's owner.
type answer struct {
	owner string        // empty: no owner
	left  time.Duration // the owner key's PTTL; negative: the key has no expiry
	token uint64        // zero: unknown (no token key for this owner)
	value string        // the owner value of the tenure token names; empty: none or unknown
}

// parseAnswer decodes a script's reply: {"<owner>@@<ms>" or "@@", "<token>", "<value>"}.
func parseAnswer(v any) (answer, error) {
	list, ok := v.([]any)
	if !ok || len(list) != 3 {
		return answer{}, fmt.Errorf("%w: %#v", ErrUnexpectedReply, v)
	}
	owned, ok1 := list[0].(string)
	token, ok2 := list[1].(string)
	value, ok3 := list[2].(string)
	if !ok1 || !ok2 || !ok3 {
		return answer{}, fmt.Errorf("%w: %#v", ErrUnexpectedReply, v)
	}
	owner, left, err := parseOwner(owned)
	if err != nil {
		return answer{}, err
	}
	tok, err := parseToken(token)
	if err != nil {
		return answer{}, err
	}
	if owner == "" && (tok != 0 || value != "") {
		return answer{}, fmt.Errorf("%w: token %d or value %q without an owner", ErrUnexpectedReply, tok, value)
	}
	return answer{owner: owner, left: left, token: tok, value: value}, nil
}

// parseOwner parses JVM Simba's reply "<owner>@@<remaining ms>", or "@@" for no owner.
// The owner is everything before the last "@@": contender IDs never contain "@@", but
// foreign ones may end with "@". A negative remaining time means the key has no expiry
// (PTTL -1); remaining times beyond maxRemaining are clamped to it.
func parseOwner(s string) (owner string, left time.Duration, err error) {
	if s == separator {
		return "", 0, nil
	}
	i := strings.LastIndex(s, separator)
	if i <= 0 {
		return "", 0, fmt.Errorf("%w: owner %q", ErrUnexpectedReply, s)
	}
	ms, err := strconv.ParseInt(s[i+len(separator):], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("%w: owner %q: %w", ErrUnexpectedReply, s, err)
	}
	if ms > maxRemaining.Milliseconds() {
		ms = maxRemaining.Milliseconds()
	}
	if ms < 0 {
		ms = -1
	}
	return s[:i], time.Duration(ms) * time.Millisecond, nil
}

// parseToken parses a fencing token: a decimal uint64, "0" when unknown.
func parseToken(s string) (uint64, error) {
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: token %q: %w", ErrUnexpectedReply, s, err)
	}
	return t, nil
}

// event is the kind of a pub/sub message.
type event int

const (
	acquired event = iota + 1 // "acquired@@<new owner>" on simba:{mutex}
	released                  // "released@@<former owner>" on simba:{mutex}:<waiter>, or "released@@<former owner>[@@<waiter>]" on simba:{mutex}:@@released
	granted                   // "granted@@<nonce>@@<token>@@<former owner>" on simba:{mutex}:<waiter>
	admitted                  // "admitted@@<former holder>@@<waiter>@@<nonce>@@<token>..." on a semaphore's or read-write lock's channel
)

// message is a parsed pub/sub message.
type message struct {
	event
	id    string // the new owner (acquired) or the former owner (released, granted)
	woken string // released, on the release channel: the waiter the release woke, if any; admitted: the entries of the waiters admitted
	nonce string // granted: the nonce of the waiter's registration
	token uint64 // granted: the fencing token of the waiter's tenure
}

// parseMessage parses a pub/sub message "acquired@@<id>", "released@@<id>",
// "released@@<id>@@<waiter>", "granted@@<nonce>@@<token>@@<id>" or
// "admitted@@<id>@@<entries>" (holds.go reads the entries). The ID of acquired
// and granted messages is everything after the "@@" that ends the fields before it; a
// released message's ID ends at the next "@@" (contender IDs never contain one). ok is
// false for anything else.
func parseMessage(payload string) (m message, ok bool) {
	kind, rest, found := strings.Cut(payload, separator)
	if !found {
		return message{}, false
	}
	switch kind {
	case "acquired":
		return message{event: acquired, id: rest}, true
	case "released":
		id, woken, _ := strings.Cut(rest, separator)
		return message{event: released, id: id, woken: woken}, true
	case "admitted":
		id, entries, _ := strings.Cut(rest, separator)
		return message{event: admitted, id: id, woken: entries}, true
	case "granted":
		nonce, rest, ok1 := strings.Cut(rest, separator)
		token, id, ok2 := strings.Cut(rest, separator)
		if !ok1 || !ok2 || nonce == "" {
			return message{}, false
		}
		tok, err := strconv.ParseUint(token, 10, 64)
		if err != nil || tok == 0 {
			return message{}, false
		}
		return message{event: granted, id: id, nonce: nonce, token: tok}, true
	}
	return message{}, false
}
