package netspec

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The bestiary's dense-prediction and sequence blocks that take one tensor and give one (issue 20),
// named and argued as the book's signatures (kinds are looked up lowercased, so the book's unetDown
// finds unetdown; arguments keep the signature's spelling); graphs/bestiary_dense.go builds them.
// unetUp takes two inputs, so its kind wraps the level below as a body whose input is the skip;
// fpnModule (four in, four out) has no kind.

func init() {
	Register(Kind{
		Name: "positional_encoding", Doc: "NeRF's γ over the last axis: [x, sin(2^k·π·x), cos(2^k·π·x) for k < numFrequencies], x included; no parameters",
		Args: []Arg{
			widthArg("inputDim", "width of the last axis it encodes; must equal the input's"),
			{Name: "numFrequencies", Type: TypeInt, Required: true, Min: 0, Max: 64, Doc: "frequency bands L; the width becomes inputDim·(1+2L)"},
		},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := matchWidth("inputDim", l.Int("inputDim"), in); err != nil {
				return nil, err
			}
			out := append([]int(nil), in...)
			out[len(out)-1] = in[len(in)-1] * (1 + 2*l.Int("numFrequencies"))
			return out, bound("numFrequencies", out[len(out)-1])
		},
		Build: func(_ *Builder, _ *context.Context, l *Layer, x *Node) *Node {
			return graphs.PositionalEncoding(x, l.Int("numFrequencies"))
		},
	})
	Register(Kind{
		Name: "unet_down", Doc: "U-Net's down step (milesial's Down): 2×2/2 max-pool, then (3×3 conv without bias, BN, ReLU) twice to oc",
		Args:  []Arg{widthArg("ic", "input channels; must equal the input's"), widthArg("oc", "output channels")},
		Norms: []string{"maxpool_conv/1/double_conv/1", "maxpool_conv/1/double_conv/4"},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := needImage(in); err != nil {
				return nil, err
			}
			if err := matchWidth("ic", l.Int("ic"), in); err != nil {
				return nil, err
			}
			if in[0] < 2 || in[1] < 2 {
				return nil, ArgError("ic", "the 2×2 max-pool needs an input of at least 2×2, got %s", shapeString(in))
			}
			h, w, ic, oc := in[0]/2, in[1]/2, in[2], l.Int("oc")
			l.Params = int64s(9, ic, oc) + int64s(9, oc, oc) + 4*int64(oc)
			l.MACs = int64s(h, w, oc, 9, ic) + int64s(h, w, oc, 9, oc)
			return []int{h, w, oc}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.UNetDown(ctx, x, b.Train, b.Opts, l.Int("oc"))
		},
	})
	Register(Kind{
		Name: "unet_up", Doc: "U-Net's up step (milesial's Up, bilinear) with its level as a body: the body (starting with a down step) maps the input to half its size; its output is upsampled ×2 (bilinear, align_corners), concatenated after the input (the skip) and double-convolved to oc (mid ic/2)",
		Args: []Arg{
			widthArg("ic", "channels of the concatenation: the input's plus the body's"),
			widthArg("oc", "output channels"),
			{Name: "layers", Type: TypeLayers, Required: true, Doc: "the level below: a body mapping [H, W, C] to [H/2, W/2, C'] (e.g. a unetDown first)"},
		},
		Norms: []string{"conv/double_conv/1", "conv/double_conv/4"},
		Infer: func(p *Checker, l *Layer, in []int) ([]int, error) {
			if err := needImage(in); err != nil {
				return nil, err
			}
			body, err := p.Body(l, "layers", in)
			if err != nil {
				return nil, err
			}
			if len(body) != 3 || 2*body[0] != in[0] || 2*body[1] != in[1] {
				return nil, ArgError("layers", "the body maps %s to %s; expected an image of exactly half the size, which the upsample doubles back", shapeString(in), shapeString(body))
			}
			ic, oc := l.Int("ic"), l.Int("oc")
			if ic != in[2]+body[2] {
				return nil, ArgError("ic", "%d, but the skip has %d channels and the body's output %d; expected their sum %d", ic, in[2], body[2], in[2]+body[2])
			}
			mid := ic / 2
			if mid < 1 {
				return nil, ArgError("ic", "%d leaves the double conv no middle channels (ic/2); expected at least 2", ic)
			}
			l.Params += int64s(9, ic, mid) + int64s(9, mid, oc) + 2*int64(mid+oc)
			l.MACs += int64s(in[0], in[1], mid, 9, ic) + int64s(in[0], in[1], oc, 9, mid)
			return []int{in[0], in[1], oc}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			y := b.Sequence(ctx, x, l.Body("layers"))
			return graphs.UNetUp(ctx, y, x, b.Train, b.Opts, l.Int("oc"))
		},
	})
	var asppNorms []string
	for i := range 4 {
		asppNorms = append(asppNorms, fmt.Sprintf("convs/%d/1", i))
	}
	Register(Kind{
		Name: "aspp_module", Doc: "DeepLab v3+ ASPP (torchvision's deeplabv3.ASPP): 1×1, 3×3 atrous at rates 6/12/18 and image-pool branches of oc, each conv-BN-ReLU, concatenated, 1×1 projection + BN + ReLU + dropout 0.5 in training",
		Args:  []Arg{widthArg("ic", "input channels; must equal the input's"), widthArg("oc", "channels of each branch and of the output")},
		Norms: append(asppNorms, "convs/4/2", "project/1"),
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := needImage(in); err != nil {
				return nil, err
			}
			if err := matchWidth("ic", l.Int("ic"), in); err != nil {
				return nil, err
			}
			h, w, ic, oc := in[0], in[1], in[2], l.Int("oc")
			if err := bound("oc", 5*oc); err != nil {
				return nil, err
			}
			n := int64(len(graphs.ASPPRates))
			l.Params = 2*int64s(ic, oc) + n*int64s(9, ic, oc) + int64s(5*oc, oc) + 2*(n+3)*int64(oc)
			l.MACs = int64s(h, w, oc, ic) + n*int64s(h, w, oc, 9, ic) + int64s(oc, ic) + int64s(h, w, oc, 5*oc)
			return []int{h, w, oc}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.ASPPModule(ctx, x, b.Train, b.Opts, l.Int("oc"), graphs.ASPPRates)
		},
	})
	Register(Kind{
		Name: "nerf_mlp", Doc: "NeRF's MLP (nerf-pytorch) over [γ(position) | γ(direction)] on the last axis: 8 ReLU layers with the skip at layer 5, raw σ, feature + direction, hidden/2 ReLU, sigmoid RGB; out [r, g, b, σ]",
		Args: []Arg{
			widthArg("encodedPosDim", "width of γ(position), the first part of the last axis"),
			widthArg("encodedDirDim", "width of γ(direction), the rest of it"),
			{Name: "hiddenDim", Type: TypeInt, Required: true, Min: 2, Max: MaxDim, Doc: "width of the eight layers (the view layer has half)"},
		},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			p, d, h := l.Int("encodedPosDim"), l.Int("encodedDirDim"), l.Int("hiddenDim")
			if in[len(in)-1] != p+d {
				return nil, ArgError("encodedPosDim", "%d + encodedDirDim %d = %d, but the input is %s; expected its last axis", p, d, p+d, shapeString(in))
			}
			rows := int64(1)
			for _, v := range in[:len(in)-1] {
				rows *= int64(v)
			}
			weights := int64s(p, h) + 6*int64s(h, h) + int64s(p+h, h) + // pts_linears
				int64(h) + int64s(h, h) + int64s(h+d, h/2) + int64s(h/2, 3) // alpha, feature, views, rgb
			l.Params = weights + 9*int64(h) + 1 + int64(h/2) + 3
			l.MACs = rows * weights
			out := append([]int(nil), in...)
			out[len(out)-1] = 4
			return out, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.NeRFMLP(ctx, x, b.Opts, l.Int("encodedPosDim"), l.Int("encodedDirDim"), l.Int("hiddenDim"))
		},
	})
	Register(Kind{
		Name: "wavenet_block", Doc: "WaveNet's gated stack over tokens [T, residualCh] as time steps: layer i a kernel-2 causal conv at dilation 2^i for tanh(filter)⊙sigmoid(gate), a 1×1 skip and a 1×1 residual (none on the last); out the sum of the skips [T, skipCh]",
		Args: []Arg{
			widthArg("residualCh", "channels of the residual stream; must equal the input's"),
			widthArg("skipCh", "channels of the skips and of the output"),
			{Name: "nLayers", Type: TypeInt, Required: true, Min: 1, Max: 30, Doc: "layers, dilations 1, 2, 4, ..."},
		},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := needTokens(in); err != nil {
				return nil, err
			}
			if err := matchWidth("residualCh", l.Int("residualCh"), in); err != nil {
				return nil, err
			}
			t, r, s, n := in[0], in[1], l.Int("skipCh"), int64(l.Int("nLayers"))
			weights := n*(4*int64s(r, r)+int64s(r, s)) + (n-1)*int64s(r, r)
			l.Params = weights + n*(2*int64(r)+int64(s)) + (n-1)*int64(r)
			l.MACs = int64(t) * weights
			return []int{t, s}, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.WaveNetBlock(ctx, x, b.Opts, l.Int("skipCh"), l.Int("nLayers"))
		},
	})
	Register(Kind{
		Name: "mobilevit_block", Doc: "MobileViT block (timm's MobileVitBlock, 2×2 patches): 3×3 conv-BN-SiLU, 1×1 to dim, unfold, nTxBlocks pre-norm transformer layers (SiLU MLP), LayerNorm, fold, 1×1 conv-BN-SiLU to ic, concat with the input, 3×3 conv-BN-SiLU fusion",
		Args: []Arg{
			widthArg("ic", "input and output channels; must equal the input's"),
			widthArg("dim", "transformer width"),
			widthArg("heads", "attention heads; must divide dim"),
			widthArg("mlpDim", "hidden width of the transformer's MLP"),
			{Name: "nTxBlocks", Type: TypeInt, Required: true, Min: 1, Max: 64, Doc: "transformer layers"},
		},
		Norms: []string{"conv_kxk/bn", "conv_proj/bn", "conv_fusion/bn", "norm"},
		Infer: func(_ *Checker, l *Layer, in []int) ([]int, error) {
			if err := needImage(in); err != nil {
				return nil, err
			}
			if err := matchWidth("ic", l.Int("ic"), in); err != nil {
				return nil, err
			}
			h, w, c := in[0], in[1], in[2]
			d, m, n := l.Int("dim"), l.Int("mlpDim"), int64(l.Int("nTxBlocks"))
			if d%l.Int("heads") != 0 {
				return nil, ArgError("heads", "%d does not divide dim %d", l.Int("heads"), d)
			}
			if h%2 != 0 || w%2 != 0 {
				return nil, ArgError("ic", "the 2×2 patches need an even height and width, got %s", shapeString(in))
			}
			tokens := h * w / 4
			attnParams, attnMACs := attentionCost(tokens, d)
			l.Params = int64s(9, c, c) + 2*int64(c) + int64s(c, d) +
				n*(attnParams+4*int64(d)+int64s(d, m)+int64(m)+int64s(m, d)+int64(d)) + 2*int64(d) +
				int64s(d, c) + 2*int64(c) + int64s(9, 2*c, c) + 2*int64(c)
			l.MACs = int64s(h, w, c, 9, c) + int64s(h, w, d, c) + 4*n*(attnMACs+2*int64s(tokens, d, m)) +
				int64s(h, w, c, d) + int64s(h, w, c, 9, 2*c)
			return in, nil
		},
		Build: func(b *Builder, ctx *context.Context, l *Layer, x *Node) *Node {
			return graphs.MobileViTBlock(ctx, x, b.Train, b.Opts, l.Int("dim"), l.Int("heads"), l.Int("mlpDim"), l.Int("nTxBlocks"))
		},
	})
}

// matchWidth checks that the input's last axis is the width the signature states in field.
func matchWidth(field string, want int, in []int) error {
	if len(in) == 0 || in[len(in)-1] != want {
		return ArgError(field, "%d, but the input is %s; expected its last axis", want, shapeString(in))
	}
	return nil
}
