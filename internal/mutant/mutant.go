// Package mutant builds the deliberate bugs that the simulation and the fault suites must
// catch, to prove that they can fail. Each mutant is a patch, patches/<name>.patch, a
// unified diff against the repository's root (the root module's directory): Build applies
// it to a copy of the module in a scratch directory and builds a test binary there. The
// library's source holds no trace of them, and a patch that no longer applies fails the
// build, so the mutants keep up with the code they break.
//
// To write one: make the change in a checkout, `git diff -U1 > internal/mutant/patches/<name>.patch`
// at the repository's root, and undo it. A mutant of a module of its own below the root
// (backend/etcd) is written the same way.
package mutant

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
// mutant name, and builds the test binary of pkg (a package path relative to root, such
// as "." or "./internal/chaos") to out. A pkg in a module of its own below root (such as
// "./backend/etcd") is built in that module, from a copy of the whole repository, which
// its replace directives may reach into. It runs the go command and git apply.
func Build(root, dir, name, pkg, out string) error {
	patch, err := patches.ReadFile("patches/" + name + ".patch")
	if err != nil {
		return fmt.Errorf("mutant %s: %w", name, err)
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	module, err := moduleOf(root, pkg)
	if err != nil {
		return fmt.Errorf("mutant %s: %w", name, err)
	}
	if err := copyTree(root, dir, module != "."); err != nil {
		return fmt.Errorf("mutant %s: copying the module: %w", name, err)
	}
	patchFile := filepath.Join(dir, ".mutant.patch")
	if err := os.WriteFile(patchFile, patch, 0o644); err != nil {
		return err
	}
	if err := run(dir, "git", "apply", "-C1", "--whitespace=nowarn", patchFile); err != nil {
		return fmt.Errorf("mutant %s: the patch does not apply: %w", name, err)
	}
	rel, err := filepath.Rel(module, filepath.Clean(pkg))
	if err != nil {
		return err
	}
	// -trimpath keeps the build cache's entries of the packages the patch leaves alone
	// valid in the copy, whose directory differs.
	if err := run(filepath.Join(dir, module), "go", "test", "-c", "-trimpath", "-vet=off", "-o", out, "./"+filepath.ToSlash(rel)); err != nil {
		return fmt.Errorf("mutant %s: building %s: %w", name, pkg, err)
	}
	return nil
}

// moduleOf returns the directory, relative to root, of the module that holds pkg (a
// directory relative to root): the nearest one, from pkg up to root, with a go.mod.
func moduleOf(root, pkg string) (string, error) {
	rel := filepath.Clean(pkg)
	if rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("package %s is not below the root", pkg)
	}
	for ; rel != "."; rel = filepath.Dir(rel) {
		if _, err := os.Stat(filepath.Join(root, rel, "go.mod")); err == nil {
			return rel, nil
		}
	}
	return ".", nil
}

// copyTree copies the files below root, without its .git directory, into dir: those of
// the modules of their own below root too with nested, only the root module's otherwise.
func copyTree(root, dir string, nested bool) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if d.Name() == ".git" { // a directory, or a worktree's file naming one
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." && !nested {
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

// Check runs the test path names (such as "TestChaos/redis/11_owner_cut_off") in bin, a
// mutant's test binary, verbosely and with env added to its environment. It reports
// whether that test ran, and whether the run failed on assertion (such as "C2"): a
// failure logged as "<file>_test.go:<line>: <assertion> ...", as the fault suite's
// checker names them. output is the binary's.
func Check(bin, path, assertion string, env ...string) (ran, caught bool, output string) {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(bin, "-test.run", strings.Join(parts, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	output = string(out)
	ran = strings.Contains(output, "=== RUN   "+path+"\n")
	failedOn := regexp.MustCompile(`(?m)^\s+\S+_test\.go:\d+: ` + regexp.QuoteMeta(assertion) + `\b`).MatchString(output)
	return ran, err != nil && failedOn, output
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func run(dir string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
