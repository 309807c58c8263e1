//go:build !simba_mutation

package mutation

// On reports whether the named mutation is switched on: never, in this build.
func On(string) bool { return false }
