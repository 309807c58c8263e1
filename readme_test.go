package simba_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's snippets are the bodies of the runnable examples, which `go test` checks;
// this test keeps the two in sync. With SIMBA_SYNC_README=1 it rewrites the README's
// snippets from the examples instead.
func TestReadmeSnippetsMatchExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	re := regexp.MustCompile("(?s)<!-- snippet: (?:(\\S+) )?(\\w+) -->\n```go\n(.*?)\n```")
	if os.Getenv("SIMBA_SYNC_README") == "1" {
		bodies := map[string]map[string]string{}
		synced := re.ReplaceAllStringFunc(string(readme), func(block string) string {
			m := re.FindStringSubmatch(block)
			dir, name := m[1], m[2]
			if dir == "" {
				dir = "."
			}
			if bodies[dir] == nil {
				bodies[dir] = exampleBodies(t, dir)
			}
			body, ok := bodies[dir][name]
			if !ok {
				return block
			}
			return strings.Replace(block, m[3], body, 1)
		})
		require.NoError(t, os.WriteFile("README.md", []byte(synced), 0o644))
		readme = []byte(synced)
	}
	matches := re.FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, matches, "the README has no snippets")
	bodies := map[string]map[string]string{}
	for _, m := range matches {
		dir, name, snippet := m[1], m[2], m[3]
		if dir == "" {
			dir = "."
		}
		if bodies[dir] == nil {
			bodies[dir] = exampleBodies(t, dir)
		}
		body, ok := bodies[dir][name]
		if assert.True(t, ok, "README snippet %s %s names no example", dir, name) {
			assert.Equal(t, body, snippet, "README snippet %s %s differs from the example", dir, name)
		}
	}
}

// exampleBodies returns the bodies of the Example functions in dir/example_test.go, without
// their output comments and with one level of indentation removed.
func exampleBodies(t *testing.T, dir string) map[string]string {
	path := filepath.Join(dir, "example_test.go")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	require.NoError(t, err)
	bodies := map[string]string{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok || !strings.HasPrefix(fn.Name.Name, "Example") {
			continue
		}
		body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
		if i := strings.Index(body, "\t// Output:"); i >= 0 {
			body = body[:i]
		}
		var lines []string
		for _, l := range strings.Split(strings.Trim(body, "\n"), "\n") {
			lines = append(lines, strings.TrimPrefix(l, "\t"))
		}
		bodies[fn.Name.Name] = strings.TrimRight(strings.Join(lines, "\n"), "\n")
	}
	return bodies
}
