package bestiary

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
)

// The bestiary's dense-prediction and sequence blocks: NeRF's positional encoding and MLP,
// U-Net's down and up steps, DeepLab v3+'s ASPP, FPN, WaveNet's gated stack and MobileViT's block.
// Images are NHWC, sequences [batch, time, channels]; scopes mirror the PyTorch modules' attribute
// paths (milesial's U-Net, torchvision's ASPP and FeaturePyramidNetwork, NeRF's nerf-pytorch, timm's
// MobileVitBlock), so DefaultTorchName yields their state_dict keys.

// PositionalEncoding is the bestiary's positionalEncoding (inputDim numFrequencies), NeRF's γ(x): x
// itself, then for k = 0..numFrequencies−1 sin(2^k·π·x) and cos(2^k·π·x), each over the whole last axis
// (nerf-pytorch's Embedder order: [x, sin f0, cos f0, sin f1, cos f1, ...]); the last axis grows from d
// to d·(1+2·numFrequencies). It has no parameters. The paper's γ has the π; nerf-pytorch's code leaves
// it out (its inputs are scaled instead).
func PositionalEncoding(x *Node, numFrequencies int) *Node {
	parts := []*Node{x}
	for k := range numFrequencies {
		a := MulScalar(x, math.Ldexp(math.Pi, k))
		parts = append(parts, Sin(a), Cos(a))
	}
	return Concatenate(parts, -1)
}

// doubleConv is milesial's DoubleConv: (3x3 conv without bias, BN, ReLU) twice, the first to mid
// channels; scopes double_conv/0, /1, /3, /4 as nn.Sequential numbers them.
func doubleConv(ctx *context.Context, x *Node, train bool, opts graphs.Options, mid, out int) *Node {
	ctx = ctx.In("double_conv")
	x = graphs.Conv(ctx.In("0"), x, graphs.ConvConfig{Filters: mid, Kernel: 3, Padding: graphs.PadSymmetric}, opts)
	x = graphs.ReLU(graphs.BatchNorm(ctx.In("1"), x, train, graphs.TorchBN, opts))
	x = graphs.Conv(ctx.In("3"), x, graphs.ConvConfig{Filters: out, Kernel: 3, Padding: graphs.PadSymmetric}, opts)
	return graphs.ReLU(graphs.BatchNorm(ctx.In("4"), x, train, graphs.TorchBN, opts))
}

// UNetDown is the bestiary's unetDown (ic oc), milesial's Down: a 2x2/2 max-pool (odd sizes floor),
// then the double conv to out channels (mid = out). Scopes maxpool_conv/1/double_conv/...
func UNetDown(ctx *context.Context, x *Node, train bool, opts graphs.Options, out int) *Node {
	x = graphs.MaxPool2D(x, 2, 2, 0)
	return doubleConv(ctx.In("maxpool_conv").In("1"), x, train, opts, out, out)
}

// UNetUp is the bestiary's unetUp (ic oc), milesial's Up with bilinear=True: x is upsampled ×2
// bilinearly with align_corners=True, concatenated after the skip ([skip, up(x)] on channels, ic wide
// in all) and double-convolved to out channels with mid = ic/2. The skip must be exactly twice x's size
// (milesial's zero-pads a smaller upsampled map; this refuses it instead). Scopes conv/double_conv/...
func UNetUp(ctx *context.Context, x, skip *Node, train bool, opts graphs.Options, out int) *Node {
	xd, sd := x.Shape().Dimensions, skip.Shape().Dimensions
	if sd[1] != 2*xd[1] || sd[2] != 2*xd[2] || sd[0] != xd[0] {
		panic(fmt.Sprintf("graphs.UNetUp in %s: skip %v is not twice the size of x %v", ctx.Scope(), sd, xd))
	}
	up := Resize(x, 2*xd[1], 2*xd[2], ResizeBilinearAlignCorners)
	cat := Concatenate([]*Node{skip, up}, 3)
	ic := cat.Shape().Dimensions[3]
	return doubleConv(ctx.In("conv"), cat, train, opts, ic/2, out)
}

// ResizeMode is how Resize interpolates.
type ResizeMode int

const (
	// ResizeNearest is F.interpolate(mode="nearest"): output cell o reads input floor(o·in/out).
	ResizeNearest ResizeMode = iota
	// ResizeBilinearAlignCorners is F.interpolate(mode="bilinear", align_corners=True): the corner
	// cells of input and output coincide.
	ResizeBilinearAlignCorners
)

// resizeMatrix is the [out, in] matrix that interpolates one axis: row o holds the weights of the
// input cells that output cell o reads.
func resizeMatrix(in, out int, mode ResizeMode) [][]float64 {
	m := make([][]float64, out)
	for o := range m {
		m[o] = make([]float64, in)
		switch mode {
		case ResizeNearest:
			m[o][min(o*in/out, in-1)] = 1
		case ResizeBilinearAlignCorners:
			if out == 1 || in == 1 {
				m[o][0] = 1
				continue
			}
			src := float64(o) * float64(in-1) / float64(out-1)
			i0 := min(int(src), in-2)
			f := src - float64(i0)
			m[o][i0] += 1 - f
			m[o][i0+1] += f
		}
	}
	return m
}

// Resize interpolates NHWC images to outH×outW. Each axis is one product with a constant
// interpolation matrix, so the gradient is that matrix's transpose; the cost is O(out·in) per row,
// fine at the bestiary's sizes, wasteful for large images (a gather would be O(out)).
func Resize(x *Node, outH, outW int, mode ResizeMode) *Node {
	g, dims := x.Graph(), x.Shape().Dimensions
	mh := ConstAsDType(g, x.DType(), resizeMatrix(dims[1], outH, mode))
	mw := ConstAsDType(g, x.DType(), resizeMatrix(dims[2], outW, mode))
	y := DotGeneral(x, []int{1}, nil, mh, []int{1}, nil) // [b, w, c, outH]
	y = TransposeAllAxes(y, 0, 3, 1, 2)                  // [b, outH, w, c]
	y = DotGeneral(y, []int{2}, nil, mw, []int{1}, nil)  // [b, outH, c, outW]
	return TransposeAllAxes(y, 0, 1, 3, 2)
}

// ASPPRates are DeepLab v3's atrous rates at output stride 16 (torchvision's DeepLabHead).
var ASPPRates = []int{6, 12, 18}

// ASPPModule is the bestiary's asppModule (ic oc), torchvision 0.14's deeplabv3.ASPP: five branches
// of out channels each, a 1x1 conv (convs/0), 3x3 atrous convs at rates (convs/1..3, padding = rate)
// and image pooling (convs/4: global average, 1x1 conv, BN, ReLU, broadcast back, which is what the
// bilinear upsample of a 1x1 map gives), every conv bias-free and followed by BN and ReLU; the
// concatenation is projected by a 1x1 conv, BN and ReLU (project/0, /1), then dropout at
// opts.Dropout(0.5) in training, as torchvision's project/3.
func ASPPModule(ctx *context.Context, x *Node, train bool, opts graphs.Options, out int, rates []int) *Node {
	convs := ctx.In("convs")
	convBNReLU := func(c *context.Context, x *Node, kernel, dilation int) *Node {
		x = graphs.Conv(c.In("0"), x, graphs.ConvConfig{Filters: out, Kernel: kernel, Dilation: dilation, Padding: graphs.PadSymmetric}, opts)
		return graphs.ReLU(graphs.BatchNorm(c.In("1"), x, train, graphs.TorchBN, opts))
	}
	branches := []*Node{convBNReLU(convs.In("0"), x, 1, 1)}
	for i, r := range rates {
		branches = append(branches, convBNReLU(convs.In(strconv.Itoa(i+1)), x, 3, r))
	}
	dims := x.Shape().Dimensions
	pool := convs.In(strconv.Itoa(len(rates) + 1))
	p := ReduceAndKeep(x, ReduceMean, 1, 2)
	p = graphs.Conv(pool.In("1"), p, graphs.ConvConfig{Filters: out, Kernel: 1}, opts)
	p = graphs.ReLU(graphs.BatchNorm(pool.In("2"), p, train, graphs.TorchBN, opts))
	branches = append(branches, BroadcastToDims(p, dims[0], dims[1], dims[2], out))
	y := Concatenate(branches, 3)
	project := ctx.In("project")
	y = graphs.Conv(project.In("0"), y, graphs.ConvConfig{Filters: out, Kernel: 1}, opts)
	y = graphs.ReLU(graphs.BatchNorm(project.In("1"), y, train, graphs.TorchBN, opts))
	return graphs.Dropout(ctx, y, opts.Dropout(0.5), train)
}

// initKaimingUniformA1 is nn.init.kaiming_uniform_(a=1), torchvision's FPN conv init: U(±√(3/fanIn)).
func initKaimingUniformA1(rng *rand.Rand, fanIn, _ int) float64 {
	return (2*rng.Float64() - 1) * math.Sqrt(3/float64(fanIn))
}

// FPNModule is the bestiary's fpnModule (c2 c3 c4 c5 target), torchvision 0.14's
// ops.FeaturePyramidNetwork without extra blocks: levels are the maps from finest to coarsest; each
// gets a 1x1 lateral conv to target channels (inner_blocks/i/0), the top-down pathway adds the nearest
// upsample of the coarser merged map, and a 3x3 conv smooths each merged map (layer_blocks/i/0); convs
// have biases, kaiming_uniform(a=1) weights and zero biases. It returns one map per level, target
// channels each, finest first.
func FPNModule(ctx *context.Context, levels []*Node, opts graphs.Options, target int) []*Node {
	init := graphs.Init(initKaimingUniformA1)
	lateral := func(i int, x *Node) *Node {
		return graphs.Conv(ctx.In("inner_blocks").In(strconv.Itoa(i)).In("0"), x, graphs.ConvConfig{Filters: target, Kernel: 1, Bias: true,
			Init: init}, opts)
	}
	smooth := func(i int, x *Node) *Node {
		return graphs.Conv(ctx.In("layer_blocks").In(strconv.Itoa(i)).In("0"), x, graphs.ConvConfig{Filters: target, Kernel: 3, Bias: true,
			Padding: graphs.PadSymmetric, Init: init}, opts)
	}
	n := len(levels)
	out := make([]*Node, n)
	inner := lateral(n-1, levels[n-1])
	out[n-1] = smooth(n-1, inner)
	for i := n - 2; i >= 0; i-- {
		d := levels[i].Shape().Dimensions
		inner = Add(lateral(i, levels[i]), Resize(inner, d[1], d[2], ResizeNearest))
		out[i] = smooth(i, inner)
	}
	return out
}

// NeRF's MLP shape (nerf-pytorch's NeRF: D=8 layers of W, skips=[4]).
const (
	nerfDepth = 8
	nerfSkip  = 4
)

// NeRFMLP is the bestiary's nerfMLP (encodedPosDim encodedDirDim hiddenDim), nerf-pytorch's NeRF with
// use_viewdirs: x's last axis is [γ(position) | γ(direction)]. Eight ReLU layers of hidden units
// (pts_linears/0..7) read the encoded position, the sixth reading [γ(position), h] (the skip after
// layer 5); σ = alpha_linear(h) is returned raw (the renderer applies ReLU, with noise in training);
// feature_linear(h) (no activation) is joined by γ(direction), views_linears/0 maps it to hidden/2
// with ReLU and rgb_linear to 3 with a sigmoid (nerf-pytorch applies it in raw2outputs). The output's
// last axis is [r, g, b, σ], nerf-pytorch's order. Linears have PyTorch's default init.
func NeRFMLP(ctx *context.Context, x *Node, opts graphs.Options, posDim, dirDim, hidden int) *Node {
	last := x.Rank() - 1
	if d := x.Shape().Dimensions[last]; d != posDim+dirDim {
		panic(fmt.Sprintf("graphs.NeRFMLP in %s: input width %d, want encodedPosDim+encodedDirDim = %d", ctx.Scope(), d, posDim+dirDim))
	}
	pos := SliceAxis(x, last, AxisRange(0, posDim))
	dir := SliceAxis(x, last, AxisRange(posDim, posDim+dirDim))
	h := pos
	for i := range nerfDepth {
		h = graphs.ReLU(graphs.Linear(ctx.In("pts_linears").In(strconv.Itoa(i)), h, graphs.LinearConfig{Units: hidden}, opts))
		if i == nerfSkip {
			h = Concatenate([]*Node{pos, h}, -1)
		}
	}
	sigma := graphs.Linear(ctx.In("alpha_linear"), h, graphs.LinearConfig{Units: 1}, opts)
	feature := graphs.Linear(ctx.In("feature_linear"), h, graphs.LinearConfig{Units: hidden}, opts)
	h = Concatenate([]*Node{feature, dir}, -1)
	h = graphs.ReLU(graphs.Linear(ctx.In("views_linears").In("0"), h, graphs.LinearConfig{Units: hidden / 2}, opts))
	rgb := Logistic(graphs.Linear(ctx.In("rgb_linear"), h, graphs.LinearConfig{Units: 3}, opts))
	return Concatenate([]*Node{rgb, sigma}, -1)
}

// causalConv1D is a kernel-2 causal convolution over time of x [batch, time, in] at the dilation:
// y[t] = W[0]·x[t−d] + W[1]·x[t] + b, with x[t−d] = 0 before the start. Variables weight [2, in, out]
// (Conv1d's [out, in, 2] with the taps first) and bias [out], PyTorch's default init. It is built as a
// shift and two products rather than a dilated convolution: exact, and cheap on every backend.
func causalConv1D(ctx *context.Context, x *Node, opts graphs.Options, out, dilation int) *Node {
	dims := x.Shape().Dimensions
	t, in := dims[1], dims[2]
	w := graphs.AsDType(graphs.Param(ctx, x.Graph(), opts, "weight", graphs.InitTorchDefault, 2*in, 2*out, 2, in, out), x)
	bias := graphs.AsDType(graphs.Param(ctx, x.Graph(), opts, "bias", graphs.InitTorchDefault, 2*in, 2*out, out), x)
	shifted := ZerosLike(x)
	if dilation < t {
		shifted = graphs.ZeroPad(SliceAxis(x, 1, AxisRange(0, t-dilation)), 1, dilation, 0)
	}
	opts.Stats.Add(int64(t) * int64(2*in) * int64(out))
	w0 := Squeeze(SliceAxis(w, 0, AxisElem(0)), 0)
	w1 := Squeeze(SliceAxis(w, 0, AxisElem(1)), 0)
	y := Add(DotGeneral(shifted, []int{2}, nil, w0, []int{0}, nil), DotGeneral(x, []int{2}, nil, w1, []int{0}, nil))
	return Add(y, Reshape(bias, 1, 1, out))
}

// WaveNetBlock is the bestiary's waveNetBlock (residualCh skipCh nLayers), the paper's stack of gated
// residual layers over x [batch, time, residualCh]: layer i (scope layers/i) has dilation 2^i, a
// kernel-2 causal filter and gate conv (residualCh each), z = tanh(filter)⊙sigmoid(gate), a 1x1 skip
// conv of z to skipCh and a 1x1 residual conv of z added to its input. The block returns the sum of
// the skips [batch, time, skipCh]; the last layer has no residual conv (nothing would read it).
func WaveNetBlock(ctx *context.Context, x *Node, opts graphs.Options, skipCh, layers int) *Node {
	residual := x.Shape().Dimensions[2]
	var skips *Node
	for i := range layers {
		l := ctx.In("layers").In(strconv.Itoa(i))
		d := 1 << i
		z := Mul(Tanh(causalConv1D(l.In("filter"), x, opts, residual, d)), Logistic(causalConv1D(l.In("gate"), x, opts, residual, d)))
		s := graphs.Linear(l.In("skip"), z, graphs.LinearConfig{Units: skipCh}, opts)
		if skips == nil {
			skips = s
		} else {
			skips = Add(skips, s)
		}
		if i < layers-1 {
			x = Add(x, graphs.Linear(l.In("residual"), z, graphs.LinearConfig{Units: residual}, opts))
		}
	}
	return skips
}

// MobileViT's patch side (timm's MobileVitBlock patch_size=2) and LayerNorm epsilon (nn.LayerNorm's).
const (
	mobileViTPatch = 2
	mobileViTEps   = 1e-5
)

// MobileViTBlock is the bestiary's mobileVitBlock (ic dim heads mlpDim nTxBlocks), timm's
// MobileVitBlock: conv_kxk (3x3 conv + BN + SiLU, ic channels), conv_1x1 (to dim, no bias, no norm);
// the map is unfolded into 2x2 patches and each of the four pixel positions forms one sequence of
// H·W/4 tokens; nTxBlocks pre-norm transformer layers (transformer/i: norm1, attn with qkv and proj,
// norm2, mlp fc1-SiLU-fc2 with mlpDim hidden) and a final LayerNorm (norm); folded back, conv_proj
// (1x1 + BN + SiLU to ic), concatenated after the input and fused by conv_fusion (3x3 + BN + SiLU to
// ic). Height and width must be even.
func MobileViTBlock(ctx *context.Context, x *Node, train bool, opts graphs.Options, dim, heads, mlpDim, blocks int) *Node {
	dims := x.Shape().Dimensions
	b, h, w, ic := dims[0], dims[1], dims[2], dims[3]
	p := mobileViTPatch
	if h%p != 0 || w%p != 0 {
		panic(fmt.Sprintf("graphs.MobileViTBlock in %s: %dx%d is not divisible into %dx%d patches", ctx.Scope(), h, w, p, p))
	}
	convNormAct := func(c *context.Context, x *Node, out, kernel int) *Node {
		x = graphs.Conv(c.In("conv"), x, graphs.ConvConfig{Filters: out, Kernel: kernel, Padding: graphs.PadSymmetric}, opts)
		return graphs.Swish(graphs.BatchNorm(c.In("bn"), x, train, graphs.TorchBN, opts))
	}
	y := convNormAct(ctx.In("conv_kxk"), x, ic, 3)
	y = graphs.Conv(ctx.In("conv_1x1"), y, graphs.ConvConfig{Filters: dim, Kernel: 1}, opts)
	// Unfold: [b, h/p, p, w/p, p, dim] -> [b, p, p, h/p, w/p, dim] -> [b·p·p, tokens, dim].
	nh, nw := h/p, w/p
	y = TransposeAllAxes(Reshape(y, b, nh, p, nw, p, dim), 0, 2, 4, 1, 3, 5)
	y = Reshape(y, b*p*p, nh*nw, dim)
	// The layers count MACs per leading index, here a sequence (a quarter of an example): count the
	// transformer's per example here instead.
	seq := opts
	seq.Stats = nil
	tokens := int64(nh * nw)
	opts.Stats.Add(int64(blocks) * int64(p*p) * (tokens*int64(4*dim*dim+2*dim*mlpDim) + 2*tokens*tokens*int64(dim)))
	for i := range blocks {
		l := ctx.In("transformer").In(strconv.Itoa(i))
		y = Add(y, graphs.MultiHeadAttention(l.In("attn"), graphs.LayerNorm(l.In("norm1"), y, mobileViTEps, seq), heads, nil, seq))
		m := graphs.Linear(l.In("mlp").In("fc1"), graphs.LayerNorm(l.In("norm2"), y, mobileViTEps, seq), graphs.LinearConfig{Units: mlpDim}, seq)
		y = Add(y, graphs.Linear(l.In("mlp").In("fc2"), graphs.Swish(m), graphs.LinearConfig{Units: dim}, seq))
	}
	y = graphs.LayerNorm(ctx.In("norm"), y, mobileViTEps, opts)
	// Fold: the inverse permutation.
	y = TransposeAllAxes(Reshape(y, b, p, p, nh, nw, dim), 0, 3, 1, 4, 2, 5)
	y = Reshape(y, b, h, w, dim)
	y = convNormAct(ctx.In("conv_proj"), y, ic, 1)
	return convNormAct(ctx.In("conv_fusion"), Concatenate([]*Node{x, y}, 3), ic, 3)
}
