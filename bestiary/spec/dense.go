package spec

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	"github.com/trainer/trainer/graphs/netspec"
)

// The bestiary's dense-prediction and sequence blocks that take one tensor and give one, named and
// argued as the book's signatures (kinds are looked up lowercased, so the book's unetDown finds
// unetdown; arguments keep the signature's spelling); package bestiary (dense.go) builds them.
// unetUp takes two inputs, so its kind wraps the level below as a body whose input is the skip;
// fpnModule (four in, four out) has no kind.

func registerDenseKinds() {
	netspec.Register(netspec.Kind{
		Name: "positional_encoding", Doc: "NeRF's γ over the last axis: [x, sin(2^k·π·x), cos(2^k·π·x) for k < numFrequencies], x included; no parameters",
		Args: []netspec.Arg{
			netspec.WidthArg("inputDim", "width of the last axis it encodes; must equal the input's"),
			{Name: "numFrequencies", Type: netspec.TypeInt, Required: true, Min: 0, Max: 64, Doc: "frequency bands L; the width becomes inputDim·(1+2L)"},
		},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := matchWidth("inputDim", l.Int("inputDim"), in); err != nil {
				return nil, err
			}
			out := append([]int(nil), in...)
			out[len(out)-1] = in[len(in)-1] * (1 + 2*l.Int("numFrequencies"))
			return out, netspec.Bound("numFrequencies", out[len(out)-1])
		},
		Build: func(_ *netspec.Builder, _ *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.PositionalEncoding(x, l.Int("numFrequencies"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "unet_down", Doc: "U-Net's down step (milesial's Down): 2×2/2 max-pool, then (3×3 conv without bias, BN, ReLU) twice to oc",
		Args:  []netspec.Arg{netspec.WidthArg("ic", "input channels; must equal the input's"), netspec.WidthArg("oc", "output channels")},
		Norms: []string{"maxpool_conv/1/double_conv/1", "maxpool_conv/1/double_conv/4"},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := netspec.NeedImage(in); err != nil {
				return nil, err
			}
			if err := matchWidth("ic", l.Int("ic"), in); err != nil {
				return nil, err
			}
			if in[0] < 2 || in[1] < 2 {
				return nil, netspec.ArgError("ic", "the 2×2 max-pool needs an input of at least 2×2, got %s", netspec.ShapeString(in))
			}
			h, w, ic, oc := in[0]/2, in[1]/2, in[2], l.Int("oc")
			l.Params = netspec.Product(9, ic, oc) + netspec.Product(9, oc, oc) + 4*int64(oc)
			l.MACs = netspec.Product(h, w, oc, 9, ic) + netspec.Product(h, w, oc, 9, oc)
			return []int{h, w, oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.UNetDown(ctx, x, b.Train, b.Opts, l.Int("oc"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "unet_up", Doc: "U-Net's up step (milesial's Up, bilinear) with its level as a body: the body (starting with a down step) maps the input to half its size; its output is upsampled ×2 (bilinear, align_corners), concatenated after the input (the skip) and double-convolved to oc (mid ic/2)",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "channels of the concatenation: the input's plus the body's"),
			netspec.WidthArg("oc", "output channels"),
			{Name: "layers", Type: netspec.TypeLayers, Required: true, Doc: "the level below: a body mapping [H, W, C] to [H/2, W/2, C'] (e.g. a unetDown first)"},
		},
		Norms: []string{"conv/double_conv/1", "conv/double_conv/4"},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := netspec.NeedImage(in); err != nil {
				return nil, err
			}
			body, err := p.Body(l, "layers", in)
			if err != nil {
				return nil, err
			}
			if len(body) != 3 || 2*body[0] != in[0] || 2*body[1] != in[1] {
				return nil, netspec.ArgError("layers", "the body maps %s to %s; expected an image of exactly half the size, which the upsample doubles back", netspec.ShapeString(in), netspec.ShapeString(body))
			}
			ic, oc := l.Int("ic"), l.Int("oc")
			if ic != in[2]+body[2] {
				return nil, netspec.ArgError("ic", "%d, but the skip has %d channels and the body's output %d; expected their sum %d", ic, in[2], body[2], in[2]+body[2])
			}
			mid := ic / 2
			if mid < 1 {
				return nil, netspec.ArgError("ic", "%d leaves the double conv no middle channels (ic/2); expected at least 2", ic)
			}
			l.Params += netspec.Product(9, ic, mid) + netspec.Product(9, mid, oc) + 2*int64(mid+oc)
			l.MACs += netspec.Product(in[0], in[1], mid, 9, ic) + netspec.Product(in[0], in[1], oc, 9, mid)
			return []int{in[0], in[1], oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			y := b.Sequence(ctx, x, l.Body("layers"))
			return bestiary.UNetUp(ctx, y, x, b.Train, b.Opts, l.Int("oc"))
		},
	})
	var asppNorms []string
	for i := range 4 {
		asppNorms = append(asppNorms, fmt.Sprintf("convs/%d/1", i))
	}
	netspec.Register(netspec.Kind{
		Name: "aspp_module", Doc: "DeepLab v3+ ASPP (torchvision's deeplabv3.ASPP): 1×1, 3×3 atrous at rates 6/12/18 and image-pool branches of oc, each conv-BN-ReLU, concatenated, 1×1 projection + BN + ReLU + dropout 0.5 in training",
		Args:  []netspec.Arg{netspec.WidthArg("ic", "input channels; must equal the input's"), netspec.WidthArg("oc", "channels of each branch and of the output")},
		Norms: append(asppNorms, "convs/4/2", "project/1"),
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := netspec.NeedImage(in); err != nil {
				return nil, err
			}
			if err := matchWidth("ic", l.Int("ic"), in); err != nil {
				return nil, err
			}
			h, w, ic, oc := in[0], in[1], in[2], l.Int("oc")
			if err := netspec.Bound("oc", 5*oc); err != nil {
				return nil, err
			}
			n := int64(len(bestiary.ASPPRates))
			l.Params = 2*netspec.Product(ic, oc) + n*netspec.Product(9, ic, oc) + netspec.Product(5*oc, oc) + 2*(n+3)*int64(oc)
			l.MACs = netspec.Product(h, w, oc, ic) + n*netspec.Product(h, w, oc, 9, ic) + netspec.Product(oc, ic) + netspec.Product(h, w, oc, 5*oc)
			return []int{h, w, oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.ASPPModule(ctx, x, b.Train, b.Opts, l.Int("oc"), bestiary.ASPPRates)
		},
	})
	netspec.Register(netspec.Kind{
		Name: "nerf_mlp", Doc: "NeRF's MLP (nerf-pytorch) over [γ(position) | γ(direction)] on the last axis: 8 ReLU layers with the skip at layer 5, raw σ, feature + direction, hidden/2 ReLU, sigmoid RGB; out [r, g, b, σ]",
		Args: []netspec.Arg{
			netspec.WidthArg("encodedPosDim", "width of γ(position), the first part of the last axis"),
			netspec.WidthArg("encodedDirDim", "width of γ(direction), the rest of it"),
			{Name: "hiddenDim", Type: netspec.TypeInt, Required: true, Min: 2, Max: netspec.MaxDim, Doc: "width of the eight layers (the view layer has half)"},
		},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			p, d, h := l.Int("encodedPosDim"), l.Int("encodedDirDim"), l.Int("hiddenDim")
			if in[len(in)-1] != p+d {
				return nil, netspec.ArgError("encodedPosDim", "%d + encodedDirDim %d = %d, but the input is %s; expected its last axis", p, d, p+d, netspec.ShapeString(in))
			}
			rows := int64(1)
			for _, v := range in[:len(in)-1] {
				rows *= int64(v)
			}
			weights := netspec.Product(p, h) + 6*netspec.Product(h, h) + netspec.Product(p+h, h) + // pts_linears
				int64(h) + netspec.Product(h, h) + netspec.Product(h+d, h/2) + netspec.Product(h/2, 3) // alpha, feature, views, rgb
			l.Params = weights + 9*int64(h) + 1 + int64(h/2) + 3
			l.MACs = rows * weights
			out := append([]int(nil), in...)
			out[len(out)-1] = 4
			return out, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.NeRFMLP(ctx, x, b.Opts, l.Int("encodedPosDim"), l.Int("encodedDirDim"), l.Int("hiddenDim"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "wavenet_block", Doc: "WaveNet's gated stack over tokens [T, residualCh] as time steps: layer i a kernel-2 causal conv at dilation 2^i for tanh(filter)⊙sigmoid(gate), a 1×1 skip and a 1×1 residual (none on the last); out the sum of the skips [T, skipCh]",
		Args: []netspec.Arg{
			netspec.WidthArg("residualCh", "channels of the residual stream; must equal the input's"),
			netspec.WidthArg("skipCh", "channels of the skips and of the output"),
			{Name: "nLayers", Type: netspec.TypeInt, Required: true, Min: 1, Max: 30, Doc: "layers, dilations 1, 2, 4, ..."},
		},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := netspec.NeedTokens(in); err != nil {
				return nil, err
			}
			if err := matchWidth("residualCh", l.Int("residualCh"), in); err != nil {
				return nil, err
			}
			t, r, s, n := in[0], in[1], l.Int("skipCh"), int64(l.Int("nLayers"))
			weights := n*(4*netspec.Product(r, r)+netspec.Product(r, s)) + (n-1)*netspec.Product(r, r)
			l.Params = weights + n*(2*int64(r)+int64(s)) + (n-1)*int64(r)
			l.MACs = int64(t) * weights
			return []int{t, s}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.WaveNetBlock(ctx, x, b.Opts, l.Int("skipCh"), l.Int("nLayers"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "mobilevit_block", Doc: "MobileViT block (timm's MobileVitBlock, 2×2 patches): 3×3 conv-BN-SiLU, 1×1 to dim, unfold, nTxBlocks pre-norm transformer layers (SiLU MLP), LayerNorm, fold, 1×1 conv-BN-SiLU to ic, concat with the input, 3×3 conv-BN-SiLU fusion",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input and output channels; must equal the input's"),
			netspec.WidthArg("dim", "transformer width"),
			netspec.WidthArg("heads", "attention heads; must divide dim"),
			netspec.WidthArg("mlpDim", "hidden width of the transformer's MLP"),
			{Name: "nTxBlocks", Type: netspec.TypeInt, Required: true, Min: 1, Max: 64, Doc: "transformer layers"},
		},
		Norms: []string{"conv_kxk/bn", "conv_proj/bn", "conv_fusion/bn", "norm"},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := netspec.NeedImage(in); err != nil {
				return nil, err
			}
			if err := matchWidth("ic", l.Int("ic"), in); err != nil {
				return nil, err
			}
			h, w, c := in[0], in[1], in[2]
			d, m, n := l.Int("dim"), l.Int("mlpDim"), int64(l.Int("nTxBlocks"))
			if d%l.Int("heads") != 0 {
				return nil, netspec.ArgError("heads", "%d does not divide dim %d", l.Int("heads"), d)
			}
			if h%2 != 0 || w%2 != 0 {
				return nil, netspec.ArgError("ic", "the 2×2 patches need an even height and width, got %s", netspec.ShapeString(in))
			}
			tokens := h * w / 4
			attnParams, attnMACs := netspec.AttentionCost(tokens, d)
			l.Params = netspec.Product(9, c, c) + 2*int64(c) + netspec.Product(c, d) +
				n*(attnParams+4*int64(d)+netspec.Product(d, m)+int64(m)+netspec.Product(m, d)+int64(d)) + 2*int64(d) +
				netspec.Product(d, c) + 2*int64(c) + netspec.Product(9, 2*c, c) + 2*int64(c)
			l.MACs = netspec.Product(h, w, c, 9, c) + netspec.Product(h, w, d, c) + 4*n*(attnMACs+2*netspec.Product(tokens, d, m)) +
				netspec.Product(h, w, c, d) + netspec.Product(h, w, c, 9, 2*c)
			return in, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.MobileViTBlock(ctx, x, b.Train, b.Opts, l.Int("dim"), l.Int("heads"), l.Int("mlpDim"), l.Int("nTxBlocks"))
		},
	})
}

// matchWidth checks that the input's last axis is the width the signature states in field.
func matchWidth(field string, want int, in []int) error {
	if len(in) == 0 || in[len(in)-1] != want {
		return netspec.ArgError(field, "%d, but the input is %s; expected its last axis", want, netspec.ShapeString(in))
	}
	return nil
}
