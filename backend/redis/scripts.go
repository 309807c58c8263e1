package redis

import (
	_ "embed" // the Lua scripts
	"regexp"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The scripts, each wrapped once: Run uses EVALSHA and falls back to EVAL when the server
// does not know the script yet (after a restart, on a new cluster node).
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

	acquireScript = newScript(acquireLua)
	guardScript   = newScript(guardLua)
	releaseScript = newScript(releaseLua)
	lookupScript  = newScript(lookupLua)
	raiseScript   = newScript(raiseLua)
	waitingScript = newScript(waitingLua)
)

// newScript returns the script of body after the part of prelude.lua it uses.
func newScript(body string) *goredis.Script {
	return goredis.NewScript(withPrelude(body))
}

// preludeHead is what every script runs first; preludeDecls are the prelude's top-level
// declarations, in order.
var preludeHead, preludeDecls = splitPrelude(preludeLua)

// declaration is a top-level local of prelude.lua, with the comment above it.
type declaration struct {
	text  string
	names []string        // the names it declares
	uses  map[string]bool // the names its code mentions
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
		decls = append(decls, declaration{names: names})
	}
	if len(starts) == 0 {
		return src, nil
	}
	for i, start := range starts {
		end := len(lines)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		decls[i].text = strings.Join(lines[start:end], "")
		decls[i].uses = namesIn(decls[i].text)
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
