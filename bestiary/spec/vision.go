package spec

import (
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/bestiary"
	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/netspec"
)

// The bestiary's vision blocks (docs/bestiary.md#vision-blocks) as layer kinds, with the book's
// signatures as arguments (snake_case): each builds with its graphs or bestiary function, so a spec's
// block has the registered net's scopes and initialisation below its own scope.

// denseBottleneck is DenseNet-BC's bottleneck factor: the 1×1 conv gives 4·growth_rate channels.
const denseBottleneck = 4

func registerVisionKinds() {
	netspec.Register(netspec.Kind{
		Name: "dense_block", Doc: "DenseNet-BC's dense block (torchvision's _DenseBlock): n_layers layers, each BN-ReLU-1×1 conv to 4·growth_rate, BN-ReLU-3×3 conv to growth_rate, fed the concatenation of the input and every earlier layer's output; the output is all of them, ic + n_layers·growth_rate wide; kaiming-normal init",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input channels (must be the input's)"),
			netspec.WidthArg("growth_rate", "channels each layer adds"),
			{Name: "n_layers", Type: netspec.TypeInt, Required: true, Min: 1, Max: 1024, Doc: "layers in the block"},
		},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "ic", l.Int("ic")); err != nil {
				return nil, err
			}
			g, n, hw := l.Int("growth_rate"), l.Int("n_layers"), netspec.Product(in[0], in[1])
			if err := netspec.Bound("growth_rate", denseBottleneck*g); err != nil {
				return nil, err
			}
			out := in[2] + n*g
			if err := netspec.Bound("n_layers", out); err != nil {
				return nil, err
			}
			for i := range n {
				c := in[2] + i*g
				l.Params += 2*int64(c) + netspec.Product(c, denseBottleneck*g) + 2*int64(denseBottleneck*g) + netspec.Product(9, denseBottleneck*g, g)
				l.MACs += hw * (netspec.Product(denseBottleneck*g, c) + netspec.Product(g, 9, denseBottleneck*g))
				s := "denselayer" + strconv.Itoa(i+1)
				p.NormScopes(l, s+"/norm1", s+"/norm2")
			}
			return []int{in[0], in[1], out}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return graphs.DenseBlock(ctx, x, b.Train, b.Opts, l.Int("growth_rate"), denseBottleneck, l.Int("n_layers"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "transition_layer", Doc: "DenseNet's transition (torchvision's _Transition): BN-ReLU, 1×1 conv to oc, 2×2/2 average pool (odd sizes floored)",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input channels (must be the input's)"),
			netspec.WidthArg("oc", "output channels"),
		},
		Norms: []string{"norm"},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "ic", l.Int("ic")); err != nil {
				return nil, err
			}
			if in[0] < 2 || in[1] < 2 {
				return nil, netspec.ArgError("oc", "the 2×2 average pool needs an input of at least 2×2, got %s", netspec.ShapeString(in))
			}
			oc := l.Int("oc")
			l.Params = 2*int64(in[2]) + netspec.Product(in[2], oc)
			l.MACs = netspec.Product(in[0], in[1], oc, in[2])
			return []int{in[0] / 2, in[1] / 2, oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return graphs.TransitionLayer(ctx, x, b.Train, b.Opts, l.Int("oc"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "inception_module", Doc: "GoogLeNet's Inception module as torchvision builds it: four branches (1×1; 1×1-3×3; 1×1-3×3, torchvision's where the paper has 5×5; 3×3/1 max-pool-1×1), each conv bias-free + BN (eps 1e-3) + ReLU, concatenated; truncated-normal(0.01) init",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input channels (must be the input's)"),
			netspec.WidthArg("b1out", "branch 1's 1×1 channels"),
			netspec.WidthArg("b2reduce", "branch 2's 1×1 channels"),
			netspec.WidthArg("b2out", "branch 2's 3×3 channels"),
			netspec.WidthArg("b3reduce", "branch 3's 1×1 channels"),
			netspec.WidthArg("b3out", "branch 3's 3×3 channels"),
			netspec.WidthArg("b4out", "branch 4's 1×1 channels (after the pool)"),
		},
		Norms: []string{"branch1/bn", "branch2/0/bn", "branch2/1/bn", "branch3/0/bn", "branch3/1/bn", "branch4/1/bn"},
		Infer: func(_ *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "ic", l.Int("ic")); err != nil {
				return nil, err
			}
			c := in[2]
			b1, b2r, b2, b3r, b3, b4 := l.Int("b1out"), l.Int("b2reduce"), l.Int("b2out"), l.Int("b3reduce"), l.Int("b3out"), l.Int("b4out")
			out := b1 + b2 + b3 + b4
			if err := netspec.Bound("b4out", out); err != nil {
				return nil, err
			}
			for _, conv := range [][3]int{{1, c, b1}, {1, c, b2r}, {3, b2r, b2}, {1, c, b3r}, {3, b3r, b3}, {1, c, b4}} {
				k, ci, co := conv[0], conv[1], conv[2]
				l.Params += netspec.Product(k, k, ci, co) + 2*int64(co)
				l.MACs += netspec.Product(in[0], in[1], co, k, k, ci)
			}
			return []int{in[0], in[1], out}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return graphs.InceptionModule(ctx, x, b.Train, b.Opts, l.Int("b1out"), l.Int("b2reduce"), l.Int("b2out"),
				l.Int("b3reduce"), l.Int("b3out"), l.Int("b4out"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "shufflev2_block", Doc: "ShuffleNet V2 units (torchvision's InvertedResidual): channel split, 1×1-BN-ReLU, depthwise 3×3-BN, 1×1-BN-ReLU on one half, concatenation and a channel shuffle over 2 groups; when oc ≠ ic the first unit is strided by 2 with a depthwise-1×1 branch on the whole input (torchvision's stage); PyTorch's default init",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input channels (must be the input's)"),
			netspec.WidthArg("oc", "output channels; even"),
			{Name: "n_units", Type: netspec.TypeInt, Required: true, Min: 1, Max: 1024, Doc: "units in the block"},
		},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "ic", l.Int("ic")); err != nil {
				return nil, err
			}
			ic, oc, n := in[2], l.Int("oc"), l.Int("n_units")
			if oc%2 != 0 {
				return nil, netspec.ArgError("oc", "%d is odd; expected an even width (the units split it in half)", oc)
			}
			half, h, w := oc/2, in[0], in[1]
			for u := range n {
				s := strconv.Itoa(u)
				cin := half
				if u == 0 && ic != oc {
					cin = ic
					h, w = (in[0]-1)/2+1, (in[1]-1)/2+1
					l.Params += 11*int64(ic) + netspec.Product(ic, half) + 2*int64(half)
					l.MACs += netspec.Product(h, w, ic, 9) + netspec.Product(h, w, half, ic)
					p.NormScopes(l, s+"/branch1/1", s+"/branch1/3")
					// branch2's first 1×1 runs at the input's size.
					l.MACs += netspec.Product(in[0], in[1], half, cin)
				} else {
					l.MACs += netspec.Product(h, w, half, cin)
				}
				l.Params += netspec.Product(cin, half) + netspec.Product(9, half) + netspec.Product(half, half) + 6*int64(half)
				l.MACs += netspec.Product(h, w, half, 9) + netspec.Product(h, w, half, half)
				p.NormScopes(l, s+"/branch2/1", s+"/branch2/4", s+"/branch2/6")
			}
			return []int{h, w, oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.ShuffleV2Units(ctx, x, b.Train, b.Opts, l.Int("oc"), l.Int("n_units"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "swin_stage", Doc: "Swin Transformer blocks (torchvision's SwinTransformerBlock) over an image's tokens [H, W, dim]: pre-norm window attention with a learned relative position bias on window_size×window_size windows (the map zero-padded to whole windows), every second block on windows shifted by ⌊window_size/2⌋ with the shifted regions masked apart, then a pre-norm GELU MLP; LayerNorm eps 1e-5, trunc-normal(0.02) init",
		Args: []netspec.Arg{
			netspec.WidthArg("dim", "token width (must be the input's channels)"),
			netspec.WidthArg("heads", "attention heads; must divide dim"),
			netspec.WidthArg("mlp_dim", "the MLP's hidden width; a multiple of dim (graphs.SwinBlock takes a ratio)"),
			netspec.KernelArg("window_size", true, 0, "window side in tokens"),
			{Name: "n_blocks", Type: netspec.TypeInt, Required: true, Min: 1, Max: 1024, Doc: "blocks; odd-numbered ones (from 0) shift their windows"},
		},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			d, heads, m, win := l.Int("dim"), l.Int("heads"), l.Int("mlp_dim"), l.Int("window_size")
			if err := needChannels(in, "dim", d); err != nil {
				return nil, err
			}
			if d%heads != 0 {
				return nil, netspec.ArgError("heads", "%d does not divide dim %d", heads, d)
			}
			if m%d != 0 {
				return nil, netspec.ArgError("mlp_dim", "%d is not a multiple of dim %d; expected mlp_ratio·dim", m, d)
			}
			ph, pw := (in[0]+win-1)/win*win, (in[1]+win-1)/win*win
			if netspec.Elements([]int{ph, pw, 3 * d}) > netspec.MaxActivation {
				return nil, netspec.ArgError("window_size", "%d pads the %d×%d map to %d×%d, too many tokens", win, in[0], in[1], ph, pw)
			}
			tokens, n := netspec.Product(ph, pw), netspec.Product(win, win)
			for i := range l.Int("n_blocks") {
				l.Params += 4*int64(d) + netspec.Product(d, 3*d) + 3*int64(d) + netspec.Product(d, d) + int64(d) + netspec.Product(2*win-1, 2*win-1, heads) +
					netspec.Product(d, m) + int64(m) + netspec.Product(m, d) + int64(d)
				l.MACs += tokens*netspec.Product(d, 3*d) + 2*tokens*n*int64(d) + tokens*netspec.Product(d, d) + 2*netspec.Product(in[0], in[1], d, m)
				s := strconv.Itoa(i)
				p.NormScopes(l, s+"/norm1", s+"/norm2", s+"/attn")
			}
			return in, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return graphs.SwinStage(ctx, x, b.Train, b.Opts, l.Int("heads"), l.Int("window_size"), l.Int("mlp_dim")/l.Int("dim"),
				make([]float64, l.Int("n_blocks")))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "shuffle_block", Doc: "ShuffleNet v1 units (Zhang et al. 2018): grouped 1×1 to oc/4-BN-ReLU, channel shuffle, depthwise 3×3-BN, grouped 1×1-BN, ReLU after the join; when oc ≠ ic the first unit is strided by 2, its branch gives oc−ic channels and is concatenated to a 3×3/2 average pool of the input, else the input is added; PyTorch's default init",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input channels (must be the input's)"),
			netspec.WidthArg("oc", "output channels; a multiple of 4, more than ic when it differs"),
			netspec.WidthArg("groups", "groups of the 1×1 convs; must divide ic, oc/4 and the branch's width"),
			{Name: "n_units", Type: netspec.TypeInt, Required: true, Min: 1, Max: 1024, Doc: "units in the block"},
		},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "ic", l.Int("ic")); err != nil {
				return nil, err
			}
			ic, oc, g := in[2], l.Int("oc"), l.Int("groups")
			if oc%4 != 0 {
				return nil, netspec.ArgError("oc", "%d is not a multiple of 4 (the bottleneck is oc/4)", oc)
			}
			mid := oc / 4
			if ic != oc && oc <= ic {
				return nil, netspec.ArgError("oc", "%d is narrower than ic %d; expected oc = ic or oc > ic (the strided unit concatenates the input)", oc, ic)
			}
			for _, c := range []int{ic, mid, oc - ic, oc} {
				if c > 0 && c%g != 0 {
					return nil, netspec.ArgError("groups", "%d does not divide %d (ic %d, oc/4 %d, oc−ic, oc)", g, c, ic, mid)
				}
			}
			h, w := in[0], in[1]
			for u := range l.Int("n_units") {
				cin, bo, oh, ow := oc, oc, h, w
				if u == 0 && ic != oc {
					cin, bo, oh, ow = ic, oc-ic, (h-1)/2+1, (w-1)/2+1
				}
				l.Params += netspec.Product(cin/g, mid) + netspec.Product(9, mid) + netspec.Product(mid/g, bo) + 4*int64(mid) + 2*int64(bo)
				l.MACs += netspec.Product(h, w, mid, cin/g) + netspec.Product(oh, ow, mid, 9) + netspec.Product(oh, ow, bo, mid/g)
				h, w = oh, ow
				s := strconv.Itoa(u)
				p.NormScopes(l, s+"/compress_bn", s+"/depthwise_bn", s+"/expand_bn")
			}
			return []int{h, w, oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.ShuffleBlock(ctx, x, b.Train, b.Opts, l.Int("oc"), l.Int("groups"), l.Int("n_units"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "darknet_block", Doc: "Darknet-53's residual pairs: x + conv 3×3 (conv 1×1 (x)), the 1×1 to channels/2, the 3×3 back to channels, each bias-free + BN + LeakyReLU(0.1); PyTorch's default init",
		Args: []netspec.Arg{
			netspec.WidthArg("channels", "the width (must be the input's); even"),
			{Name: "n_blocks", Type: netspec.TypeInt, Required: true, Min: 1, Max: 1024, Doc: "residual pairs"},
		},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "channels", l.Int("channels")); err != nil {
				return nil, err
			}
			c := in[2]
			if c%2 != 0 {
				return nil, netspec.ArgError("channels", "%d is odd; expected an even width (the 1×1 halves it)", c)
			}
			n := int64(l.Int("n_blocks"))
			l.Params = n * darknetPairParams(c)
			l.MACs = n * netspec.Product(in[0], in[1]) * darknetPairMACs(c)
			for i := range l.Int("n_blocks") {
				s := strconv.Itoa(i)
				p.NormScopes(l, s+"/conv1_bn", s+"/conv2_bn")
			}
			return in, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.DarknetBlock(ctx, x, b.Train, b.Opts, l.Int("n_blocks"))
		},
	})
	netspec.Register(netspec.Kind{
		Name: "csp_block", Doc: "a CSP stage as Scaled-YOLOv4's BottleneckCSP with Darknet's pairs: cv1 (1×1-BN-LeakyReLU to oc/2) through n_blocks Darknet residual pairs and cv3 (1×1), beside cv2 (1×1 to oc/2) of the input; the two concatenated, BN, LeakyReLU(0.1), cv4 (1×1-BN-LeakyReLU to oc); the size is kept (YOLOv4's strided entry conv is a conv layer before it); PyTorch's default init",
		Args: []netspec.Arg{
			netspec.WidthArg("ic", "input channels (must be the input's)"),
			netspec.WidthArg("oc", "output channels; a multiple of 4"),
			{Name: "n_blocks", Type: netspec.TypeInt, Required: true, Min: 1, Max: 1024, Doc: "Darknet residual pairs on the cv1 path"},
		},
		Infer: func(p *netspec.Checker, l *netspec.Layer, in []int) ([]int, error) {
			if err := needChannels(in, "ic", l.Int("ic")); err != nil {
				return nil, err
			}
			ic, oc, n := in[2], l.Int("oc"), l.Int("n_blocks")
			if oc%4 != 0 {
				return nil, netspec.ArgError("oc", "%d is not a multiple of 4 (each path is oc/2 wide and its pairs halve that)", oc)
			}
			h := oc / 2
			l.Params = netspec.Product(ic, h) + 2*int64(h) + int64(n)*darknetPairParams(h) + netspec.Product(h, h) + netspec.Product(ic, h) + 4*int64(h) +
				netspec.Product(2*h, oc) + 2*int64(oc)
			l.MACs = netspec.Product(in[0], in[1]) * (netspec.Product(h, ic) + int64(n)*darknetPairMACs(h) + netspec.Product(h, h) + netspec.Product(h, ic) + netspec.Product(oc, 2*h))
			p.NormScopes(l, "cv1_bn", "bn", "cv4_bn")
			for i := range n {
				s := "m/" + strconv.Itoa(i)
				p.NormScopes(l, s+"/conv1_bn", s+"/conv2_bn")
			}
			return []int{in[0], in[1], oc}, nil
		},
		Build: func(b *netspec.Builder, ctx *context.Context, l *netspec.Layer, x *Node) *Node {
			return bestiary.CSPBlock(ctx, x, b.Train, b.Opts, l.Int("oc"), l.Int("n_blocks"))
		},
	})
}

// darknetPairParams and darknetPairMACs (per output cell) are one Darknet residual pair's at width c.
func darknetPairParams(c int) int64 {
	return netspec.Product(c, c/2) + int64(c) + netspec.Product(9, c/2, c) + 2*int64(c)
}

func darknetPairMACs(c int) int64 { return netspec.Product(c/2, c) + netspec.Product(c, 9, c/2) }

// needChannels checks an image input whose channels the layer's argument field (ic, dim, channels) states.
func needChannels(in []int, field string, v int) error {
	if err := netspec.NeedImage(in); err != nil {
		return err
	}
	if in[2] != v {
		return netspec.ArgError(field, "%d, but the input has %d channels; expected %d", v, in[2], in[2])
	}
	return nil
}
