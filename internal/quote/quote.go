// Package quote renders client-supplied names for error messages.
package quote

import "fmt"

// most is how many bytes of a name an error message shows.
const most = 64

// Name quotes name for an error message, cut short so that a hostile name
// (registry names may be 4 KiB) cannot blow up logs.
func Name(name string) string {
	if len(name) > most {
		return fmt.Sprintf("%q...", name[:most])
	}
	return fmt.Sprintf("%q", name)
}
