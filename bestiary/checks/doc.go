// Package checks holds the bestiary's `trainer verify` rows: each layer of package bestiary at a tiny
// size, its float64 forward against the plain-loop reference (bestiary/reference), the gradient of its
// input and every parameter against central differences, float32 against float64. Register adds them
// to verify's op checks; the CLI calls it before `trainer verify` runs.
package checks

import (
	"sync"

	"github.com/trainer/trainer/verify"
)

var registerOnce sync.Once

// Register adds the bestiary's rows to verify's op checks, after verify's own, in this order: the
// vision blocks, the dense-prediction and sequence blocks, the attention blocks, the Evoformer, the
// structure module (each group in its list's order). Calling it again changes nothing.
func Register() {
	registerOnce.Do(func() {
		for _, group := range [][]func() verify.OpCase{visionCases, denseCases, attentionCases, evoformerCases, structureCases} {
			verify.RegisterOpCases(group...)
		}
	})
}
