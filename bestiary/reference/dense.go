package reference

import (
	"math"

	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's dense-prediction and sequence blocks, as plain loops over NHWC images and
// [batch, time, channels] sequences. A BatchNorm is in training mode (batch statistics) unless its
// ConvBNStats carries running statistics.

// PositionalEncoding is NeRF's γ: for each row of x [..., d], [x, sin(π·x), cos(π·x), sin(2π·x),
// cos(2π·x), ..., sin(2^(L−1)π·x), cos(2^(L−1)π·x)], each block d wide.
func PositionalEncoding(x reference.Tensor, frequencies int) reference.Tensor {
	rows, d := reference.LastAxis(x.Dims)
	width := d * (1 + 2*frequencies)
	dims := append(append([]int(nil), x.Dims[:len(x.Dims)-1]...), width)
	y := reference.New(dims...)
	for r := range rows {
		for i := range d {
			v := x.Data[r*d+i]
			y.Data[r*width+i] = v
			freq := math.Pi
			for k := range frequencies {
				y.Data[r*width+d*(1+2*k)+i] = math.Sin(freq * v)
				y.Data[r*width+d*(2+2*k)+i] = math.Cos(freq * v)
				freq *= 2
			}
		}
	}
	return y
}

// ConvBNStats is a bias-free convolution kernel [k, k, in, out] and its BatchNorm's scale and shift, and
// the running mean and variance when the BatchNorm is in evaluation mode (nil: training mode).
type ConvBNStats struct {
	W           reference.Tensor
	Gamma, Beta []float64
	Mean, Var   []float64
}

// convBNAct is a stride-1 convolution padded to keep the size at the dilation, then BatchNorm, then act.
func convBNAct(x reference.Tensor, p ConvBNStats, dilation int, eps float64, act func(float64) float64) reference.Tensor {
	pad := dilation * (p.W.Dims[0] - 1) / 2
	y := reference.Conv2D(x, p.W, nil, reference.ConvParams{Dilation: dilation, Pads: [2][2]int{{pad, pad}, {pad, pad}}})
	if p.Mean != nil {
		y = reference.BatchNormEval(y, p.Gamma, p.Beta, p.Mean, p.Var, eps)
	} else {
		y, _, _ = reference.BatchNormTrain(y, p.Gamma, p.Beta, eps)
	}
	return reference.Map(y, act)
}

// UNetDown is milesial's Down: 2x2/2 max-pool, then (3x3 conv, BN, ReLU) twice.
func UNetDown(x reference.Tensor, conv1, conv2 ConvBNStats, eps float64) reference.Tensor {
	y, _ := reference.MaxPool2D(x, 2, 2, [2][2]int{})
	y = convBNAct(y, conv1, 1, eps, reference.ReLU)
	return convBNAct(y, conv2, 1, eps, reference.ReLU)
}

// UpsampleBilinear2x is F.interpolate(scale_factor=2, mode="bilinear", align_corners=True) of x
// [N, H, W, C]: output cell (i, j) reads the input at (i·(H−1)/(2H−1), j·(W−1)/(2W−1)), bilinearly.
func UpsampleBilinear2x(x reference.Tensor) reference.Tensor {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	oh, ow := 2*h, 2*w
	src := func(o, in, out int) (int, int, float64) {
		if in == 1 {
			return 0, 0, 0
		}
		s := float64(o) * float64(in-1) / float64(out-1)
		lo := int(math.Floor(s))
		hi := min(lo+1, in-1)
		return lo, hi, s - float64(lo)
	}
	y := reference.New(n, oh, ow, c)
	for b := range n {
		for i := range oh {
			i0, i1, fi := src(i, h, oh)
			for j := range ow {
				j0, j1, fj := src(j, w, ow)
				for k := range c {
					v := (1-fi)*(1-fj)*x.At(b, i0, j0, k) + (1-fi)*fj*x.At(b, i0, j1, k) +
						fi*(1-fj)*x.At(b, i1, j0, k) + fi*fj*x.At(b, i1, j1, k)
					y.Set(v, b, i, j, k)
				}
			}
		}
	}
	return y
}

// UNetUp is milesial's Up (bilinear): x upsampled ×2, concatenated after skip, then (3x3 conv, BN,
// ReLU) twice.
func UNetUp(x, skip reference.Tensor, conv1, conv2 ConvBNStats, eps float64) reference.Tensor {
	y := ConcatChannels(skip, UpsampleBilinear2x(x))
	y = convBNAct(y, conv1, 1, eps, reference.ReLU)
	return convBNAct(y, conv2, 1, eps, reference.ReLU)
}

// ASPP is DeepLab v3's atrous spatial pyramid pooling: branches[0] a 1x1 conv, branches[1..] 3x3
// convs at rates[i−1], pool a 1x1 conv of the per-image channel means, each with BN and ReLU; the
// pooled branch is the same at every cell. The concatenation goes through project (1x1, BN, ReLU).
func ASPP(x reference.Tensor, branches []ConvBNStats, rates []int, pool, project ConvBNStats, eps float64) reference.Tensor {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	outs := []reference.Tensor{convBNAct(x, branches[0], 1, eps, reference.ReLU)}
	for i, r := range rates {
		outs = append(outs, convBNAct(x, branches[i+1], r, eps, reference.ReLU))
	}
	mean := reference.New(n, 1, 1, c)
	for b := range n {
		for i := range h {
			for j := range w {
				for k := range c {
					mean.Data[b*c+k] += x.At(b, i, j, k) / float64(h*w)
				}
			}
		}
	}
	pooled := convBNAct(mean, pool, 1, eps, reference.ReLU)
	oc := pooled.Dims[3]
	spread := reference.New(n, h, w, oc)
	for b := range n {
		for i := range h {
			for j := range w {
				for k := range oc {
					spread.Set(pooled.Data[b*oc+k], b, i, j, k)
				}
			}
		}
	}
	outs = append(outs, spread)
	return convBNAct(ConcatChannels(outs...), project, 1, eps, reference.ReLU)
}

// UpsampleNearest is F.interpolate(size=(oh, ow), mode="nearest"): output (i, j) copies input
// (⌊i·H/oh⌋, ⌊j·W/ow⌋).
func UpsampleNearest(x reference.Tensor, oh, ow int) reference.Tensor {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	y := reference.New(n, oh, ow, c)
	for b := range n {
		for i := range oh {
			for j := range ow {
				for k := range c {
					y.Set(x.At(b, i*h/oh, j*w/ow, k), b, i, j, k)
				}
			}
		}
	}
	return y
}

// Conv is a convolution kernel with its bias.
type Conv struct {
	W reference.Tensor
	B []float64
}

// FPN is the feature pyramid of levels (finest first): merged_top = lateral_top(x_top); going down,
// merged_i = lateral_i(x_i) + nearest-upsample(merged_{i+1}); each output is smooth_i(merged_i), a 3x3
// conv padded by 1.
func FPN(levels []reference.Tensor, lateral, smooth []Conv) []reference.Tensor {
	n := len(levels)
	out := make([]reference.Tensor, n)
	var merged reference.Tensor
	for i := n - 1; i >= 0; i-- {
		m := reference.Conv2D(levels[i], lateral[i].W, lateral[i].B, reference.ConvParams{})
		if i < n-1 {
			m = reference.Add(m, UpsampleNearest(merged, m.Dims[1], m.Dims[2]))
		}
		merged = m
		out[i] = reference.Conv2D(m, smooth[i].W, smooth[i].B, reference.ConvParams{Pads: [2][2]int{{1, 1}, {1, 1}}})
	}
	return out
}

// Linear is a dense layer's weight [in, out] and bias.
type Linear struct {
	W reference.Tensor
	B []float64
}

// NeRFMLP is NeRF's MLP over rows [γ(pos) (posDim) | γ(dir)]: h = pos; for l = 0..7, h = ReLU(pts_l·h),
// and after l = 4, h = [pos, h]; σ = alpha·h (raw); f = feature·h; h = ReLU(views·[f, dir]);
// rgb = sigmoid(rgb·h). Output rows [r, g, b, σ].
func NeRFMLP(x reference.Tensor, posDim int, pts []Linear, alpha, feature, views, rgb Linear) reference.Tensor {
	rows, width := reference.LastAxis(x.Dims)
	dims := append(append([]int(nil), x.Dims[:len(x.Dims)-1]...), 4)
	y := reference.New(dims...)
	dense := func(l Linear, v []float64) []float64 {
		return reference.Dense(reference.FromData(v, 1, len(v)), l.W, l.B).Data
	}
	relu := func(v []float64) []float64 {
		for i := range v {
			v[i] = reference.ReLU(v[i])
		}
		return v
	}
	for r := range rows {
		pos := x.Data[r*width : r*width+posDim]
		dir := x.Data[r*width+posDim : (r+1)*width]
		h := append([]float64(nil), pos...)
		for l, p := range pts {
			h = relu(dense(p, h))
			if l == 4 {
				h = append(append([]float64(nil), pos...), h...)
			}
		}
		sigma := dense(alpha, h)[0]
		f := dense(feature, h)
		h = relu(dense(views, append(f, dir...)))
		c := dense(rgb, h)
		for k := range 3 {
			y.Data[r*4+k] = reference.Sigmoid(c[k])
		}
		y.Data[r*4+3] = sigma
	}
	return y
}

// WaveNetLayer is one gated residual layer: filter and gate kernels [2, R, R] (taps t−d, t) with
// biases, the 1x1 skip [R, S] and residual [R, R] (the last layer's residual is unused, W empty).
type WaveNetLayer struct {
	Filter, Gate, Skip, Residual Conv
}

// causal2 is y[n,t,o] = b[o] + Σ_i w[0,i,o]·x[n,t−d,i] + w[1,i,o]·x[n,t,i], x before 0 being 0.
func causal2(x reference.Tensor, c Conv, d int) reference.Tensor {
	n, t, in := x.Dims[0], x.Dims[1], x.Dims[2]
	out := c.W.Dims[2]
	y := reference.New(n, t, out)
	for b := range n {
		for s := range t {
			for o := range out {
				v := c.B[o]
				for i := range in {
					if s-d >= 0 {
						v += c.W.At(0, i, o) * x.At(b, s-d, i)
					}
					v += c.W.At(1, i, o) * x.At(b, s, i)
				}
				y.Set(v, b, s, o)
			}
		}
	}
	return y
}

// WaveNet is the gated stack over x [N, T, R]: layer l at dilation 2^l computes
// z = tanh(filter(x))·sigmoid(gate(x)), adds skip(z) to the output and residual(z) to x.
func WaveNet(x reference.Tensor, layers []WaveNetLayer) reference.Tensor {
	var skips reference.Tensor
	for l, p := range layers {
		d := 1 << l
		f, g := causal2(x, p.Filter, d), causal2(x, p.Gate, d)
		z := reference.New(f.Dims...)
		for i := range z.Data {
			z.Data[i] = math.Tanh(f.Data[i]) * reference.Sigmoid(g.Data[i])
		}
		s := reference.Dense(z, p.Skip.W, p.Skip.B)
		if l == 0 {
			skips = s
		} else {
			skips = reference.Add(skips, s)
		}
		if l < len(layers)-1 {
			x = reference.Add(x, reference.Dense(z, p.Residual.W, p.Residual.B))
		}
	}
	return skips
}

// TransformerLayer is one pre-norm encoder layer: norm1, attention (qkv, proj), norm2, mlp (fc1, fc2).
type TransformerLayer struct {
	Norm1Gamma, Norm1Beta []float64
	QKV, Proj             Linear
	Norm2Gamma, Norm2Beta []float64
	FC1, FC2              Linear
}

// MobileViTParams are the block's weights.
type MobileViTParams struct {
	ConvKxK    ConvBNStats
	Conv1x1    reference.Tensor // [1, 1, ic, dim], no bias
	Layers     []TransformerLayer
	NormGamma  []float64
	NormBeta   []float64
	ConvProj   ConvBNStats
	ConvFusion ConvBNStats
}

// MobileViT is the MobileViT block over x [N, H, W, C]: local 3x3 conv-BN-SiLU and 1x1 to dim; the
// pixels at offset (a, b) of every 2x2 patch form one sequence (patches in row-major order), through
// pre-norm transformer layers (SiLU MLP) and a final LayerNorm; folded back, 1x1 conv-BN-SiLU to C,
// and a 3x3 conv-BN-SiLU fuses [x, that].
func MobileViT(x reference.Tensor, p MobileViTParams, heads int, lnEps, bnEps float64) reference.Tensor {
	n, h, w := x.Dims[0], x.Dims[1], x.Dims[2]
	y := convBNAct(x, p.ConvKxK, 1, bnEps, reference.Swish)
	y = reference.Conv2D(y, p.Conv1x1, nil, reference.ConvParams{})
	dim := y.Dims[3]
	nh, nw := h/2, w/2
	seq := reference.New(n*4, nh*nw, dim)
	for b := range n {
		for i := range h {
			for j := range w {
				s := b*4 + (i%2)*2 + j%2
				tok := (i/2)*nw + j/2
				for k := range dim {
					seq.Set(y.At(b, i, j, k), s, tok, k)
				}
			}
		}
	}
	for _, l := range p.Layers {
		a := reference.MultiHeadAttention(reference.LayerNorm(seq, l.Norm1Gamma, l.Norm1Beta, lnEps), heads, l.QKV.W, l.QKV.B, l.Proj.W, l.Proj.B)
		seq = reference.Add(seq, a)
		m := reference.Map(reference.Dense(reference.LayerNorm(seq, l.Norm2Gamma, l.Norm2Beta, lnEps), l.FC1.W, l.FC1.B), reference.Swish)
		seq = reference.Add(seq, reference.Dense(m, l.FC2.W, l.FC2.B))
	}
	seq = reference.LayerNorm(seq, p.NormGamma, p.NormBeta, lnEps)
	folded := reference.New(n, h, w, dim)
	for b := range n {
		for i := range h {
			for j := range w {
				s := b*4 + (i%2)*2 + j%2
				tok := (i/2)*nw + j/2
				for k := range dim {
					folded.Set(seq.At(s, tok, k), b, i, j, k)
				}
			}
		}
	}
	y = convBNAct(folded, p.ConvProj, 1, bnEps, reference.Swish)
	return convBNAct(ConcatChannels(x, y), p.ConvFusion, 1, bnEps, reference.Swish)
}
