package simba_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestInstallFromCheckout runs the README's install commands for a checkout in a new module
// that uses the root module and every module of its own, builds it, and installs the
// command-line tool: the route the README gives must work today.
func TestInstallFromCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a new module with the go command")
	}
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)<!-- install: checkout -->\n```sh\n(.*?)\n```").FindSubmatch(readme)
	require.NotNil(t, m, "the README has no install block for a checkout")
	checkout, err := filepath.Abs(".")
	require.NoError(t, err)

	app := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(app, "main.go"), []byte(`package main

import (
	"fmt"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/etcd"
	"github.com/simba-go/simba/backend/memory"
	"github.com/simba-go/simba/observe/simbaotel"
	"github.com/simba-go/simba/observe/simbaprom"
	"github.com/simba-go/simba/simbagocron"
)

var (
	_ = simbaprom.New
	_ = simbaotel.New
	_ = simbagocron.NewElector
	_ = etcd.New
)

func main() {
	b, _ := memory.New(memory.NewStore())
	l, _ := simba.NewLocker(b, "m")
	fmt.Println(l.Mutex())
}
`), 0o644))
	run := func(script string) {
		t.Helper()
		cmd := exec.Command("sh", "-ec", script)
		cmd.Dir = app
		cmd.Env = append(os.Environ(), "SIMBA="+checkout, "GOBIN="+filepath.Join(app, "bin"), "GOFLAGS=")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s\n%s", script, out)
	}
	run("go mod init example.com/app")
	run(string(m[1]))
	run("go build -o app . && ./app")
	_, err = os.Stat(filepath.Join(app, "bin", "simba"))
	require.NoError(t, err, "the command-line tool was not installed")
}
