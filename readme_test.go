package simba_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README's snippets are the bodies of the runnable examples, which `go test` checks;
// this test keeps the two in sync.
func TestReadmeSnippetsMatchExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", src, parser.ParseComments)
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
	re := regexp.MustCompile("(?s)<!-- snippet: (\\w+) -->\n```go\n(.*?)\n```")
	matches := re.FindAllStringSubmatch(string(readme), -1)
	require.NotEmpty(t, matches, "the README has no snippets")
	for _, m := range matches {
		body, ok := bodies[m[1]]
		if assert.True(t, ok, "README snippet %s names no example", m[1]) {
			assert.Equal(t, body, m[2], "README snippet %s differs from the example", m[1])
		}
	}
}
