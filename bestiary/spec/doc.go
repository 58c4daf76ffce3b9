// Package spec adds the bestiary's layers to NetSpec's vocabulary as layer kinds (docs/nets.md#netspec
// lists them), named and argued as the book's signatures: `dense_block: {ic, growth_rate, n_layers}`
// is the book's denseBlock. The kinds are known once Register has run; the CLI calls it before it reads
// any spec.
package spec

import "sync"

var registerOnce sync.Once

// Register adds the bestiary's layer kinds to netspec's registry: the vision blocks, then the dense
// and sequence blocks, then the attention blocks. Calling it again changes nothing.
func Register() {
	registerOnce.Do(func() {
		registerVisionKinds()
		registerDenseKinds()
		registerAttentionKinds()
	})
}
