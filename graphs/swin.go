package graphs

import (
	"math"
	"strconv"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Swin Transformer as torchvision 0.14 builds swin_t (swin_transformer.py): a 4x4/4 patch conv with a
// LayerNorm, four stages of Swin blocks (windowed multi-head self-attention with a learned relative
// position bias, every second block on windows shifted by half a window with the attention mask that
// keeps shifted-in regions apart; pre-norm MLP 4x with GELU; stochastic depth ramped to 0.2) joined by
// patch merging (2x2 neighbours concatenated, LayerNorm, Linear to twice the width), a final LayerNorm,
// global pooling and a linear head. Tokens stay in NHWC. Scopes mirror torchvision's module paths:
//
//	features/0/0, features/0/2          patch conv, its LayerNorm
//	features/{1,3,5,7}/i/{norm1, attn/qkv, attn/proj, attn (relative_position_bias_table), norm2, mlp/0, mlp/3}
//	features/{2,4,6}/{norm, reduction}  patch merging
//	norm, head
//
// torchvision's state_dict also holds each attention's relative_position_index, a constant int64 buffer
// computed from the window size (SwinRelativePositionIndex); it has no variable here, and the spec's
// TorchBuffers gives it to weight import/export.

// swinConfig is one member of the family.
type swinConfig struct {
	patch, embed, window int
	depths, heads        [4]int
	mlpRatio             int
	dropPath             float64
}

var swinT = swinConfig{patch: 4, embed: 96, window: 7, depths: [4]int{2, 2, 6, 2}, heads: [4]int{3, 6, 12, 24},
	mlpRatio: 4, dropPath: 0.2}

// swinEps is torchvision Swin's LayerNorm epsilon (partial(nn.LayerNorm, eps=1e-5)).
const swinEps = 1e-5

func init() {
	Register(Spec{
		Name: "swin_t",
		Description: "Swin-T (torchvision): 4x4 patches, dim 96, stages of 2, 2, 6, 2 blocks with 3, 6, 12, 24 heads, " +
			"7x7 windows (shifted every second block, relative position bias), patch merging, drop path 0.2; 28.3M params",
		InputShape:    [3]int{224, 224, 3},
		Eval:          ImageNetEval,
		NumClasses:    1000,
		Reference:     "torchvision 0.14 swin_t",
		NoWeightDecay: swinNoWeightDecay,
		TorchBuffers:  swinT.torchBuffers,
		Build: func(ctx *context.Context, x *Node, train bool, opts Options) *Node {
			return buildSwin(ctx, x, train, opts, swinT.widened(opts.Width))
		},
	})
}

// torchBuffers is the relative_position_index next to every relative_position_bias_table.
func (c swinConfig) torchBuffers(keys []string) map[string]TorchBuffer {
	const table = "relative_position_bias_table"
	out := map[string]TorchBuffer{}
	var values []int64
	for _, key := range keys {
		if !strings.HasSuffix(key, "."+table) {
			continue
		}
		if values == nil {
			for _, v := range SwinRelativePositionIndex(c.window) {
				values = append(values, int64(v))
			}
		}
		out[strings.TrimSuffix(key, table)+"relative_position_index"] = TorchBuffer{Shape: []int{len(values)}, Values: values}
	}
	return out
}

// swinNoWeightDecay excludes biases, every LayerNorm's weight (scopes norm, norm1, norm2, features/0/2)
// and the relative position bias tables, as torchvision's Swin recipe does (norm, bias and
// transformer-embedding weight decay 0).
func swinNoWeightDecay(scope, name string) bool {
	if name != "weight" {
		return true
	}
	last := scope[strings.LastIndex(scope, "/")+1:]
	return strings.HasPrefix(last, "norm") || strings.HasSuffix(scope, "/features/0/2")
}

// widened applies a width multiplier: the first stage's head count becomes max(1, round(3·width))
// (later stages double it, as the reference does) and the embedding the multiple of it nearest to
// 96·width, so every stage's width divides by its heads. Scaling the heads with the width, as ViT's
// widened does, keeps reduced Swins from paying full-width attention maps (3 to 24 heads of 49×49 per
// window) for their narrow tokens.
func (c swinConfig) widened(width float64) swinConfig {
	if width == 0 || width == 1 {
		return c
	}
	heads0 := max(1, int(math.Round(float64(c.heads[0])*width)))
	c.embed = heads0 * max(1, int(math.Round(float64(c.embed)*width/float64(heads0))))
	for i := range c.heads {
		c.heads[i] = heads0 << i
	}
	return c
}

func buildSwin(ctx *context.Context, x *Node, train bool, opts Options, c swinConfig) *Node {
	x = ToCompute(x, opts)
	dim := c.embed
	trunc, zeros := InitTruncNormal(0.02), InitConst(0)
	f := ctx.In("features")
	x = Conv(f.In("0").In("0"), x, ConvConfig{Filters: dim, Kernel: c.patch, Stride: c.patch, Padding: PadValid, Bias: true}, opts)
	x = LayerNorm(f.In("0").In("2"), x, swinEps, opts)
	total := 0
	for _, d := range c.depths {
		total += d
	}
	maxRate := opts.DropPath(c.dropPath)
	index := 0
	for stage, depth := range c.depths {
		rates := make([]float64, depth)
		for i := range rates {
			rates[i] = maxRate * float64(index) / float64(max(total-1, 1))
			index++
		}
		x = SwinStage(f.In(strconv.Itoa(2*stage+1)), x, train, opts, c.heads[stage], c.window, c.mlpRatio, rates)
		if stage < len(c.depths)-1 {
			x = PatchMerging(f.In(strconv.Itoa(2*stage+2)), x, opts)
		}
	}
	x = LayerNorm(ctx.In("norm"), x, swinEps, opts)
	x = GlobalAvgPool(x)
	x = Dropout(ctx, x, opts.Dropout(0), train)
	x = Linear(ctx.In("head"), x, LinearConfig{Units: classes(opts, 1000), Init: trunc, BiasInit: zeros}, opts)
	return FromCompute(x, opts)
}

// SwinStage is the bestiary's swinStage (dim heads mlpDim windowSize nBlocks): len(dropPaths) Swin
// blocks (scopes ctx/0..n-1) at the input's width, on plain windows for even blocks and windows shifted by
// ⌊window/2⌋ for odd ones, block i with stochastic-depth rate dropPaths[i].
func SwinStage(ctx *context.Context, x *Node, train bool, opts Options, heads, window, mlpRatio int, dropPaths []float64) *Node {
	for i, rate := range dropPaths {
		shift := 0
		if i%2 == 1 {
			shift = window / 2
		}
		x = SwinBlock(ctx.In(strconv.Itoa(i)), x, train, opts, heads, window, shift, mlpRatio, rate)
	}
	return x
}

// SwinBlock is one block of the bestiary's swinStage (dim heads mlpDim windowSize nBlocks) over NHWC
// tokens: x + DropPath(W-MSA(norm1(x))) (SW-MSA when shift > 0), then x + DropPath(MLP(norm2(x))) with
// the MLP dim → mlpRatio·dim → dim and exact GELU (or opts.GELU).
func SwinBlock(ctx *context.Context, x *Node, train bool, opts Options, heads, window, shift, mlpRatio int, dropPath float64) *Node {
	dim := x.Shape().Dimensions[3]
	trunc, zeros := InitTruncNormal(0.02), InitConst(0)
	y := LayerNorm(ctx.In("norm1"), x, swinEps, opts)
	y = ShiftedWindowAttention(ctx.In("attn"), y, opts, heads, window, shift)
	x = Add(x, DropPath(ctx, y, dropPath, train))
	y = LayerNorm(ctx.In("norm2"), x, swinEps, opts)
	mlp := ctx.In("mlp")
	y = Linear(mlp.In("0"), y, LinearConfig{Units: mlpRatio * dim, Init: trunc, BiasInit: zeros}, opts)
	y = GELU(y, opts.GELU)
	y = Linear(mlp.In("3"), y, LinearConfig{Units: dim, Init: trunc, BiasInit: zeros}, opts)
	return Add(x, DropPath(ctx, y, dropPath, train))
}

// ShiftedWindowAttention is torchvision's shifted_window_attention over x [b, h, w, c]: the map is
// zero-padded at the bottom and right to whole windows, rolled by −shift on both axes (no shift on an
// axis that fits in one window), cut into window×window windows, each attended over with heads heads
// (qkv and proj Linears, scores plus the relative position bias, and for shifted windows −100 between
// tokens from different regions of the rolled map), then put back, rolled by +shift and cropped.
func ShiftedWindowAttention(ctx *context.Context, x *Node, opts Options, heads, window, shift int) *Node {
	dims := x.Shape().Dimensions
	b, h, w, c := dims[0], dims[1], dims[2], dims[3]
	padH, padW := h+(window-h%window)%window, w+(window-w%window)%window
	if padH != h || padW != w {
		x = zeroPadEnd(zeroPadEnd(x, 1, padH-h), 2, padW-w)
	}
	shiftH, shiftW := shift, shift
	if window >= padH {
		shiftH = 0
	}
	if window >= padW {
		shiftW = 0
	}
	x = roll(roll(x, 1, -shiftH), 2, -shiftW)

	nh, nw := padH/window, padW/window
	windows, n, hd := nh*nw, window*window, c/heads
	// [b, nh, window, nw, window, c] -> [b, windows·n, c] (the batch first, as Linear counts its cost)
	t := Reshape(TransposeAllAxes(Reshape(x, b, nh, window, nw, window, c), 0, 1, 3, 2, 4, 5), b, windows*n, c)
	trunc, zeros := InitTruncNormal(0.02), InitConst(0)
	qkv := Linear(ctx.In("qkv"), t, LinearConfig{Units: 3 * c, Init: trunc, BiasInit: zeros}, opts)
	qkv = TransposeAllAxes(Reshape(qkv, b*windows, n, 3, heads, hd), 2, 0, 3, 1, 4) // [3, bw, heads, n, hd]
	q, k, v := splitQKV(qkv)
	q = MulScalar(q, 1/math.Sqrt(float64(hd)))
	opts.Stats.Add(2 * int64(windows) * int64(n) * int64(n) * int64(c)) // q·kᵀ and attention·v, per example

	scores := DotGeneral(q, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [bw, heads, n, n]
	scores = Add(scores, InsertAxes(relativePositionBias(ctx, x, opts, heads, window), 0))
	if shiftH > 0 || shiftW > 0 {
		mask := Const(x.Graph(), swinShiftMask(padH, padW, window, shiftH, shiftW)) // [windows, n, n]
		mask = ConvertDType(mask, scores.DType())
		scores = Reshape(Add(Reshape(scores, b, windows, heads, n, n), Reshape(mask, 1, windows, 1, n, n)), b*windows, heads, n, n)
	}
	attn := Softmax(scores, -1)
	out := DotGeneral(attn, []int{3}, []int{0, 1}, v, []int{2}, []int{0, 1}) // [bw, heads, n, hd]
	out = Reshape(TransposeAllAxes(out, 0, 2, 1, 3), b, windows*n, c)        // [b, windows·n, c]
	out = Linear(ctx.In("proj"), out, LinearConfig{Units: c, Init: trunc, BiasInit: zeros}, opts)
	out = Reshape(TransposeAllAxes(Reshape(out, b, nh, nw, window, window, c), 0, 1, 3, 2, 4, 5), b, padH, padW, c)
	out = roll(roll(out, 1, shiftH), 2, shiftW)
	if padH != h || padW != w {
		out = Slice(out, AxisRange(), AxisRange(0, h), AxisRange(0, w))
	}
	return out
}

// relativePositionBias gathers the learned table [(2·window−1)², heads] (trunc-normal 0.02) into the
// per-head bias [heads, n, n] of the n = window² tokens of a window: entry (i, j) reads the table row of
// the offset between token i and token j, as torchvision's relative_position_index.
func relativePositionBias(ctx *context.Context, like *Node, opts Options, heads, window int) *Node {
	rows := (2*window - 1) * (2*window - 1)
	table := AsDType(Param(ctx, like.Graph(), opts, "relative_position_bias_table", InitTruncNormal(0.02), 0, 0, rows, heads), like)
	n := window * window
	index := SwinRelativePositionIndex(window)
	rowsOf := make([]int32, len(index))
	for i, r := range index {
		rowsOf[i] = int32(r)
	}
	bias := Gather(table, Const(like.Graph(), tensors.FromFlatDataAndDimensions(rowsOf, n*n, 1))) // [n·n, heads]
	return TransposeAllAxes(Reshape(bias, n, n, heads), 2, 0, 1)
}

// SwinRelativePositionIndex is torchvision's relative_position_index of a window: for tokens i = (yi, xi)
// and j = (yj, xj) in row-major order, entry i·n+j is (yi−yj+window−1)·(2·window−1) + (xi−xj+window−1).
func SwinRelativePositionIndex(window int) []int {
	n := window * window
	index := make([]int, n*n)
	for i := range n {
		for j := range n {
			dy, dx := i/window-j/window+window-1, i%window-j%window+window-1
			index[i*n+j] = dy*(2*window-1) + dx
		}
	}
	return index
}

// swinShiftMask is torchvision's attention mask of shifted windows over a padH×padW map rolled by
// (shiftH, shiftW): the map is cut into up to 3×3 regions ([0, pad−window), [pad−window, pad−shift),
// [pad−shift, pad) on each axis); within each window, tokens of different regions get −100, others 0.
// Result [windows, n, n] as float32.
func swinShiftMask(padH, padW, window, shiftH, shiftW int) *tensors.Tensor {
	region := func(i, pad, shift int) int {
		switch {
		case i < pad-window:
			return 0
		case i < pad-shift:
			return 1
		}
		return 2
	}
	nh, nw, n := padH/window, padW/window, window*window
	mask := make([]float32, nh*nw*n*n)
	for wy := range nh {
		for wx := range nw {
			ids := make([]int, n)
			for t := range n {
				y, x := wy*window+t/window, wx*window+t%window
				ids[t] = 3*region(y, padH, shiftH) + region(x, padW, shiftW)
			}
			base := (wy*nw + wx) * n * n
			for i := range n {
				for j := range n {
					if ids[i] != ids[j] {
						mask[base+i*n+j] = -100
					}
				}
			}
		}
	}
	return tensors.FromFlatDataAndDimensions(mask, nh*nw, n, n)
}

// zeroPadEnd appends n zeros along axis (F.pad at the end); a concatenation, as GoMLX v0.26's Pad has no
// gradient.
func zeroPadEnd(x *Node, axis, n int) *Node {
	return ZeroPad(x, axis, 0, n)
}

// roll is torch.roll(x, shift, axis): element i moves to (i+shift) mod size.
func roll(x *Node, axis, shift int) *Node {
	size := x.Shape().Dimensions[axis]
	shift = ((shift % size) + size) % size
	if shift == 0 {
		return x
	}
	return Concatenate([]*Node{SliceAxis(x, axis, AxisRange(size-shift, size)), SliceAxis(x, axis, AxisRange(0, size-shift))}, axis)
}

// PatchMerging is torchvision's: the map padded to even sizes, each 2x2 neighbourhood's four tokens
// concatenated on the channels in the order (0,0), (1,0), (0,1), (1,1) (row, column), LayerNorm (scope
// norm) and a bias-free Linear to 2·c (scope reduction): [b, h, w, c] -> [b, ⌈h/2⌉, ⌈w/2⌉, 2c].
func PatchMerging(ctx *context.Context, x *Node, opts Options) *Node {
	dims := x.Shape().Dimensions
	b, h, w, c := dims[0], dims[1], dims[2], dims[3]
	if h%2 != 0 || w%2 != 0 {
		x = zeroPadEnd(zeroPadEnd(x, 1, h%2), 2, w%2)
		h, w = h+h%2, w+w%2
	}
	x = Reshape(x, b, h/2, 2, w/2, 2, c)
	part := func(row, col int) *Node {
		return Reshape(Slice(x, AxisRange(), AxisRange(), AxisElem(row), AxisRange(), AxisElem(col)), b, h/2, w/2, c)
	}
	x = Concatenate([]*Node{part(0, 0), part(1, 0), part(0, 1), part(1, 1)}, 3)
	x = LayerNorm(ctx.In("norm"), x, swinEps, opts)
	return Linear(ctx.In("reduction"), x, LinearConfig{Units: 2 * c, NoBias: true, Init: InitTruncNormal(0.02)}, opts)
}
