package graphs

import (
	"math"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// The mobile family. MobileNetV2, EfficientNet-B0 and MobileNetV4-Conv-M are one builder (buildMobile) over
// a table of block rows, as in timm's _efficientnet_builder: a mobileDef holds the table and the few
// places where the three references really differ (channel rounding, activation, head, initialisation,
// module names). EfficientNet's row is here; the MobileNet rows are in mobilenet.go.

// blockType is the kind of block one table row builds.
type blockType int

const (
	// blockIR is the inverted residual (MBConv): [1x1 expand] -> kxk depthwise -> [SE] -> 1x1 linear project.
	blockIR blockType = iota
	// blockER is the edge residual (fused inverted bottleneck): kxk expand conv -> 1x1 linear project.
	blockER
	// blockUIR is MobileNetV4's universal inverted residual: [kxk start depthwise] -> 1x1 expand ->
	// [kxk middle depthwise] -> 1x1 linear project. Both depthwise convs absent is an FFN block.
	blockUIR
	// blockCN is a plain conv + BN + activation (timm's ConvBnAct), without residual.
	blockCN
)

// blockRow is one row of a family table: Repeats blocks of one type; only the first one has Stride,
// and every block's input is the previous block's output.
type blockRow struct {
	Type    blockType
	Repeats int
	// Kernel is the depthwise kernel of IR blocks and the middle depthwise kernel of UIR blocks (0: none),
	// or the conv kernel of ER and CN blocks.
	Kernel int
	// Start is the UIR start depthwise kernel (0: none).
	Start  int
	Stride int
	// Expand is the expansion ratio of the hidden channels (IR, ER, UIR).
	Expand float64
	// SE is the squeeze-and-excitation width as a fraction of the block's input channels (0: no SE).
	SE float64
	// Channels is the output width before the width multiplier.
	Channels int
}

// mobileLayout says how the reference names its modules (and hence our scopes).
type mobileLayout int

const (
	// layoutTVMobileNetV2: features/0 stem, features/1.. one per block, features/N head, classifier/1;
	// a block is features/i/conv/{0,1,...} with the projection's conv and BN as separate entries.
	layoutTVMobileNetV2 mobileLayout = iota
	// layoutTVEfficientNet: features/0 stem, features/1+s/j blocks (stage s), features/S+1 head,
	// classifier/1; a block is features/s/j/block/{0,1,...}, each entry a Conv2dNormActivation or SE.
	layoutTVEfficientNet
	// layoutTimm: conv_stem, bn1, blocks/s/j, conv_head, norm_head, classifier (timm's MobileNetV3 class).
	layoutTimm
)

// headWidth says how the head conv's width follows the width multiplier.
type headWidth int

const (
	// headScaledAboveOne: MobileNetV2's last_channel, scaled only when the multiplier exceeds 1.
	headScaledAboveOne headWidth = iota
	// headFourTimesLast: EfficientNet's 4x the last stage's (scaled) channels.
	headFourTimesLast
	// headFixed: timm's num_features, never scaled.
	headFixed
)

// mobileDef is one net of the family.
type mobileDef struct {
	Layout mobileLayout
	// Stem is the stem conv's width (3x3, stride 2) before the width multiplier; FixStemBelowOne keeps it
	// unscaled for multipliers below 1 (timm's fix_stem for MobileNetV4).
	Stem            int
	FixStemBelowOne bool
	Stages          [][]blockRow
	// Head is the head conv's (1x1) width, scaled as HeadWidth says. PoolBeforeHead pools first and runs the
	// head conv + BN + activation on the pooled features (MobileNetV4's head).
	Head           int
	HeadWidth      headWidth
	PoolBeforeHead bool
	Act            func(*Node) *Node
	// Hidden is the expanded width of a block with in channels and ratio e.
	Hidden func(in int, e float64) int
	// Dropout before the classifier and the largest stochastic-depth rate (ramped linearly over blocks)
	// are the reference's defaults; Options override them.
	Dropout, DropPath float64
	// ConvInit draws a conv kernel of the given size, width and groups; ClassifierInit the classifier.
	ConvInit       func(kernel, filters, groups int) Init
	ClassifierInit func(units int) Init
}

// torchConvInit is torchvision's kaiming_normal_(mode="fan_out") on a conv: PyTorch's fan_out is
// out·k·k whatever the groups, so depthwise kernels get a smaller spread than InitKaimingNormalFanOut gives.
func torchConvInit(kernel, filters, _ int) Init {
	return InitNormal(math.Sqrt(2 / float64(kernel*kernel*filters)))
}

// timmConvInit is timm's _init_weight_goog: N(0, 2/fan_out) with fan_out = k·k·out/groups.
func timmConvInit(int, int, int) Init { return InitKaimingNormalFanOut }

// uniformOverUnits is EfficientNet's (torchvision and timm) classifier init, U(±1/√out_features).
func uniformOverUnits(units int) Init { return InitUniform(1 / math.Sqrt(float64(units))) }

// divisibleBy8 is every net's channel rounding: the nearest multiple of 8, not 10% below v.
func divisibleBy8(v float64) int { return MakeDivisible(v, 8, 0) }

// numBlocks counts the blocks of the table.
func (d *mobileDef) numBlocks() int {
	n := 0
	for _, stage := range d.Stages {
		for _, row := range stage {
			n += row.Repeats
		}
	}
	return n
}

// mobileBuild is the state of one Build call.
type mobileBuild struct {
	def   *mobileDef
	opts  Options
	train bool
	ctx   *context.Context
}

// convBN is torchvision's Conv2dNormActivation and timm's ConvNormAct: a conv without bias, BatchNorm,
// and the net's activation when act.
func (b *mobileBuild) convBN(convCtx, bnCtx *context.Context, x *Node, filters, kernel, stride, groups int, act bool) *Node {
	x = Conv(convCtx, x, ConvConfig{
		Filters: filters, Kernel: kernel, Stride: stride, Groups: groups, Padding: b.opts.Padding,
		Init: b.def.ConvInit(kernel, filters, groups),
	}, b.opts)
	x = BatchNorm(bnCtx, x, b.train, TorchBN, b.opts)
	if act {
		x = b.def.Act(x)
	}
	return x
}

// residual adds the block's input back, with the block's stochastic depth, when shapes allow.
func (b *mobileBuild) residual(x, y *Node, stride int, dropRate float64) *Node {
	if stride != 1 || x.Shape().Dimensions[3] != y.Shape().Dimensions[3] {
		return y
	}
	return Add(DropPath(b.ctx, y, dropRate, b.train), x)
}

// sequence hands out the numbered entries of a torchvision nn.Sequential.
type sequence struct {
	ctx  *context.Context
	next int
}

func (s *sequence) entry() *context.Context {
	c := s.ctx.In(strconv.Itoa(s.next))
	s.next++
	return c
}

// invertedResidual is torchvision's MobileNetV2 InvertedResidual and EfficientNet MBConv.
func (b *mobileBuild) invertedResidual(ctx *context.Context, x *Node, row blockRow, out, stride int, dropRate float64) *Node {
	in := x.Shape().Dimensions[3]
	hidden := b.def.Hidden(in, row.Expand)
	container := "block"
	if b.def.Layout == layoutTVMobileNetV2 {
		container = "conv"
	}
	seq := &sequence{ctx: ctx.In(container)}
	h := x
	if hidden != in {
		e := seq.entry()
		h = b.convBN(e.In("0"), e.In("1"), h, hidden, 1, 1, 1, true)
	}
	e := seq.entry()
	h = b.convBN(e.In("0"), e.In("1"), h, hidden, row.Kernel, stride, hidden, true)
	if row.SE > 0 {
		h = b.squeezeExcite(seq.entry(), h, max(1, int(float64(in)*row.SE)))
	}
	if b.def.Layout == layoutTVMobileNetV2 {
		// MobileNetV2 lists the projection's Conv2d and BatchNorm2d as two entries.
		conv, bn := seq.entry(), seq.entry()
		h = b.convBN(conv, bn, h, out, 1, 1, 1, false)
	} else {
		e := seq.entry()
		h = b.convBN(e.In("0"), e.In("1"), h, out, 1, 1, 1, false)
	}
	return b.residual(x, h, stride, dropRate)
}

// squeezeExcite is torchvision's SqueezeExcitation: global mean, 1x1 conv fc1 (with bias), the block's
// activation, 1x1 conv fc2, sigmoid gate on the input.
func (b *mobileBuild) squeezeExcite(ctx *context.Context, x *Node, squeeze int) *Node {
	ch := x.Shape().Dimensions[3]
	s := spatialMean(x)
	s = Conv(ctx.In("fc1"), s, ConvConfig{Filters: squeeze, Kernel: 1, Bias: true, Init: b.def.ConvInit(1, squeeze, 1)}, b.opts)
	s = b.def.Act(s)
	s = Conv(ctx.In("fc2"), s, ConvConfig{Filters: ch, Kernel: 1, Bias: true, Init: b.def.ConvInit(1, ch, 1)}, b.opts)
	return Mul(x, Logistic(s))
}

// spatialMean averages NHWC x over height and width to [batch, 1, 1, channels]; under bfloat16 compute it
// sums in float32, as the norms do, rather than in a bfloat16 accumulator.
func spatialMean(x *Node) *Node {
	if !HalfPrecision(x) {
		return ReduceAndKeep(x, ReduceMean, 1, 2)
	}
	return ConvertDType(ReduceAndKeep(ConvertDType(x, dtypes.Float32), ReduceMean, 1, 2), x.DType())
}

// edgeResidual is timm's EdgeResidual (fused IB): conv_exp/bn1, conv_pwl/bn2.
func (b *mobileBuild) edgeResidual(ctx *context.Context, x *Node, row blockRow, out, stride int, dropRate float64) *Node {
	hidden := b.def.Hidden(x.Shape().Dimensions[3], row.Expand)
	h := b.convBN(ctx.In("conv_exp"), ctx.In("bn1"), x, hidden, row.Kernel, stride, 1, true)
	h = b.convBN(ctx.In("conv_pwl"), ctx.In("bn2"), h, out, 1, 1, 1, false)
	return b.residual(x, h, stride, dropRate)
}

// universalInvertedResidual is timm's UniversalInvertedResidual without layer scale (the conv variants
// have none): dw_start, pw_exp, dw_mid, pw_proj, each a ConvNormAct (conv, bn). The stride sits on the
// middle depthwise conv, or on the start one when there is no middle one.
func (b *mobileBuild) universalInvertedResidual(ctx *context.Context, x *Node, row blockRow, out, stride int, dropRate float64) *Node {
	in := x.Shape().Dimensions[3]
	h := x
	if row.Start > 0 {
		startStride := stride
		if row.Kernel > 0 {
			startStride = 1
		}
		c := ctx.In("dw_start")
		h = b.convBN(c.In("conv"), c.In("bn"), h, in, row.Start, startStride, in, false)
	}
	hidden := b.def.Hidden(in, row.Expand)
	c := ctx.In("pw_exp")
	h = b.convBN(c.In("conv"), c.In("bn"), h, hidden, 1, 1, 1, true)
	if row.Kernel > 0 {
		c := ctx.In("dw_mid")
		h = b.convBN(c.In("conv"), c.In("bn"), h, hidden, row.Kernel, stride, hidden, true)
	}
	c = ctx.In("pw_proj")
	h = b.convBN(c.In("conv"), c.In("bn"), h, out, 1, 1, 1, false)
	return b.residual(x, h, stride, dropRate)
}

// buildMobile builds a net of the family.
func buildMobile(def *mobileDef, ctx *context.Context, images *Node, train bool, opts Options) *Node {
	width := opts.Width
	if width == 0 {
		width = 1
	}
	if opts.Padding == PadValid {
		panic("graphs: the mobile nets need padded convolutions, Padding \"valid\" would break the residual shapes")
	}
	b := &mobileBuild{def: def, opts: opts, train: train, ctx: ctx}
	x := ToCompute(images, opts)

	stem := divisibleBy8(float64(def.Stem) * width)
	if def.FixStemBelowOne && width < 1 {
		stem = def.Stem
	}
	var stemConv, stemBN *context.Context
	switch def.Layout {
	case layoutTimm:
		stemConv, stemBN = ctx.In("conv_stem"), ctx.In("bn1")
	default:
		stemConv, stemBN = ctx.In("features").In("0").In("0"), ctx.In("features").In("0").In("1")
	}
	x = b.convBN(stemConv, stemBN, x, stem, 3, 2, 1, true)

	total := def.numBlocks()
	dropPath := opts.DropPath(def.DropPath)
	global := 0
	for s, stage := range def.Stages {
		j := 0
		for _, row := range stage {
			out := divisibleBy8(float64(row.Channels) * width)
			for r := 0; r < row.Repeats; r++ {
				stride := 1
				if r == 0 {
					stride = row.Stride
				}
				var bctx *context.Context
				switch def.Layout {
				case layoutTVMobileNetV2:
					bctx = ctx.In("features").In(strconv.Itoa(1 + global))
				case layoutTVEfficientNet:
					bctx = ctx.In("features").In(strconv.Itoa(1 + s)).In(strconv.Itoa(j))
				default:
					bctx = ctx.In("blocks").In(strconv.Itoa(s)).In(strconv.Itoa(j))
				}
				rate := dropPath * float64(global) / float64(total)
				switch row.Type {
				case blockIR:
					x = b.invertedResidual(bctx, x, row, out, stride, rate)
				case blockER:
					x = b.edgeResidual(bctx, x, row, out, stride, rate)
				case blockUIR:
					x = b.universalInvertedResidual(bctx, x, row, out, stride, rate)
				case blockCN:
					x = b.convBN(bctx.In("conv"), bctx.In("bn1"), x, out, row.Kernel, stride, 1, true)
				}
				global++
				j++
			}
		}
	}

	last := x.Shape().Dimensions[3]
	head := def.Head
	switch def.HeadWidth {
	case headScaledAboveOne:
		head = divisibleBy8(float64(def.Head) * max(1, width))
	case headFourTimesLast:
		head = 4 * last
	}
	if def.PoolBeforeHead {
		x = spatialMean(x)
		x = b.convBN(ctx.In("conv_head"), ctx.In("norm_head"), x, head, 1, 1, 1, true)
		x = Reshape(x, x.Shape().Dimensions[0], head)
	} else {
		features := ctx.In("features").In(strconv.Itoa(1 + len(def.Stages)))
		if def.Layout == layoutTVMobileNetV2 {
			features = ctx.In("features").In(strconv.Itoa(1 + total))
		}
		x = b.convBN(features.In("0"), features.In("1"), x, head, 1, 1, 1, true)
		x = Reshape(spatialMean(x), x.Shape().Dimensions[0], head)
	}
	x = Dropout(ctx, x, opts.Dropout(def.Dropout), train)
	classifier := ctx.In("classifier")
	if def.Layout != layoutTimm {
		classifier = classifier.In("1")
	}
	units := classes(opts, 1000)
	x = Linear(classifier, x, LinearConfig{Units: units, Init: def.ClassifierInit(units), BiasInit: InitConst(0)}, opts)
	return FromCompute(x, opts)
}

// noWeightDecay is the family's no-decay group: biases and BatchNorm parameters (timm's and torchvision's
// "norm" group; every rank-1 parameter of these nets).
func (d *mobileDef) noWeightDecay(scope, name string) bool {
	if name != "weight" {
		return true // bias; running statistics are not trained anyway
	}
	parts := strings.Split(strings.Trim(scope, "/"), "/")
	last := parts[len(parts)-1]
	parent := ""
	if len(parts) > 1 {
		parent = parts[len(parts)-2]
	}
	switch d.Layout {
	case layoutTimm:
		return strings.HasPrefix(last, "bn") || last == "norm_head"
	case layoutTVMobileNetV2:
		if parent == "conv" {
			// features/i/conv/k: the projection's Conv2d, then its BatchNorm2d as the last entry (2 without
			// expansion, 3 with it).
			block, _ := strconv.Atoi(parts[len(parts)-3])
			return last == strconv.Itoa(d.mobileNetV2ProjectBN(block))
		}
	}
	// A Conv2dNormActivation's BatchNorm is its entry 1; classifier/1 is the Linear.
	return last == "1" && parent != "classifier"
}

// mobileNetV2ProjectBN is the index of the projection's BatchNorm in MobileNetV2's features/block/conv.
func (d *mobileDef) mobileNetV2ProjectBN(block int) int {
	global := 1
	for _, stage := range d.Stages {
		for _, row := range stage {
			for r := 0; r < row.Repeats; r++ {
				if global == block && row.Expand == 1 {
					return 2
				}
				global++
			}
		}
	}
	return 3
}

// register adds the net to the registry.
func (d *mobileDef) register(name, description, reference string) {
	Register(Spec{
		Name: name, Description: description, Reference: reference,
		InputShape: [3]int{224, 224, 3}, NumClasses: 1000,
		Eval: ImageNetEval,
		Build: func(ctx *context.Context, images *Node, train bool, opts Options) *Node {
			return buildMobile(d, ctx, images, train, opts)
		},
		NoWeightDecay: d.noWeightDecay,
	})
}

// efficientNetB0 is torchvision 0.14's efficientnet_b0: MBConv rows (expand, kernel, stride, channels,
// repeats) of Table 1 of the paper, SE on a quarter of each block's input channels, SiLU, BN eps 1e-5
// and momentum 0.1 (torchvision gives B0 PyTorch's default BatchNorm2d; only B5-B7 use 1e-3/0.01),
// stochastic depth ramped to 0.2, dropout 0.2.
var efficientNetB0 = &mobileDef{
	Layout: layoutTVEfficientNet,
	Stem:   32,
	Stages: [][]blockRow{
		{{Type: blockIR, Expand: 1, Kernel: 3, Stride: 1, Channels: 16, Repeats: 1, SE: 0.25}},
		{{Type: blockIR, Expand: 6, Kernel: 3, Stride: 2, Channels: 24, Repeats: 2, SE: 0.25}},
		{{Type: blockIR, Expand: 6, Kernel: 5, Stride: 2, Channels: 40, Repeats: 2, SE: 0.25}},
		{{Type: blockIR, Expand: 6, Kernel: 3, Stride: 2, Channels: 80, Repeats: 3, SE: 0.25}},
		{{Type: blockIR, Expand: 6, Kernel: 5, Stride: 1, Channels: 112, Repeats: 3, SE: 0.25}},
		{{Type: blockIR, Expand: 6, Kernel: 5, Stride: 2, Channels: 192, Repeats: 4, SE: 0.25}},
		{{Type: blockIR, Expand: 6, Kernel: 3, Stride: 1, Channels: 320, Repeats: 1, SE: 0.25}},
	},
	HeadWidth:      headFourTimesLast,
	Act:            Swish,
	Hidden:         func(in int, e float64) int { return divisibleBy8(float64(in) * e) },
	Dropout:        0.2,
	DropPath:       0.2,
	ConvInit:       torchConvInit,
	ClassifierInit: uniformOverUnits,
}

func init() {
	efficientNetB0.register("efficientnet_b0",
		"EfficientNet-B0 (torchvision): MBConv+SE, SiLU, stochastic depth 0.2, dropout 0.2; 5.3M params. "+
			"Padding is torchvision's symmetric one by default; padding \"same\" gives the TensorFlow original's "+
			"SAME phase (a 3x3 stride-2 conv on an even input pads [0, 1], not [1, 1])",
		"torchvision 0.14 efficientnet_b0")
}
