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
	names []*regexp.Regexp // matches a use of each name it declares
}

// withPrelude returns body after the prelude's head and the declarations body uses, itself
// or through other declarations, in the prelude's order. A script call runs every
// declaration it holds, creating each function's closure, which Lua's collector then
// frees: the prelude declares 24 functions, of which acquire uses 16 and release 18.
func withPrelude(body string) string {
	used := make([]bool, len(preludeDecls))
	code := []string{codeOf(body)}
	for len(code) > 0 {
		c := code[len(code)-1]
		code = code[:len(code)-1]
		for i, d := range preludeDecls {
			if !used[i] && d.usedBy(c) {
				used[i] = true
				code = append(code, codeOf(d.text))
			}
		}
	}
	var b strings.Builder
	b.WriteString(preludeHead)
	for i, d := range preludeDecls {
		if used[i] {
			b.WriteString(d.text)
		}
	}
	b.WriteString(body)
	return b.String()
}

func (d declaration) usedBy(code string) bool {
	for _, n := range d.names {
		if n.MatchString(code) {
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
	var starts []int
	var names [][]string
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
		if m[1] != "" {
			names = append(names, []string{m[1]})
		} else {
			names = append(names, strings.Split(strings.ReplaceAll(m[2], " ", ""), ","))
		}
	}
	if len(starts) == 0 {
		return src, nil
	}
	decls := make([]declaration, len(starts))
	for i, start := range starts {
		end := len(lines)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		decls[i].text = strings.Join(lines[start:end], "")
		for _, n := range names[i] {
			decls[i].names = append(decls[i].names, regexp.MustCompile(`\b`+n+`\b`))
		}
	}
	return strings.Join(lines[:starts[0]], ""), decls
}

// codeOf returns src without its string literals and comments, where a declaration's
// name is no use of it.
func codeOf(src string) string {
	return comment.ReplaceAllString(literal.ReplaceAllString(src, "''"), "")
}

var (
	literal = regexp.MustCompile(`'[^'\n]*'`)
	comment = regexp.MustCompile(`--.*`)
)
