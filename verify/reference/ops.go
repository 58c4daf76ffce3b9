package reference

import (
	"fmt"
	"math"
)

// Dense maps the last axis of x [..., in] through w [in, out] and adds b [out] (b may be empty).
func Dense(x, w Tensor, b []float64) Tensor {
	rows, in := LastAxis(x.Dims)
	if w.Dims[0] != in {
		panic(fmt.Sprintf("reference.Dense: x %v and w %v", x.Dims, w.Dims))
	}
	out := w.Dims[1]
	dims := append(append([]int(nil), x.Dims[:len(x.Dims)-1]...), out)
	y := New(dims...)
	for r := range rows {
		for o := range out {
			s := 0.0
			if len(b) > 0 {
				s = b[o]
			}
			for i := range in {
				s += x.Data[r*in+i] * w.Data[i*out+o]
			}
			y.Data[r*out+o] = s
		}
	}
	return y
}

// ConvParams are a 2-D convolution's geometry. Pads are explicit [lo, hi] per spatial axis (rows,
// then columns), so PyTorch's symmetric padding and XLA's SAME phase are two choices of Pads.
type ConvParams struct {
	Stride, Dilation int // 0 means 1
	Pads             [2][2]int
	Groups           int // 0 means 1; equal to the input channels for a depthwise convolution
}

func (p ConvParams) norm() (stride, dilation, groups int) {
	return max(p.Stride, 1), max(p.Dilation, 1), max(p.Groups, 1)
}

// ConvOutSize is the output length of one spatial axis.
func ConvOutSize(in, kernel, stride, dilation int, pads [2]int) int {
	return (in+pads[0]+pads[1]-dilation*(kernel-1)-1)/stride + 1
}

// Conv2D is the cross-correlation of x [N, H, W, C] with w [KH, KW, C/groups, F], plus b [F] (may be
// empty): y[n,i,j,f] = b[f] + Σ x[n, i·s+a·d−padlo, j·s+c·d−padlo, g·C/groups+k]·w[a,c,k,f] over the
// taps inside the image, where g = f / (F/groups) is f's group.
func Conv2D(x, w Tensor, b []float64, p ConvParams) Tensor {
	stride, dil, groups := p.norm()
	n, h, wd, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	kh, kw, cg, f := w.Dims[0], w.Dims[1], w.Dims[2], w.Dims[3]
	if c%groups != 0 || f%groups != 0 || cg != c/groups {
		panic(fmt.Sprintf("reference.Conv2D: x %v, w %v, %d groups", x.Dims, w.Dims, groups))
	}
	oh := ConvOutSize(h, kh, stride, dil, p.Pads[0])
	ow := ConvOutSize(wd, kw, stride, dil, p.Pads[1])
	fg := f / groups
	y := New(n, oh, ow, f)
	// Flat indexing (At would allocate per tap): x[b,r,col,ch] = x.Data[((b·H + r)·W + col)·C + ch] and
	// w[a,cc,k,o] = w.Data[((a·KW + cc)·C/groups + k)·F + o].
	for b0 := range n {
		for i := range oh {
			for j := range ow {
				for o := range f {
					g := o / fg
					s := 0.0
					if len(b) > 0 {
						s = b[o]
					}
					for a := range kh {
						r := i*stride + a*dil - p.Pads[0][0]
						if r < 0 || r >= h {
							continue
						}
						for cc := range kw {
							col := j*stride + cc*dil - p.Pads[1][0]
							if col < 0 || col >= wd {
								continue
							}
							xBase := ((b0*h+r)*wd+col)*c + g*cg
							wBase := (a*kw+cc)*cg*f + o
							for k := range cg {
								s += x.Data[xBase+k] * w.Data[wBase+k*f]
							}
						}
					}
					y.Data[((b0*oh+i)*ow+j)*f+o] = s
				}
			}
		}
	}
	return y
}

// DepthwiseConv2D is Conv2D with one group per input channel; w is [KH, KW, 1, C·multiplier].
func DepthwiseConv2D(x, w Tensor, b []float64, stride, dilation int, pads [2][2]int) Tensor {
	return Conv2D(x, w, b, ConvParams{Stride: stride, Dilation: dilation, Pads: pads, Groups: x.Dims[3]})
}

// Patchify cuts x [N, H, W, C] into non-overlapping p×p patches, maps each through w [p, p, C, D] and b,
// and returns tokens [N, (H/p)·(W/p), D] in row-major patch order (ViT's patch embedding).
func Patchify(x, w Tensor, b []float64, p int) Tensor {
	y := Conv2D(x, w, b, ConvParams{Stride: p})
	return y.Reshape(y.Dims[0], y.Dims[1]*y.Dims[2], y.Dims[3])
}

// BatchNormTrain normalises x [..., C] per channel with the batch's statistics over the m = size/C
// other values (biased variance, as PyTorch normalises), then scales by gamma and shifts by beta.
// It also returns the batch mean and the biased variance.
func BatchNormTrain(x Tensor, gamma, beta []float64, eps float64) (y Tensor, mean, variance []float64) {
	m, c := LastAxis(x.Dims)
	mean = make([]float64, c)
	variance = make([]float64, c)
	for r := range m {
		for k := range c {
			mean[k] += x.Data[r*c+k]
		}
	}
	for k := range c {
		mean[k] /= float64(m)
	}
	for r := range m {
		for k := range c {
			d := x.Data[r*c+k] - mean[k]
			variance[k] += d * d
		}
	}
	for k := range c {
		variance[k] /= float64(m)
	}
	return BatchNormEval(x, gamma, beta, mean, variance, eps), mean, variance
}

// BatchNormEval normalises x [..., C] with given per-channel statistics.
func BatchNormEval(x Tensor, gamma, beta, mean, variance []float64, eps float64) Tensor {
	m, c := LastAxis(x.Dims)
	y := New(x.Dims...)
	for r := range m {
		for k := range c {
			y.Data[r*c+k] = (x.Data[r*c+k]-mean[k])/math.Sqrt(variance[k]+eps)*gamma[k] + beta[k]
		}
	}
	return y
}

// LayerNorm normalises every row of x over its last axis (biased variance), then applies gamma, beta.
func LayerNorm(x Tensor, gamma, beta []float64, eps float64) Tensor {
	rows, c := LastAxis(x.Dims)
	y := New(x.Dims...)
	for r := range rows {
		row := x.Data[r*c : (r+1)*c]
		mean, variance := 0.0, 0.0
		for _, v := range row {
			mean += v
		}
		mean /= float64(c)
		for _, v := range row {
			variance += (v - mean) * (v - mean)
		}
		variance /= float64(c)
		for k, v := range row {
			y.Data[r*c+k] = (v-mean)/math.Sqrt(variance+eps)*gamma[k] + beta[k]
		}
	}
	return y
}

// GELUErf is x·Φ(x) = x/2·(1 + erf(x/√2)).
func GELUErf(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// GELUTanh is x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func GELUTanh(x float64) float64 {
	return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
}

// Sigmoid is 1/(1+e^−x).
func Sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Swish (SiLU) is x·sigmoid(x).
func Swish(x float64) float64 { return x * Sigmoid(x) }

// ReLU is max(x, 0).
func ReLU(x float64) float64 { return max(x, 0) }

// ReLU6 is min(max(x, 0), 6).
func ReLU6(x float64) float64 { return min(max(x, 0), 6) }

// GlobalAvgPool averages x [N, H, W, C] over H and W to [N, C].
func GlobalAvgPool(x Tensor) Tensor {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	y := New(n, c)
	for b := range n {
		for k := range c {
			s := 0.0
			for i := range h {
				for j := range w {
					s += x.At(b, i, j, k)
				}
			}
			y.Set(s/float64(h*w), b, k)
		}
	}
	return y
}

// SqueezeExcite is the SE block of MobileNet/EfficientNet: s = global average of x [N, H, W, C];
// s = act(s·w1 + b1) with w1 [C, R]; gate = sigmoid(s·w2 + b2) with w2 [R, C]; y = x·gate per channel.
func SqueezeExcite(x, w1 Tensor, b1 []float64, w2 Tensor, b2 []float64, act func(float64) float64) Tensor {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	s := Map(Dense(GlobalAvgPool(x), w1, b1), act)
	gate := Map(Dense(s, w2, b2), Sigmoid)
	y := New(x.Dims...)
	for b := range n {
		for i := range h {
			for j := range w {
				for k := range c {
					y.Set(x.At(b, i, j, k)*gate.At(b, k), b, i, j, k)
				}
			}
		}
	}
	return y
}

// LogSoftmax is log softmax over the last axis.
func LogSoftmax(x Tensor) Tensor {
	rows, c := LastAxis(x.Dims)
	y := New(x.Dims...)
	for r := range rows {
		row := x.Data[r*c : (r+1)*c]
		m := math.Inf(-1)
		for _, v := range row {
			m = max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		lse := m + math.Log(s)
		for k, v := range row {
			y.Data[r*c+k] = v - lse
		}
	}
	return y
}

// Softmax is softmax over the last axis.
func Softmax(x Tensor) Tensor { return Map(LogSoftmax(x), math.Exp) }

// SoftmaxCrossEntropy is the batch mean of (1−ε)·(−log p[label]) + ε·mean over classes of (−log p),
// PyTorch's cross_entropy(label_smoothing=ε) and timm's LabelSmoothingCrossEntropy. logits [B, K].
func SoftmaxCrossEntropy(logits Tensor, labels []int, smoothing float64) float64 {
	b, k := logits.Dims[0], logits.Dims[1]
	logp := LogSoftmax(logits)
	loss := 0.0
	for i := range b {
		nll := -logp.At(i, labels[i])
		uniform := 0.0
		for c := range k {
			uniform -= logp.At(i, c)
		}
		loss += (1-smoothing)*nll + smoothing*uniform/float64(k)
	}
	return loss / float64(b)
}

// SoftCrossEntropy is the batch mean of −Σ_c t[c]·log p[c] for soft targets t [B, K] (mixup, cutmix).
func SoftCrossEntropy(logits, targets Tensor) float64 {
	b := logits.Dims[0]
	logp := LogSoftmax(logits)
	return -Dot(targets, logp) / float64(b)
}

// BCEWithLogits is the mean over every element of −t·log σ(x) − (1−t)·log(1−σ(x)).
func BCEWithLogits(logits, targets Tensor) float64 {
	s := 0.0
	for i, x := range logits.Data {
		t := targets.Data[i]
		// log σ(x) = −log(1+e^−x), log(1−σ(x)) = −x − log(1+e^−x); written stably for either sign.
		softplus := max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) // log(1+e^x)
		s += softplus - x*t
	}
	return s / float64(len(logits.Data))
}

// MaxPool2D takes the maximum of x [N, H, W, C] over k×k windows at stride s with pads [lo, hi] per
// spatial axis; padded cells are −∞ and never win. It also returns, for every output, the flat index
// in x of the FIRST maximal cell in row-major window order: the cell that receives the gradient.
func MaxPool2D(x Tensor, k, s int, pads [2][2]int) (Tensor, []int) {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	oh := ConvOutSize(h, k, s, 1, pads[0])
	ow := ConvOutSize(w, k, s, 1, pads[1])
	y := New(n, oh, ow, c)
	arg := make([]int, y.Size())
	for b := range n {
		for i := range oh {
			for j := range ow {
				for ch := range c {
					best, bestAt := math.Inf(-1), -1
					for a := range k {
						r := i*s + a - pads[0][0]
						if r < 0 || r >= h {
							continue
						}
						for cc := range k {
							col := j*s + cc - pads[1][0]
							if col < 0 || col >= w {
								continue
							}
							at := x.offset([]int{b, r, col, ch})
							if x.Data[at] > best { // strict: a later equal cell does not win
								best, bestAt = x.Data[at], at
							}
						}
					}
					o := y.offset([]int{b, i, j, ch})
					y.Data[o], arg[o] = best, bestAt
				}
			}
		}
	}
	return y, arg
}

// MaxPool2DBackward routes each output cotangent dy to the input cell MaxPool2D chose (argmax).
func MaxPool2DBackward(xDims []int, argmax []int, dy Tensor) Tensor {
	dx := New(xDims...)
	for o, at := range argmax {
		if at >= 0 {
			dx.Data[at] += dy.Data[o]
		}
	}
	return dx
}

// AvgPool2DPadded averages x [N, H, W, C] over k×k windows at stride s, the input padded by pad zeros
// on every side that count in the mean (nn.AvgPool2d's count_include_pad=True).
func AvgPool2DPadded(x Tensor, k, s, pad int) Tensor {
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	oh, ow := (h+2*pad-k)/s+1, (w+2*pad-k)/s+1
	y := New(n, oh, ow, c)
	for b := range n {
		for i := range oh {
			for j := range ow {
				for ch := range c {
					sum := 0.0
					for a := range k {
						for cc := range k {
							r, q := i*s+a-pad, j*s+cc-pad
							if r >= 0 && r < h && q >= 0 && q < w {
								sum += x.At(b, r, q, ch)
							}
						}
					}
					y.Set(sum/float64(k*k), b, i, j, ch)
				}
			}
		}
	}
	return y
}

// AvgPool2D averages x [N, H, W, C] over k×k windows at stride s, without padding.
func AvgPool2D(x Tensor, k, s int) Tensor {
	return AvgPool2DPadded(x, k, s, 0)
}

// ScaledDotProductAttention is softmax(q·kᵀ/√d)·v for q, k, v [B, heads, T, d].
func ScaledDotProductAttention(q, k, v Tensor) Tensor {
	b, hs, tq, d := q.Dims[0], q.Dims[1], q.Dims[2], q.Dims[3]
	tk := k.Dims[2]
	out := New(b, hs, tq, d)
	scores := New(tk)
	for n := range b {
		for h := range hs {
			for i := range tq {
				for j := range tk {
					s := 0.0
					for e := range d {
						s += q.At(n, h, i, e) * k.At(n, h, j, e)
					}
					scores.Data[j] = s / math.Sqrt(float64(d))
				}
				p := Softmax(scores)
				for e := range d {
					s := 0.0
					for j := range tk {
						s += p.Data[j] * v.At(n, h, j, e)
					}
					out.Set(s, n, h, i, e)
				}
			}
		}
	}
	return out
}

// MultiHeadAttention is timm's Attention over x [B, T, D]: qkv = x·wqkv + bqkv with wqkv [D, 3D]; the
// 3D outputs split as [3, heads, D/heads] (q first); attention per head; heads concatenated back to
// D; then the proj Linear (wproj [D, D], bproj).
func MultiHeadAttention(x Tensor, heads int, wqkv Tensor, bqkv []float64, wproj Tensor, bproj []float64) Tensor {
	b, t, d := x.Dims[0], x.Dims[1], x.Dims[2]
	hd := d / heads
	qkv := Dense(x, wqkv, bqkv) // [B, T, 3D]
	parts := [3]Tensor{New(b, heads, t, hd), New(b, heads, t, hd), New(b, heads, t, hd)}
	for n := range b {
		for i := range t {
			for which := range 3 {
				for h := range heads {
					for e := range hd {
						parts[which].Set(qkv.At(n, i, which*d+h*hd+e), n, h, i, e)
					}
				}
			}
		}
	}
	att := ScaledDotProductAttention(parts[0], parts[1], parts[2])
	merged := New(b, t, d)
	for n := range b {
		for i := range t {
			for h := range heads {
				for e := range hd {
					merged.Set(att.At(n, h, i, e), n, i, h*hd+e)
				}
			}
		}
	}
	return Dense(merged, wproj, bproj)
}

// LayerScale multiplies the last axis of x by gamma (ConvNeXt's and CaiT's per-channel scale).
func LayerScale(x Tensor, gamma []float64) Tensor {
	rows, c := LastAxis(x.Dims)
	y := New(x.Dims...)
	for r := range rows {
		for k := range c {
			y.Data[r*c+k] = x.Data[r*c+k] * gamma[k]
		}
	}
	return y
}

// Dropout multiplies x by a given mask (0 for dropped cells, 1/(1−rate) for kept ones).
func Dropout(x, mask Tensor) Tensor { return Mul(x, mask) }

// DropPath multiplies every element of example i of x [B, ...] by keep[i] (0 or 1/(1−rate)).
func DropPath(x Tensor, keep []float64) Tensor {
	per := x.Size() / x.Dims[0]
	y := New(x.Dims...)
	for i, v := range x.Data {
		y.Data[i] = v * keep[i/per]
	}
	return y
}

// MaxPool2DTies counts the windows of MaxPool2D whose maximum is attained by more than one cell: the
// windows where the first-maximal-cell rule decides where the gradient goes.
func MaxPool2DTies(x Tensor, k, s int, pads [2][2]int) int {
	y, _ := MaxPool2D(x, k, s, pads)
	n, h, w, c := x.Dims[0], x.Dims[1], x.Dims[2], x.Dims[3]
	ties := 0
	for b := range n {
		for i := range y.Dims[1] {
			for j := range y.Dims[2] {
				for ch := range c {
					best, count := y.At(b, i, j, ch), 0
					for a := range k {
						for cc := range k {
							r, col := i*s+a-pads[0][0], j*s+cc-pads[1][0]
							if r >= 0 && r < h && col >= 0 && col < w && x.At(b, r, col, ch) == best {
								count++
							}
						}
					}
					if count > 1 {
						ties++
					}
				}
			}
		}
	}
	return ties
}
