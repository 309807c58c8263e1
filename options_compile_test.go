package simba_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOptionsOfOtherConstructorsDoNotCompile: an option a constructor does not take is a
// compile-time error, not a run-time one. Each snippet is built, with the go command, as a
// package that exists only in an overlay, and must fail to compile.
func TestOptionsOfOtherConstructorsDoNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	misuses := map[string]string{
		"":                                `simba.NewLocker(b, "m", simba.WithContenderID("x"), simba.WithTTL(time.Second))`, // compiles: the control
		"initial delay on a Locker":       `simba.NewLocker(b, "m", simba.WithInitialDelay(time.Second))`,
		"initial delay on Mutexes":        `simba.NewMutexes(b, simba.WithInitialDelay(time.Second))`,
		"contender ID on a Service":       `simba.NewService(b, simba.ContenderFuncs{MutexName: "m", ID: "c"}, simba.WithContenderID("x"))`,
		"contender ID on a lookup":        `simba.Lookup(context.Background(), b, "m", simba.WithContenderID("x"))`,
		"local hand-overs on a Locker":    `simba.NewLocker(b, "m", simba.WithLocalHandOvers(2))`,
		"leader hooks on a Locker":        `simba.NewLocker(b, "m", simba.WithLeaderHooks(nil, nil))`,
		"local hand-overs on a Scheduler": `simba.NewScheduler(b, "m", simba.Schedule{Period: time.Second}, func(context.Context, simba.Owner) {}, simba.WithLocalHandOvers(2))`,
		"initial delay on a retriever":    `simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: "m"}, simba.WithInitialDelay(time.Second))`,
		"owner value on a lookup":         `simba.Lookup(context.Background(), b, "m", simba.WithOwnerValue("v"))`,
		"owner value on a retriever":      `simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: "m"}, simba.WithOwnerValue("v"))`,
		"owner value on Mutexes":          `simba.NewMutexes(b, simba.WithOwnerValue("v"))`,
		"preference on a Locker":          `simba.NewLocker(b, "m", simba.WithPreference(func(string) bool { return true }))`,
		"preference on a retriever":       `simba.NewRetrievalService(b, simba.RetrieverFunc{MutexName: "m"}, simba.WithPreference(func(string) bool { return true }))`,
	}
	dir, err := filepath.Abs("internal/optionscheck") // exists only in the overlay
	require.NoError(t, err)
	for name, call := range misuses {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "check.go")
			require.NoError(t, os.WriteFile(src, []byte(`package optionscheck

import (
	"context"
	"time"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/memory"
)

var _ = context.Background
var _ = time.Second

func check() {
	b, _ := memory.New(memory.NewStore())
	_, _ = `+call+`
}
`), 0o644))
			overlay := filepath.Join(t.TempDir(), "overlay.json")
			data, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(dir, "check.go"): src}})
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(overlay, data, 0o644))
			out, err := exec.Command("go", "build", "-overlay", overlay, "./internal/optionscheck").CombinedOutput()
			if name == "" {
				require.NoError(t, err, "the control does not compile:\n%s", out)
				return
			}
			require.Error(t, err, "compiled: %s", call)
			assert.True(t, strings.Contains(string(out), "does not implement"), "fails as a type error:\n%s", out)
		})
	}
}
