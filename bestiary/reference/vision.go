package reference

import (
	"fmt"
	"math"

	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's vision blocks (docs/bestiary.md#vision-blocks) as plain loops: DenseNet's dense block
// and transition, GoogLeNet's inception module, ShuffleNet v1 and V2 units, Swin's block, Darknet-53's
// residual pair and a CSP stage. Every BatchNorm here normalises with the batch's statistics (training
// mode), the mode the op checks differentiate.

// BN is a BatchNorm's affine parameters and epsilon.
type BN struct {
	Gamma, Beta []float64
	Eps         float64
}

// Apply normalises x with its batch statistics.
func (b BN) Apply(x reference.Tensor) reference.Tensor {
	y, _, _ := reference.BatchNormTrain(x, b.Gamma, b.Beta, b.Eps)
	return y
}

// ConvBN is a bias-free convolution (w [k, k, in/groups, out]) followed by a BatchNorm.
type ConvBN struct {
	W  reference.Tensor
	BN BN
}

// Apply convolves x at stride with groups and PyTorch's symmetric padding (k−1)/2, then normalises.
func (p ConvBN) Apply(x reference.Tensor, stride, groups int) reference.Tensor {
	pad := (p.W.Dims[0] - 1) / 2
	y := reference.Conv2D(x, p.W, nil, reference.ConvParams{Stride: stride, Groups: groups, Pads: [2][2]int{{pad, pad}, {pad, pad}}})
	return p.BN.Apply(y)
}

// ConcatChannels joins NHWC tensors of equal batch and size along the channels, in order.
func ConcatChannels(ts ...reference.Tensor) reference.Tensor {
	rows, _ := reference.LastAxis(ts[0].Dims)
	total := 0
	for _, t := range ts {
		r, c := reference.LastAxis(t.Dims)
		if r != rows {
			panic(fmt.Sprintf("reference.ConcatChannels: dims %v and %v", ts[0].Dims, t.Dims))
		}
		total += c
	}
	dims := append(append([]int(nil), ts[0].Dims[:len(ts[0].Dims)-1]...), total)
	y := reference.New(dims...)
	for r := range rows {
		at := r * total
		for _, t := range ts {
			_, c := reference.LastAxis(t.Dims)
			copy(y.Data[at:at+c], t.Data[r*c:(r+1)*c])
			at += c
		}
	}
	return y
}

// SliceChannels keeps channels [lo, hi) of x.
func SliceChannels(x reference.Tensor, lo, hi int) reference.Tensor {
	rows, c := reference.LastAxis(x.Dims)
	dims := append(append([]int(nil), x.Dims[:len(x.Dims)-1]...), hi-lo)
	y := reference.New(dims...)
	for r := range rows {
		copy(y.Data[r*(hi-lo):(r+1)*(hi-lo)], x.Data[r*c+lo:r*c+hi])
	}
	return y
}

// ChannelShuffle reads the channels as a groups × (C/groups) matrix and writes them transposed:
// output channel i·groups + g is input channel g·(C/groups) + i.
func ChannelShuffle(x reference.Tensor, groups int) reference.Tensor {
	rows, c := reference.LastAxis(x.Dims)
	per := c / groups
	y := reference.New(x.Dims...)
	for r := range rows {
		for g := range groups {
			for i := range per {
				y.Data[r*c+i*groups+g] = x.Data[r*c+g*per+i]
			}
		}
	}
	return y
}

// LeakyReLU returns x ↦ x for x ≥ 0, slope·x below.
func LeakyReLU(slope float64) func(float64) float64 {
	return func(x float64) float64 {
		if x >= 0 {
			return x
		}
		return slope * x
	}
}

// DenseLayer is one layer of a DenseNet-BC dense block.
type DenseLayer struct {
	Norm1 BN
	Conv1 reference.Tensor // 1×1, bottleneck width
	Norm2 BN
	Conv2 reference.Tensor // 3×3, growth
}

// DenseBlock feeds every layer the concatenation of x and all earlier layers' outputs; each layer is
// BN-ReLU-1×1 conv-BN-ReLU-3×3 conv (padding 1); the result is x followed by every layer's output.
func DenseBlock(x reference.Tensor, layers []DenseLayer) reference.Tensor {
	features := x
	for _, l := range layers {
		y := reference.Map(l.Norm1.Apply(features), reference.ReLU)
		y = reference.Conv2D(y, l.Conv1, nil, reference.ConvParams{})
		y = reference.Map(l.Norm2.Apply(y), reference.ReLU)
		y = reference.Conv2D(y, l.Conv2, nil, reference.ConvParams{Pads: [2][2]int{{1, 1}, {1, 1}}})
		features = ConcatChannels(features, y)
	}
	return features
}

// Transition is DenseNet's transition: BN-ReLU, a bias-free 1×1 conv w, a 2×2/2 average pool.
func Transition(x reference.Tensor, norm BN, w reference.Tensor) reference.Tensor {
	y := reference.Conv2D(reference.Map(norm.Apply(x), reference.ReLU), w, nil, reference.ConvParams{})
	return reference.AvgPool2D(y, 2, 2)
}

// Inception is torchvision's GoogLeNet module: four branches of conv-BN-ReLU layers joined on the
// channels: B1 (1×1); B2 (1×1, 3×3); B3 (1×1, 3×3); a 3×3/1 max-pool padded by 1 then B4 (1×1).
func Inception(x reference.Tensor, b1 ConvBN, b2 [2]ConvBN, b3 [2]ConvBN, b4 ConvBN) reference.Tensor {
	cbr := func(p ConvBN, x reference.Tensor) reference.Tensor {
		return reference.Map(p.Apply(x, 1, 1), reference.ReLU)
	}
	pooled, _ := reference.MaxPool2D(x, 3, 1, [2][2]int{{1, 1}, {1, 1}})
	return ConcatChannels(cbr(b1, x), cbr(b2[1], cbr(b2[0], x)), cbr(b3[1], cbr(b3[0], x)), cbr(b4, pooled))
}

// ShuffleV2Unit is torchvision's ShuffleNet V2 InvertedResidual. Strided (stride 2): the left half is
// branch1 on x (depthwise 3×3/2-BN, 1×1-BN-ReLU), the right branch2 on x; at stride 1 the left half
// is x's first half of channels and branch2 takes the second half. branch2 is 1×1-BN-ReLU, depthwise
// 3×3-BN at the stride, 1×1-BN-ReLU. The halves are joined and shuffled over two groups.
func ShuffleV2Unit(x reference.Tensor, strided bool, branch1 [2]ConvBN, branch2 [3]ConvBN) reference.Tensor {
	c := x.Dims[3]
	stride := 1
	var left, right reference.Tensor
	if strided {
		stride = 2
		left = branch1[0].Apply(x, 2, c)
		left = reference.Map(branch1[1].Apply(left, 1, 1), reference.ReLU)
		right = x
	} else {
		left, right = SliceChannels(x, 0, c/2), SliceChannels(x, c/2, c)
	}
	right = reference.Map(branch2[0].Apply(right, 1, 1), reference.ReLU)
	right = branch2[1].Apply(right, stride, right.Dims[3])
	right = reference.Map(branch2[2].Apply(right, 1, 1), reference.ReLU)
	return ChannelShuffle(ConcatChannels(left, right), 2)
}

// ShuffleV1Unit is ShuffleNet v1's unit (Zhang et al. 2018, Fig. 2 b/c): grouped 1×1-BN-ReLU, channel
// shuffle over groups, depthwise 3×3-BN (stride 2 when strided), grouped 1×1-BN; then ReLU of x plus
// the branch, or, strided, ReLU of [3×3/2 average pool of x padded by 1, branch] on the channels.
func ShuffleV1Unit(x reference.Tensor, groups int, strided bool, compress, depthwise, expand ConvBN) reference.Tensor {
	stride := 1
	if strided {
		stride = 2
	}
	y := reference.Map(compress.Apply(x, 1, groups), reference.ReLU)
	y = ChannelShuffle(y, groups)
	y = depthwise.Apply(y, stride, y.Dims[3])
	y = expand.Apply(y, 1, groups)
	if !strided {
		return reference.Map(reference.Add(x, y), reference.ReLU)
	}
	return reference.Map(ConcatChannels(reference.AvgPool2DPadded(x, 3, 2, 1), y), reference.ReLU)
}

// DarknetPair is Darknet-53's residual pair: x + c2(c1(x)), c1 a 1×1 and c2 a 3×3 conv-BN-LeakyReLU(0.1).
func DarknetPair(x reference.Tensor, c1, c2 ConvBN) reference.Tensor {
	leaky := LeakyReLU(0.1)
	y := reference.Map(c1.Apply(x, 1, 1), leaky)
	y = reference.Map(c2.Apply(y, 1, 1), leaky)
	return reference.Add(x, y)
}

// CSP is Scaled-YOLOv4's BottleneckCSP with Darknet pairs: y1 = cv3 · pairs(cv1(x)) (cv1 a 1×1
// conv-BN-LeakyReLU, cv3 a bias-free 1×1 conv), y2 = cv2 · x (bias-free 1×1), then cv4 (1×1
// conv-BN-LeakyReLU) of LeakyReLU(bn([y1, y2])).
func CSP(x reference.Tensor, cv1 ConvBN, pairs [][2]ConvBN, cv3, cv2 reference.Tensor, bn BN, cv4 ConvBN) reference.Tensor {
	leaky := LeakyReLU(0.1)
	y1 := reference.Map(cv1.Apply(x, 1, 1), leaky)
	for _, p := range pairs {
		y1 = DarknetPair(y1, p[0], p[1])
	}
	y1 = reference.Conv2D(y1, cv3, nil, reference.ConvParams{})
	y2 := reference.Conv2D(x, cv2, nil, reference.ConvParams{})
	y := reference.Map(bn.Apply(ConcatChannels(y1, y2)), leaky)
	return reference.Map(cv4.Apply(y, 1, 1), leaky)
}

// SwinBlockParams are one Swin block's parameters; Linear weights are [in, out].
type SwinBlockParams struct {
	Norm1G, Norm1B []float64
	QKVW           reference.Tensor // [C, 3C], outputs ordered (q|k|v, head, channel)
	QKVB           []float64
	ProjW          reference.Tensor // [C, C]
	ProjB          []float64
	Table          reference.Tensor // [(2·window−1)², heads]
	Norm2G, Norm2B []float64
	FC1W           reference.Tensor // [C, hidden]
	FC1B           []float64
	FC2W           reference.Tensor // [hidden, C]
	FC2B           []float64
	Eps            float64
	Heads, Window  int
	Shift          int
	GELU           func(float64) float64
}

// SwinBlock is one Swin Transformer block over x [B, H, W, C] (Liu et al. 2021, as torchvision's
// SwinTransformerBlock): x + WMSA(LN1(x)), then x + MLP(LN2(x)). WMSA works on the map padded with
// zero tokens to whole windows at the bottom and right and read cyclically shifted by shift (none on
// an axis that fits in one window): rolled cell (r, q) holds padded cell ((r+shift) mod H', (q+shift)
// mod W'). Each window of the rolled map attends within itself per head, scores q·k/√d plus the table
// row of the two tokens' offset, plus −100 between tokens of different regions when shifted (regions:
// [0, H'−window), [H'−window, H'−shift), [H'−shift, H') on each axis); the result goes back to the cell
// it was read from and the padding is dropped.
func SwinBlock(x reference.Tensor, p SwinBlockParams) reference.Tensor {
	b, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	win, heads := p.Window, p.Heads
	hd := c / heads
	ph, pw := (h+win-1)/win*win, (w+win-1)/win*win
	sh, sw := p.Shift, p.Shift
	if win >= ph {
		sh = 0
	}
	if win >= pw {
		sw = 0
	}
	region := func(r, pad, shift int) int {
		switch {
		case shift == 0 || r < pad-win:
			return 0
		case r < pad-shift:
			return 1
		}
		return 2
	}
	y := reference.LayerNorm(x, p.Norm1G, p.Norm1B, p.Eps)
	attnOut := reference.New(b, h, w, c)
	n := win * win
	for bi := range b {
		for wy := range ph / win {
			for wx := range pw / win {
				// The window's tokens: rolled cells, their source cells and their qkv rows.
				ry, rx, sy, sx := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
				tok := reference.New(n, c)
				for i := range n {
					ry[i], rx[i] = wy*win+i/win, wx*win+i%win
					sy[i], sx[i] = (ry[i]+sh)%ph, (rx[i]+sw)%pw
					if sy[i] < h && sx[i] < w {
						for k := range c {
							tok.Set(y.At(bi, sy[i], sx[i], k), i, k)
						}
					}
				}
				qkv := reference.Dense(tok, p.QKVW, p.QKVB) // [n, 3C]
				merged := reference.New(n, c)
				for hh := range heads {
					for i := range n {
						scores := reference.New(n)
						for j := range n {
							s := 0.0
							for e := range hd {
								s += qkv.At(i, hh*hd+e) * qkv.At(j, c+hh*hd+e)
							}
							s /= math.Sqrt(float64(hd))
							row := (ry[i]%win-ry[j]%win+win-1)*(2*win-1) + (rx[i]%win - rx[j]%win + win - 1)
							s += p.Table.At(row, hh)
							if (sh > 0 || sw > 0) && (region(ry[i], ph, sh) != region(ry[j], ph, sh) || region(rx[i], pw, sw) != region(rx[j], pw, sw)) {
								s -= 100
							}
							scores.Data[j] = s
						}
						attn := reference.Softmax(scores)
						for e := range hd {
							s := 0.0
							for j := range n {
								s += attn.Data[j] * qkv.At(j, 2*c+hh*hd+e)
							}
							merged.Set(s, i, hh*hd+e)
						}
					}
				}
				out := reference.Dense(merged, p.ProjW, p.ProjB)
				for i := range n {
					if sy[i] < h && sx[i] < w {
						for k := range c {
							attnOut.Set(out.At(i, k), bi, sy[i], sx[i], k)
						}
					}
				}
			}
		}
	}
	x = reference.Add(x, attnOut)
	m := reference.Map(reference.Dense(reference.LayerNorm(x, p.Norm2G, p.Norm2B, p.Eps), p.FC1W, p.FC1B), p.GELU)
	return reference.Add(x, reference.Dense(m, p.FC2W, p.FC2B))
}
