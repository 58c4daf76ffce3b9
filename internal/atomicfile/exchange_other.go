//go:build !linux

package atomicfile

import "errors"

// exchange is not available: ReplaceDir renames in two steps.
func exchange(a, b string) error { return errors.New("no atomic exchange of names on this platform") }
