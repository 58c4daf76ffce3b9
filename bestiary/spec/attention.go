package netspec

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The bestiary's attention and structure blocks that take one tensor and give one (docs/bestiary.md):
// transformer_decoder and mamba_block. detrHeads (two outputs) and the AlphaFold blocks stay graphs
// functions.

// maxBestiaryBlocks bounds nBlocks (the norms' scopes are listed up to it).
const maxBestiaryBlocks = 24

func blocksArg() Arg {
	return Arg{Name: "nBlocks", Type: TypeInt, Required: true, Min: 1, Max: maxBestiaryBlocks, Doc: "number of blocks"}
}

// blockNorms lists the sub-scopes layers/i/<name> of every possible block.
func blockNorms(names ...string) []string {
	var s []string
	for i := range maxBestiaryBlocks {
		for _, n := range names {
			s = append(s, fmt.Sprintf("layers/%d/%s", i, n))
		}
	}
	return s
}

// needWidth checks that tokens in have width dim.
func needWidth(in []int, dim int) error {
	if err := needTokens(in); err != nil {
		return err
	}
	if in[1] != dim {
		return ArgError("dim", "%d, but the tokens have width %d; expected %d", dim, in[1], in[1])
	}
	return nil
}

func init() {
	Register(Kind{
		Name: "transformer_decoder", Doc: "the bestiary's transformerDecoder: nQueries learned queries through nBlocks post-norm nn.TransformerDecoderLayer blocks (self-attention, cross-attention to the input tokens, ReLU MLP; PyTorch's init) -> [nQueries, dim]",
		Args: []Arg{
			widthArg("dim", "token width (must be the input's)"),
			widthArg("heads", "attention heads; must divide dim"),
			widthArg("mlpDim", "hidden width of the MLP"),
			blocksArg(),
			{Name: "nQueries", Type: TypeInt, Required: true, Min: 1, Max: MaxDim, Doc: "learned queries (output tokens)"},
		},
		Norms: blockNorms("norm1", "norm2", "norm3"),
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			d, m, q := l.Int("dim"), l.Int("mlpDim"), l.Int("nQueries")
			if err := needWidth(in, d); err != nil {
				return nil, err
			}
			if d%l.Int("heads") != 0 {
				return nil, ArgError("heads", "%d does not divide dim %d", l.Int("heads"), d)
			}
			t := in[0]
			attn := int64s(d, 3*d) + 4*int64(d) + int64s(d, d)
			l.Params = int64s(q, d)
			for range l.Int("nBlocks") {
				l.Params += 2*attn + int64s(d, m) + int64(m) + int64s(m, d) + int64(d) + 6*int64(d)
				l.MACs += 4*int64s(q, d, d) + 2*int64s(q, q, d)                     // self-attention
				l.MACs += 2*int64s(q, d, d) + 2*int64s(t, d, d) + 2*int64s(q, t, d) // cross-attention
				l.MACs += 2 * int64s(q, d, m)
			}
			return []int{q, d}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.TransformerDecoder(ctx, x, l.Int("heads"), l.Int("mlpDim"), l.Int("nBlocks"), l.Int("nQueries"), b.Opts)
		},
	})
	Register(Kind{
		Name: "mamba_block", Doc: "the bestiary's mambaBlock: nBlocks residual Mamba blocks x + mixer(RMSNorm(x)), the mixer with in-projection to x and gate (expand·dim each), causal depthwise conv (kernel 4) + SiLU, the S6 selective scan, SiLU gate and out-projection (Mamba's init); keeps [tokens, dim]",
		Args: []Arg{
			widthArg("dim", "token width (must be the input's)"),
			{Name: "stateSize", Type: TypeInt, Required: true, Min: 1, Max: 256, Doc: "SSM state per channel (Mamba's d_state, 16)"},
			{Name: "expand", Type: TypeInt, Required: true, Min: 1, Max: 8, Doc: "inner width = expand × dim (Mamba's 2)"},
			blocksArg(),
		},
		Norms: blockNorms("norm"),
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			d, n := l.Int("dim"), l.Int("stateSize")
			if err := needWidth(in, d); err != nil {
				return nil, err
			}
			e, r, t := l.Int("expand")*d, graphs.MambaDTRank(d), in[0]
			if err := bound("expand", 2*e); err != nil {
				return nil, err
			}
			for range l.Int("nBlocks") {
				l.Params += int64(d) + int64s(d, 2*e) + 5*int64(e) + int64s(e, r+2*n) + int64s(r, e) + int64(e) + int64s(e, n) + int64(e) + int64s(e, d)
				l.MACs += int64s(t, d, 2*e) + int64s(t, e, 4) + int64s(t, e, r+2*n) + int64s(t, r, e) + 3*int64s(t, e, n) + int64s(t, e, d)
			}
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.MambaBlocks(ctx, x, l.Int("stateSize"), l.Int("expand"), l.Int("nBlocks"), b.Opts)
		},
	})
}
