package redis

import (
	"crypto/sha1"
	_ "embed" // the Lua scripts
	"encoding/hex"
	"regexp"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts: each a function of the backend's library (see library), and a script of
// its own for EVALSHA, which falls back to EVAL when the server does not know it yet.
var (
	//go:embed prelude.lua
	preludeLua string
	//go:embed acquire.lua
	acquireLua string
	//go:embed guard.lua
	guardLua string
	//go:embed release.lua
	releaseLua string
	//go:embed lookup.lua
	lookupLua string
	//go:embed raise.lua
	raiseLua string
	//go:embed waiting.lua
	waitingLua string
	//go:embed stop.lua
	stopLua string
	//go:embed watch.lua
	watchLua string

	acquireScript = newScript("acquire", acquireLua)
	guardScript   = newScript("guard", guardLua)
	releaseScript = newScript("release", releaseLua)
	lookupScript  = readOnly(newScript("lookup", lookupLua))
	raiseScript   = newScript("raise", raiseLua)
	waitingScript = newScript("waiting", waitingLua)
	stopScript    = newScript("stop", stopLua)
	watchScript   = newScript("watch", watchLua)
)

// script is one of the backend's Lua scripts.
type script struct {
	name        string          // in the library, after its name and '_'
	function    string          // the library's name for it (see library)
	functionArg any             // function, boxed once (see runner.fcall)
	eval        *goredis.Script // the script on its own, for EVALSHA
	code        string          // its function's body in the library
	holds       bool            // a script of holds: after holds_prelude.lua's declarations
	// readOnly: it writes nothing, so its function is registered with the flag
	// no-writes, which lets it run where a script that writes nothing ran by EVALSHA: on a
	// replica, and on a server out of memory, which refuses a function that may write
	// before it runs.
	readOnly bool
}

// newScript returns the script name of body: on its own, after the part of prelude.lua it
// uses; in the library, after the prelude's names made per call that it uses.
func newScript(name, body string) *script {
	return &script{name: name, eval: goredis.NewScript(withPrelude(body)), code: withNames(body)}
}

// newHoldsScript returns the script name of body, a script of holds: on its own, after
// the part of prelude.lua it uses and holds_prelude.lua; in the library, after the names
// of both made per call.
func newHoldsScript(name, body string) *script {
	var b strings.Builder
	writeNames(&b, preludeDecls, declarationsFor(namesIn(holdsPreludeLua+body), nil))
	writeNames(&b, holdsDecls, nil) // all of them, as on its own: the server's time included
	b.WriteString(body)
	return &script{name: name, eval: goredis.NewScript(withPrelude(holdsPreludeLua + body)), code: b.String(), holds: true}
}

// readOnly marks s as a script that writes nothing.
func readOnly(s *script) *script {
	s.readOnly = true
	return s
}

// library is the backend's scripts as one library of Redis functions (Redis 7 and later):
// the preludes' declarations run once, when it is loaded, where a script of its own runs
// them, creating a closure for each function, at every call. Its name and its functions'
// names carry a hash of its code, so that two versions of simba on one server do not
// collide.
var library = newLibrary(acquireScript, guardScript, releaseScript, lookupScript, raiseScript,
	waitingScript, stopScript, watchScript, handOffScript, waitersScript, claimSlotScript, renewManyScript, checkScript,
	holdsAcquireScript, holdsReleaseScript, holdsLookupScript, holdsWaitingScript,
	holdsReleaseHolderScript, holdsStopScript)

// functionLibrary is the code and name of a library of Redis functions.
type functionLibrary struct {
	name, code string
}

// newLibrary returns the library of scripts, and names each script's function in it.
func newLibrary(scripts ...*script) functionLibrary {
	const unnamed = "\x00" // the library's name before its hash is known
	var b strings.Builder
	b.WriteString("#!lua name=" + unnamed + "\n")
	writeLibraryLevel(&b, preludeDecls)
	writeFunctions(&b, unnamed, scripts, false)
	writeLibraryLevel(&b, holdsDecls)
	writeFunctions(&b, unnamed, scripts, true)
	sum := sha1.Sum([]byte(b.String()))
	name := "simba_" + hex.EncodeToString(sum[:8])
	for _, s := range scripts {
		s.function = name + "_" + s.name
		s.functionArg = s.function
	}
	return functionLibrary{name: name, code: strings.ReplaceAll(b.String(), unnamed, name)}
}

// writeLibraryLevel writes decls at the library's level: the functions and constants as
// they are, and the names made per call declared only (each function sets those it uses).
func writeLibraryLevel(b *strings.Builder, decls []declaration) {
	for _, d := range decls {
		if d.perCall {
			b.WriteString("local " + strings.Join(d.names, ", ") + "\n")
		} else {
			b.WriteString(d.text)
		}
	}
}

// writeFunctions registers the scripts of holds, or the others, as functions of the
// library lib; KEYS and ARGV are their parameters.
func writeFunctions(b *strings.Builder, lib string, scripts []*script, holds bool) {
	for _, s := range scripts {
		if s.holds == holds {
			flags := ""
			if s.readOnly {
				flags = ", flags = { 'no-writes' }"
			}
			b.WriteString("redis.register_function{ function_name = '" + lib + "_" + s.name + "'" + flags +
				", callback = function(KEYS, ARGV)\n" + s.code + "\nend }\n")
		}
	}
}

// withNames returns body after the prelude's names made per call (from KEYS[1]) that it
// uses, itself or through the prelude's functions, set: its code as a function of the
// library.
func withNames(body string) string {
	var b strings.Builder
	writeNames(&b, preludeDecls, declarationsFor(namesIn(body), nil))
	b.WriteString(body)
	return b.String()
}

// writeNames writes the statements that set the names made per call of decls, those taken
// (all of them when taken is nil), in order.
func writeNames(b *strings.Builder, decls []declaration, taken []bool) {
	for i, d := range decls {
		if d.perCall && (taken == nil || taken[i]) {
			b.WriteString(d.assign)
		}
	}
}

// preludeHead is what every script runs first; preludeDecls are the prelude's top-level
// declarations, in order; holdsDecls holds_prelude.lua's.
var (
	preludeHead, preludeDecls = splitPrelude(preludeLua)
	_, holdsDecls             = splitPrelude(holdsPreludeLua)
)

// declaration is a top-level local of a prelude, with the comment above it.
type declaration struct {
	text  string
	names []string        // the names it declares
	uses  map[string]bool // the names its code mentions
	// perCall: a value made from the call's KEYS, ARGV or server, not a function. The
	// library declares it once and each function sets it with assign, the declaration
	// without its comment and "local ".
	perCall bool
	assign  string
}

// withPrelude returns body after the prelude's head and the declarations body uses, itself
// or through other declarations, in the prelude's order. A script call runs every
// declaration it holds, creating each function's closure, which Lua's collector then
// frees: the prelude declares 24 functions, of which acquire uses 16 and release 18. In a
// body with a line laterMark, the declarations that only the code after it uses go there:
// a call that returns before it does not create them.
func withPrelude(body string) string {
	early, late, split := strings.Cut(body, laterMark)
	var b strings.Builder
	b.WriteString(preludeHead)
	before := declarationsFor(namesIn(early), nil)
	writeDeclarations(&b, before)
	if !split {
		b.WriteString(body)
		return b.String()
	}
	b.WriteString(early)
	b.WriteString(laterMark)
	writeDeclarations(&b, declarationsFor(namesIn(late), before))
	b.WriteString(late)
	return b.String()
}

// laterMark is the line after which a script's declarations only the rest of it uses are
// placed (see withPrelude).
const laterMark = "-- (here the prelude's declarations that only the code below uses)\n"

// declarationsFor returns which of the prelude's declarations the code naming used needs,
// itself or through other declarations, leaving out those already taken.
func declarationsFor(used map[string]bool, already []bool) []bool {
	taken := make([]bool, len(preludeDecls))
	for grew := true; grew; {
		grew = false
		for i, d := range preludeDecls {
			if !taken[i] && (already == nil || !already[i]) && d.usedIn(used) {
				taken[i], grew = true, true
				for n := range d.uses {
					used[n] = true
				}
			}
		}
	}
	return taken
}

// writeDeclarations writes the prelude's declarations taken, in the prelude's order.
func writeDeclarations(b *strings.Builder, taken []bool) {
	for i, d := range preludeDecls {
		if taken[i] {
			b.WriteString(d.text)
		}
	}
}

func (d declaration) usedIn(names map[string]bool) bool {
	for _, n := range d.names {
		if names[n] {
			return true
		}
	}
	return false
}

// usesAny reports whether code that mentions uses mentions any of names.
func usesAny(uses, names map[string]bool) bool {
	for n := range names {
		if uses[n] {
			return true
		}
	}
	return false
}

// declared matches the first line of a top-level declaration and captures its names.
var declared = regexp.MustCompile(`^local (?:function ([A-Za-z_]\w*)|([A-Za-z_][\w, ]*?) =)`)

// splitPrelude cuts src into what comes before its first top-level local and each
// top-level local from there on, with the comment lines right above it.
func splitPrelude(src string) (string, []declaration) {
	lines := strings.SplitAfter(src, "\n")
	var decls []declaration
	var starts []int
	for i, l := range lines {
		m := declared.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		start := i
		for start > 0 && strings.HasPrefix(lines[start-1], "--") {
			start--
		}
		starts = append(starts, start)
		names := []string{m[1]}
		if m[1] == "" {
			names = strings.Split(strings.ReplaceAll(m[2], " ", ""), ",")
		}
		decls = append(decls, declaration{names: names, perCall: m[1] == ""})
	}
	if len(starts) == 0 {
		return src, nil
	}
	perCall := map[string]bool{"KEYS": true, "ARGV": true, "redis": true}
	for i, start := range starts {
		end := len(lines)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		d := &decls[i]
		d.text = strings.Join(lines[start:end], "")
		d.uses = namesIn(d.text)
		d.perCall = d.perCall && usesAny(d.uses, perCall)
		if d.perCall {
			at := start
			for strings.HasPrefix(lines[at], "--") {
				at++
			}
			d.assign = strings.TrimPrefix(strings.Join(lines[at:end], ""), "local ")
			for _, n := range d.names {
				perCall[n] = true
			}
		}
	}
	return strings.Join(lines[:starts[0]], ""), decls
}

// namesIn returns the names Lua code src mentions, leaving out its comments and string
// literals, where a declaration's name is no use of it.
func namesIn(src string) map[string]bool {
	names := map[string]bool{}
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case strings.HasPrefix(src[i:], "--"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				return names
			}
			i += end
		case c == '\'' || c == '"':
			end := strings.IndexByte(src[i+1:], c)
			if end < 0 {
				return names
			}
			i += end + 2
		case c == '_' || 'a' <= c|0x20 && c|0x20 <= 'z':
			end := i + 1
			for end < len(src) && (src[end] == '_' || 'a' <= src[end]|0x20 && src[end]|0x20 <= 'z' || '0' <= src[end] && src[end] <= '9') {
				end++
			}
			names[src[i:end]] = true
			i = end
		default:
			i++
		}
	}
	return names
}
