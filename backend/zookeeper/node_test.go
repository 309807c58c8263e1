package zookeeper_test

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/simba-go/simba/backend/zookeeper"
)

var protected = regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-$`)

func TestProtectionPrefixIsCuratorStyle(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		p := zookeeper.NewProtection()
		assert.Regexp(t, protected, p)
		assert.False(t, seen[p], "protection prefix repeated")
		seen[p] = true
	}
}

func TestSequence(t *testing.T) {
	cases := []struct {
		name string
		seq  int64
		ok   bool
	}{
		{"_c_0b6f2a49-1c7e-4d0c-9f6b-1e2d3c4b5a69-latch-0000000042", 42, true},
		{"latch-0000000000", 0, true},
		{"_c_x-latch-2147483647", 2147483647, true},
		{"_c_x-latch-9999999999", 9999999999, true},
		{"x-latch-latch-0000000007", 7, true},
		{"_c_x-latch-000000042", 0, false},   // 9 digits
		{"_c_x-latch-00000000042", 0, false}, // 11 digits: "latch-" is not right before the last 10
		{"_c_x-latch--000000001", 0, false},  // a negative sequence (counter overflow)
		{"_c_x-lock-0000000001", 0, false},
		{"_c_x-latch-00000000a1", 0, false},
		{"latch-", 0, false},
		{"", 0, false},
		{"0000000001", 0, false},
	}
	for _, c := range cases {
		seq, ok := zookeeper.Sequence(c.name)
		assert.Equal(t, c.ok, ok, c.name)
		assert.Equal(t, c.seq, seq, c.name)
	}
}

// The owner is the lowest sequence number, whatever the protection prefix says; names
// that are not latch nodes are no contenders.
func TestLatchesSortBySequenceNotName(t *testing.T) {
	children := []string{
		"_c_ffffffff-0000-4000-8000-000000000000-latch-0000000003",
		"_c_00000000-0000-4000-8000-000000000000-latch-0000000010",
		"_c_99999999-0000-4000-8000-000000000000-latch-0000000001",
		"not-a-latch",
		"_c_11111111-0000-4000-8000-000000000000-latch-0000000002",
	}
	got := zookeeper.Latches(children)
	assert.Equal(t, []string{children[2], children[4], children[0], children[1]}, got)
	byName := slices.Clone(got)
	slices.Sort(byName)
	assert.NotEqual(t, byName, got, "the case must tell sorting by sequence from sorting by name")
}

// FuzzSequence: the parser never panics, accepts exactly the names that end in "latch-"
// and 10 digits, and sorting puts the lowest sequence first.
func FuzzSequence(f *testing.F) {
	for _, s := range []string{"_c_0b6f2a49-1c7e-4d0c-9f6b-1e2d3c4b5a69-latch-0000000042", "latch-", "latch-9999999999", "", "\x00latch-0000000001", "é-latch-0000000001"} {
		f.Add(s, int64(7))
	}
	f.Fuzz(func(t *testing.T, name string, n int64) {
		seq, ok := zookeeper.Sequence(name)
		want := len(name) >= 16 && name[len(name)-16:len(name)-10] == "latch-" && isDigits(name[len(name)-10:])
		if ok != want {
			t.Fatalf("Sequence(%q) ok = %v, want %v", name, ok, want)
		}
		if ok && fmt.Sprintf("%010d", seq) != name[len(name)-10:] {
			t.Fatalf("Sequence(%q) = %d", name, seq)
		}
		if n < 0 {
			n = -(n + 1)
		}
		n %= 1e10
		built := name + "-latch-" + fmt.Sprintf("%010d", n)
		if got, ok := zookeeper.Sequence(built); !ok || got != n {
			t.Fatalf("Sequence(%q) = %d, %v; want %d", built, got, ok, n)
		}
		other := "_c_a-latch-" + fmt.Sprintf("%010d", (n+1)%1e10)
		l := zookeeper.Latches([]string{other, built, name})
		if len(l) < 2 {
			t.Fatalf("Latches lost a node: %q", l)
		}
		first, _ := zookeeper.Sequence(l[0])
		for _, x := range l[1:] {
			if s, _ := zookeeper.Sequence(x); s < first {
				t.Fatalf("Latches(%q) not in sequence order: %q", []string{other, built, name}, l)
			}
		}
	})
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil && !strings.ContainsAny(s, "+-")
}
