//go:build simba_mutation

package mutation

import "os"

var active = os.Getenv("SIMBA_MUTATION")

// On reports whether SIMBA_MUTATION names this mutation.
func On(name string) bool { return active == name }
