// Package mutant builds the deliberate bugs that the simulation and the fault suite must
// catch, to prove that they can fail. Each mutant is a patch, patches/<name>.patch, a
// unified diff against the module's root: Build applies it to a copy of the module in a
// scratch directory and builds a test binary there. The library's source holds no trace of
// them, and a patch that no longer applies fails the build, so the mutants keep up with
// the code they break.
//
// To write one: make the change in a checkout, `git diff > internal/mutant/patches/<name>.patch`,
// and undo it.
package mutant

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

//go:embed patches/*.patch
var patches embed.FS

// Names returns the names of the mutants, sorted.
func Names() []string {
	entries, _ := patches.ReadDir("patches")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".patch"))
	}
	return names
}

// Build copies the module whose root directory is root into dir, applies the patch of the
// mutant name, and builds the test binary of pkg (a package path relative to the root,
// such as "." or "./internal/chaos") to out. It runs the go command and git apply.
func Build(root, dir, name, pkg, out string) error {
	patch, err := patches.ReadFile("patches/" + name + ".patch")
	if err != nil {
		return fmt.Errorf("mutant %s: %w", name, err)
	}
	if err := copyModule(root, dir); err != nil {
		return fmt.Errorf("mutant %s: copying the module: %w", name, err)
	}
	patchFile := filepath.Join(dir, ".mutant.patch")
	if err := os.WriteFile(patchFile, patch, 0o644); err != nil {
		return err
	}
	if err := run(dir, "git", "apply", "-C1", "--whitespace=nowarn", patchFile); err != nil {
		return fmt.Errorf("mutant %s: the patch does not apply: %w", name, err)
	}
	// -trimpath keeps the build cache's entries of the packages the patch leaves alone
	// valid in the copy, whose directory differs.
	if err := run(dir, "go", "test", "-c", "-trimpath", "-vet=off", "-o", out, pkg); err != nil {
		return fmt.Errorf("mutant %s: building %s: %w", name, pkg, err)
	}
	return nil
}

// copyModule copies the files of the module at root, without its .git directory and the
// modules of their own below it, into dir.
func copyModule(root, dir string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
}

func run(dir string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
