package spec

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	"github.com/trainer/trainer/graphs/netspec"
)

// The bestiary's attention and structure blocks that take one tensor and give one (docs/bestiary.md):
// transformer_decoder and mamba_block. detrHeads (two outputs) and the AlphaFold blocks stay
// functions of package bestiary.

// maxBestiaryBlocks bounds nBlocks (the norms' scopes are listed up to it).
const maxBestiaryBlocks = 24

func blocksArg() netspec.Arg {
	return netspec.Arg{Name: "nBlocks", Type: netspec.TypeInt, Required: true, Min: 1, Max: maxBestiaryBlocks, Doc: "number of blocks"}
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
	if err := netspec.NeedTokens(in); err != nil {
		return err
	}
	if in[1] != dim {
		return netspec.ArgError("dim", "%d, but the tokens have width %d; expected %d", dim, in[1], in[1])
	}
	return nil
}

func registerAttentionKinds() {
	netspec.Register(netspec.Kind{
		Name: "transformer_decoder", Doc: "the bestiary's transformerDecoder: nQueries learned queries through nBlocks post-norm nn.TransformerDecoderLayer blocks (self-attention, cross-attention to the input tokens, ReLU MLP; PyTorch's init) -> [nQueries, dim]",
		Args: []netspec.Arg{
			netspec.WidthArg("dim", "token width (must be the input's)"),
			netspec.WidthArg("heads", "attention heads; must divide dim"),
			netspec.WidthArg("mlpDim", "hidden width of the MLP"),
			blocksArg(),
			{Name: "nQueries", Type: netspec.TypeInt, Required: true, Min: 1, Max: netspec.MaxDim, Doc: "learned queries (output tokens)"},
		},
		Norms: blockNorms("norm1", "norm2", "norm3"),
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			d, m, q := l.Int("dim"), l.Int("mlpDim"), l.Int("nQueries")
			if err := needWidth(in, d); err != nil {
				return nil, err
			}
			if d%l.Int("heads") != 0 {
				return nil, netspec.ArgError("heads", "%d does not divide dim %d", l.Int("heads"), d)
			}
			t := in[0]
			attn := netspec.Product(d, 3*d) + 4*int64(d) + netspec.Product(d, d)
			l.Params = netspec.Product(q, d)
			for range l.Int("nBlocks") {
				l.Params += 2*attn + netspec.Product(d, m) + int64(m) + netspec.Product(m, d) + int64(d) + 6*int64(d)
				l.MACs += 4*netspec.Product(q, d, d) + 2*netspec.Product(q, q, d)                              // self-attention
				l.MACs += 2*netspec.Product(q, d, d) + 2*netspec.Product(t, d, d) + 2*netspec.Product(q, t, d) // cross-attention
				l.MACs += 2 * netspec.Product(q, d, m)
			}
			return []int{q, d}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.TransformerDecoder(ctx, x, l.Int("heads"), l.Int("mlpDim"), l.Int("nBlocks"), l.Int("nQueries"), b.Opts)
		},
	})
	netspec.Register(netspec.Kind{
		Name: "mamba_block", Doc: "the bestiary's mambaBlock: nBlocks residual Mamba blocks x + mixer(RMSNorm(x)), the mixer with in-projection to x and gate (expand·dim each), causal depthwise conv (kernel 4) + SiLU, the S6 selective scan, SiLU gate and out-projection (Mamba's init); keeps [tokens, dim]",
		Args: []netspec.Arg{
			netspec.WidthArg("dim", "token width (must be the input's)"),
			{Name: "stateSize", Type: netspec.TypeInt, Required: true, Min: 1, Max: 256, Doc: "SSM state per channel (Mamba's d_state, 16)"},
			{Name: "expand", Type: netspec.TypeInt, Required: true, Min: 1, Max: 8, Doc: "inner width = expand × dim (Mamba's 2)"},
			blocksArg(),
		},
		Norms: blockNorms("norm"),
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			d, n := l.Int("dim"), l.Int("stateSize")
			if err := needWidth(in, d); err != nil {
				return nil, err
			}
			e, r, t := l.Int("expand")*d, bestiary.MambaDTRank(d), in[0]
			if err := netspec.Bound("expand", 2*e); err != nil {
				return nil, err
			}
			for range l.Int("nBlocks") {
				l.Params += int64(d) + netspec.Product(d, 2*e) + 5*int64(e) + netspec.Product(e, r+2*n) + netspec.Product(r, e) + int64(e) + netspec.Product(e, n) + int64(e) + netspec.Product(e, d)
				l.MACs += netspec.Product(t, d, 2*e) + netspec.Product(t, e, 4) + netspec.Product(t, e, r+2*n) + netspec.Product(t, r, e) + 3*netspec.Product(t, e, n) + netspec.Product(t, e, d)
			}
			return in, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.MambaBlocks(ctx, x, l.Int("stateSize"), l.Int("expand"), l.Int("nBlocks"), b.Opts)
		},
	})
}
