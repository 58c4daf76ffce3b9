package spec

import (
	"errors"
	"testing"

	"github.com/trainer/trainer/graphs/netspec"
)

// TestBestiaryAttentionKindErrors: a transformer_decoder or mamba_block whose dim is not the tokens'
// width, or whose heads do not divide dim, is one error naming the layer and the field.
func TestBestiaryAttentionKindErrors(t *testing.T) {
	const head = "- input: {size: 8, channels: 1, classes: 2}\n- patch_embed: {patch: 4, dim: 8}\n"
	for _, c := range []struct{ layer, field string }{
		{"- transformer_decoder: {dim: 6, heads: 2, mlpDim: 12, nBlocks: 1, nQueries: 3}", "dim"},
		{"- transformer_decoder: {dim: 8, heads: 3, mlpDim: 12, nBlocks: 1, nQueries: 3}", "heads"},
		{"- transformer_decoder: {dim: 8, heads: 2, mlpDim: 12, nBlocks: 0, nQueries: 3}", "nBlocks"},
		{"- mamba_block: {dim: 4, stateSize: 4, expand: 2, nBlocks: 1}", "dim"},
		{"- mamba_block: {dim: 8, stateSize: 0, expand: 2, nBlocks: 1}", "stateSize"},
	} {
		_, err := netspec.Load("bad.yaml", parse(t, head+c.layer), netspec.Sizes{})
		var e *netspec.Error
		if !errors.As(err, &e) || e.Path != "2" || e.Field != c.field {
			t.Errorf("%s: got %v, want an error of layer 2's %s", c.layer, err, c.field)
		}
	}
}
