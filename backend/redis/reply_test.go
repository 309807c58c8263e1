package redis

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/simba-go/simba"
)

func TestParseOwner(t *testing.T) {
	cases := []struct {
		in    string
		owner string
		left  time.Duration
		ok    bool
	}{
		{"@@", "", 0, true},
		{"c@@1500", "c", 1500 * time.Millisecond, true},
		{"0:42@10.0.0.1@@16000", "0:42@10.0.0.1", 16 * time.Second, true},
		{"x@@@5", "x@", 5 * time.Millisecond, true}, // a foreign ID ending with @
		{"@x@@5", "@x", 5 * time.Millisecond, true},
		{"c@@-1", "c", -time.Millisecond, true}, // a key without expiry
		{"c@@-2", "c", -time.Millisecond, true},
		{"c@@0", "c", 0, true},
		{"c@@99999999999999999", "c", maxRemaining, true},
		{"", "", 0, false},
		{"c", "", 0, false},
		{"@@5", "", 0, false},
		{"c@@", "", 0, false},
		{"c@@x", "", 0, false},
		{"c@@1.5", "", 0, false},
		{"c@@99999999999999999999999", "", 0, false},
	}
	for _, c := range cases {
		owner, left, err := parseOwner(c.in)
		if !c.ok {
			assert.ErrorIs(t, err, ErrUnexpectedReply, "%q", c.in)
			continue
		}
		require.NoError(t, err, "%q", c.in)
		assert.Equal(t, c.owner, owner, "%q", c.in)
		assert.Equal(t, c.left, left, "%q", c.in)
	}
}

func TestParseAnswer(t *testing.T) {
	a, err := parseAnswer([]any{"c@@1500", "1795253251350913", ""})
	require.NoError(t, err)
	assert.Equal(t, answer{owner: "c", left: 1500 * time.Millisecond, token: 1795253251350913}, a)
	a, err = parseAnswer([]any{"c@@1500", "1795253251350913", "10.0.0.1:80@@v"})
	require.NoError(t, err)
	assert.Equal(t, answer{owner: "c", left: 1500 * time.Millisecond, token: 1795253251350913, value: "10.0.0.1:80@@v"}, a)
	a, err = parseAnswer([]any{"@@", "0", ""})
	require.NoError(t, err)
	assert.Equal(t, answer{}, a)
	for _, bad := range []any{
		nil, "c@@1", []any{}, []any{"c@@1"}, []any{"c@@1", "1"}, []any{"c@@1", "1", "x", "y"},
		[]any{"c@@1", int64(1), ""}, []any{"c@@1", "1", int64(1)},
		[]any{int64(1), "1", ""}, []any{"c@@1", "-1", ""}, []any{"c@@1", "18446744073709551616", ""},
		[]any{"@@", "5", ""}, []any{"@@", "0", "v"}, []any{"c", "1", ""},
	} {
		_, err := parseAnswer(bad)
		assert.ErrorIs(t, err, ErrUnexpectedReply, "%#v", bad)
	}
}

func TestParseMessage(t *testing.T) {
	cases := []struct {
		in   string
		want message
		ok   bool
	}{
		{"acquired@@c", message{event: acquired, id: "c"}, true},
		{"released@@0:42@10.0.0.1", message{event: released, id: "0:42@10.0.0.1"}, true},
		{"released@@@x", message{event: released, id: "@x"}, true},
		{"acquired@@x@", message{event: acquired, id: "x@"}, true},
		{"released@@", message{event: released}, true},
		{"released@@a@@b", message{event: released, id: "a", woken: "b"}, true},
		{"released@@a@@", message{event: released, id: "a"}, true},
		{"granted@@ab12-7@@1795253251350913@@0:42@h", message{event: granted, id: "0:42@h", nonce: "ab12-7", token: 1795253251350913}, true},
		{"granted@@n@@5@@x@@y", message{event: granted, id: "x@@y", nonce: "n", token: 5}, true},
		{"granted@@n@@0@@x", message{}, false},
		{"granted@@n@@-1@@x", message{}, false},
		{"granted@@@@5@@x", message{}, false},
		{"granted@@n@@5", message{}, false},
		{"acquired", message{}, false},
		{"grabbed@@c", message{}, false},
		{"@@c", message{}, false},
		{"", message{}, false},
	}
	for _, c := range cases {
		m, ok := parseMessage(c.in)
		assert.Equal(t, c.ok, ok, "%q", c.in)
		assert.Equal(t, c.want, m, "%q", c.in)
	}
}

// FuzzParseOwner: any reply parses without panicking, and every owner a valid contender
// ID can name round-trips through the reply format.
func FuzzParseOwner(f *testing.F) {
	for _, s := range []string{"@@", "c@@1500", "x@@@5", "c@@-1", "@@5", "c@@", "a@@b@@7", "c@@99999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		owner, left, err := parseOwner(s)
		if err != nil {
			if !errors.Is(err, ErrUnexpectedReply) {
				t.Fatalf("%q: error %v does not wrap ErrUnexpectedReply", s, err)
			}
			return
		}
		if left < -time.Millisecond || left > maxRemaining {
			t.Fatalf("%q: remaining %v out of range", s, left)
		}
		if owner == "" && (s != separator || left != 0) {
			t.Fatalf("%q: no owner but not the empty reply", s)
		}
		if owner != "" && !strings.HasPrefix(s, owner+separator) {
			t.Fatalf("%q: owner %q is not the reply's prefix", s, owner)
		}
	})
}

// FuzzReplyRoundTrip: for every contender ID the backend accepts, the reply and message
// formats give the ID back.
func FuzzReplyRoundTrip(f *testing.F) {
	for _, s := range []string{"c", "0:42@10.0.0.1", "@x", "a@b", "x@", "a@@b", "ü"} {
		f.Add(s, int64(1500))
	}
	var b Backend
	f.Fuzz(func(t *testing.T, id string, ms int64) {
		if simba.ValidateContenderID(id) != nil || b.ValidateContenderID(id) != nil {
			return
		}
		ms = max(ms, -1)
		owner, left, err := parseOwner(id + separator + strconv.FormatInt(ms, 10))
		if err != nil || owner != id {
			t.Fatalf("reply of %q: owner %q, err %v", id, owner, err)
		}
		if want := min(time.Duration(ms)*time.Millisecond, maxRemaining); ms <= maxRemaining.Milliseconds() && left != want {
			t.Fatalf("reply of %q: remaining %v, want %v", id, left, want)
		}
		for _, kind := range []string{"acquired", "released"} {
			m, ok := parseMessage(kind + separator + id)
			if !ok || m.id != id {
				t.Fatalf("%s message of %q: %q, %v", kind, id, m.id, ok)
			}
		}
	})
}

// FuzzParseAnswer: any three strings, as a script could return, parse without
// panicking; an error always wraps ErrUnexpectedReply.
func FuzzParseAnswer(f *testing.F) {
	f.Add("c@@1500", "1795253251350913", "")
	f.Add("c@@1500", "1795253251350913", "v@@w")
	f.Add("@@", "0", "")
	f.Add("@@", "7", "")
	f.Add("@@", "0", "v")
	f.Add("c@@1", "-1", "")
	f.Add("c@@1", "18446744073709551615", "")
	f.Fuzz(func(t *testing.T, owner, token, value string) {
		a, err := parseAnswer([]any{owner, token, value})
		if err != nil {
			if !errors.Is(err, ErrUnexpectedReply) {
				t.Fatalf("error %v does not wrap ErrUnexpectedReply", err)
			}
			return
		}
		if a.owner == "" && (a.token != 0 || a.value != "") {
			t.Fatalf("a token or value without an owner: %+v", a)
		}
	})
}

// FuzzParseMessage: any payload parses without panicking, and a parsed one is rebuilt
// from its fields.
func FuzzParseMessage(f *testing.F) {
	for _, s := range []string{"acquired@@c", "released@@c", "released@@@x", "released@@a@@b", "x@@y", "acquired", "",
		"granted@@ab-1@@17@@c", "granted@@n@@007@@c", "granted@@n@@x@@c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := parseMessage(s)
		if !ok {
			return
		}
		var rebuilt string
		switch m.event {
		case acquired:
			rebuilt = "acquired" + separator + m.id
		case released:
			rebuilt = "released" + separator + m.id
			if strings.Contains(m.id, separator) {
				t.Fatalf("%q parsed as %+v", s, m)
			}
			if len(s) > len(rebuilt) {
				rebuilt += separator + m.woken
			}
		case granted:
			if m.nonce == "" || m.token == 0 || strings.Contains(m.nonce, separator) {
				t.Fatalf("%q parsed as %+v", s, m)
			}
			// The token may have been written with leading zeros or a plus sign.
			_, rest, _ := strings.Cut(strings.TrimPrefix(s, "granted"+separator+m.nonce+separator), separator)
			rebuilt = s
			if rest != m.id {
				t.Fatalf("%q parsed as %+v", s, m)
			}
		}
		if rebuilt != s {
			t.Fatalf("%q parsed as %+v", s, m)
		}
	})
}

// FuzzValidate: validation never panics, and a name it accepts gives keys whose hash tag
// is the whole name.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"orders", "a{b", "}x", "{}", "a@@b", "x@", strings.Repeat("m", MaxMutexLength+1)} {
		f.Add(s)
	}
	var b Backend
	f.Fuzz(func(t *testing.T, s string) {
		if err := b.ValidateContenderID(s); err != nil && !errors.Is(err, simba.ErrInvalidArgument) {
			t.Fatalf("contender ID %q: %v does not wrap ErrInvalidArgument", s, err)
		}
		err := b.ValidateMutex(s)
		if err != nil {
			if !errors.Is(err, simba.ErrInvalidArgument) {
				t.Fatalf("mutex %q: %v does not wrap ErrInvalidArgument", s, err)
			}
			return
		}
		if simba.ValidateMutex(s) != nil {
			return
		}
		key := "simba:{" + s + "}:contender"
		open := strings.IndexByte(key, '{')
		end := strings.IndexByte(key[open+1:], '}')
		if end <= 0 || key[open+1:open+1+end] != s {
			t.Fatalf("mutex %q: the hash tag of %q is not the name", s, key)
		}
	})
}
