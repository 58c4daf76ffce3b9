package reference

import (
	"math"

	"github.com/trainer/trainer/verify/reference"
)

// The bestiary's attention and structure blocks as plain loops: nn.MultiheadAttention and the post-norm
// nn.TransformerDecoder, DETR's heads, and Mamba's block with its selective scan written as the
// recurrence of the paper (one state per channel and state index, stepped through time).

// TorchMHA is nn.MultiheadAttention (batch_first, no mask): queries q [B, Tq, D] attend to kv [B, Tk, D]
// with the packed in-projection win [D, 3D] (columns: q, then k, then v; PyTorch's in_proj_weight
// transposed) and bias bin [3D]; head h uses the columns h·D/heads … (h+1)·D/heads−1 of each part; the
// heads' outputs are concatenated and mapped by wout [D, D], bout [D].
func TorchMHA(q, kv reference.Tensor, heads int, win reference.Tensor, bin []float64, wout reference.Tensor, bout []float64) reference.Tensor {
	b, tq, tk, d := q.Dims[0], q.Dims[1], kv.Dims[1], q.Dims[2]
	hd := d / heads
	proj := func(x reference.Tensor, t, part int) [][][]float64 { // [b][t][d]
		out := make([][][]float64, b)
		for n := range b {
			out[n] = make([][]float64, t)
			for i := range t {
				row := make([]float64, d)
				for o := range d {
					s := bin[part*d+o]
					for e := range d {
						s += x.At(n, i, e) * win.At(e, part*d+o)
					}
					row[o] = s
				}
				out[n][i] = row
			}
		}
		return out
	}
	qs, ks, vs := proj(q, tq, 0), proj(kv, tk, 1), proj(kv, tk, 2)
	merged := reference.New(b, tq, d)
	for n := range b {
		for h := range heads {
			for i := range tq {
				scores := make([]float64, tk)
				top := math.Inf(-1)
				for j := range tk {
					s := 0.0
					for e := h * hd; e < (h+1)*hd; e++ {
						s += qs[n][i][e] * ks[n][j][e]
					}
					scores[j] = s / math.Sqrt(float64(hd))
					top = math.Max(top, scores[j])
				}
				sum := 0.0
				for j := range scores {
					scores[j] = math.Exp(scores[j] - top)
					sum += scores[j]
				}
				for e := h * hd; e < (h+1)*hd; e++ {
					s := 0.0
					for j := range tk {
						s += scores[j] / sum * vs[n][j][e]
					}
					merged.Set(s, n, i, e)
				}
			}
		}
	}
	return reference.Dense(merged, wout, bout)
}

// MHAParams are one nn.MultiheadAttention's weights (see TorchMHA).
type MHAParams struct {
	InW  reference.Tensor
	InB  []float64
	OutW reference.Tensor
	OutB []float64
}

// DecoderLayerParams are one nn.TransformerDecoderLayer's weights; Linear weights are [in, out].
type DecoderLayerParams struct {
	SelfAttn, CrossAttn MHAParams
	W1, W2              reference.Tensor
	B1, B2              []float64
	Norm1W, Norm1B      []float64
	Norm2W, Norm2B      []float64
	Norm3W, Norm3B      []float64
}

// TransformerDecoder runs the learned queries [Q, D] (the same for every example) through post-norm
// decoder layers over memory [B, T, D]: per layer x ← LN1(x + SA(x)), x ← LN2(x + CA(x, memory)),
// x ← LN3(x + W2·relu(W1·x + b1) + b2), LayerNorm eps 1e-5. Output [B, Q, D].
func TransformerDecoder(memory, queries reference.Tensor, layers []DecoderLayerParams, heads int) reference.Tensor {
	b, nq, d := memory.Dims[0], queries.Dims[0], queries.Dims[1]
	x := reference.New(b, nq, d)
	for n := range b {
		copy(x.Data[n*nq*d:(n+1)*nq*d], queries.Data)
	}
	const eps = 1e-5
	for _, p := range layers {
		sa := TorchMHA(x, x, heads, p.SelfAttn.InW, p.SelfAttn.InB, p.SelfAttn.OutW, p.SelfAttn.OutB)
		x = reference.LayerNorm(reference.Add(x, sa), p.Norm1W, p.Norm1B, eps)
		ca := TorchMHA(x, memory, heads, p.CrossAttn.InW, p.CrossAttn.InB, p.CrossAttn.OutW, p.CrossAttn.OutB)
		x = reference.LayerNorm(reference.Add(x, ca), p.Norm2W, p.Norm2B, eps)
		ff := reference.Dense(reference.Map(reference.Dense(x, p.W1, p.B1), reference.ReLU), p.W2, p.B2)
		x = reference.LayerNorm(reference.Add(x, ff), p.Norm3W, p.Norm3B, eps)
	}
	return x
}

// DETRHeads is DETR's class head (a Linear to nClasses+1 logits, wc [D, K+1]) and box head (Linear,
// ReLU, Linear, ReLU, Linear to 4, sigmoid) over x [B, Q, D]; it returns both.
func DETRHeads(x, wc reference.Tensor, bc []float64, wb [3]reference.Tensor, bb [3][]float64) (logits, boxes reference.Tensor) {
	logits = reference.Dense(x, wc, bc)
	h := reference.Map(reference.Dense(x, wb[0], bb[0]), reference.ReLU)
	h = reference.Map(reference.Dense(h, wb[1], bb[1]), reference.ReLU)
	return logits, reference.Map(reference.Dense(h, wb[2], bb[2]), reference.Sigmoid)
}

// MambaParams are one Mamba block's weights: Norm [D] (RMSNorm), InProj [D, 2E] (x then z), ConvW
// [K, E] (tap j multiplies x_{t−K+1+j}), ConvB [E], XProj [E, R+2N] (dt, then B, then C), DTW [R, E],
// DTB [E], ALog [E, N], D [E], OutProj [E, D].
type MambaParams struct {
	Norm, ConvB, DTB, D       []float64
	InProj, ConvW, XProj, DTW reference.Tensor
	ALog, OutProj             reference.Tensor
}

// MambaBlocks applies x ← x + mixer(RMSNorm(x)) per block to x [B, L, D], with the selective scan
// stepped through time per example, channel and state: h ← exp(Δ·a)·h + Δ·x·B_t, y = Σ_s C_t[s]·h[s] +
// D·x, then y·silu(z) and the out-projection. RMSNorm eps 1e-5.
func MambaBlocks(x reference.Tensor, blocks []MambaParams) reference.Tensor {
	b, l, d := x.Dims[0], x.Dims[1], x.Dims[2]
	for _, p := range blocks {
		e, k, n, r := p.D, p.ConvW.Dims[0], p.ALog.Dims[1], p.DTW.Dims[0]
		ch := len(e)
		// RMSNorm.
		u := reference.New(b, l, d)
		for row := range b * l {
			ms := 0.0
			for c := range d {
				ms += x.Data[row*d+c] * x.Data[row*d+c]
			}
			scale := 1 / math.Sqrt(ms/float64(d)+1e-5)
			for c := range d {
				u.Data[row*d+c] = x.Data[row*d+c] * scale * p.Norm[c]
			}
		}
		xz := reference.Dense(u, p.InProj, nil) // [B, L, 2E]
		out := reference.New(b, l, ch)
		for nb := range b {
			// Causal depthwise conv and SiLU.
			xc := make([][]float64, l)
			for t := range l {
				xc[t] = make([]float64, ch)
				for c := range ch {
					s := p.ConvB[c]
					for j := range k {
						if src := t - (k - 1) + j; src >= 0 {
							s += p.ConvW.At(j, c) * xz.At(nb, src, c)
						}
					}
					xc[t][c] = reference.Swish(s)
				}
			}
			h := make([][]float64, ch)
			for c := range h {
				h[c] = make([]float64, n)
			}
			for t := range l {
				// x_proj, then Δ = softplus(dt_proj(dt)).
				proj := make([]float64, r+2*n)
				for o := range proj {
					for c := range ch {
						proj[o] += xc[t][c] * p.XProj.At(c, o)
					}
				}
				for c := range ch {
					pre := p.DTB[c]
					for i := range r {
						pre += proj[i] * p.DTW.At(i, c)
					}
					delta := math.Log1p(math.Exp(pre))
					y := e[c] * xc[t][c]
					for s := range n {
						a := -math.Exp(p.ALog.At(c, s))
						h[c][s] = math.Exp(delta*a)*h[c][s] + delta*xc[t][c]*proj[r+s]
						y += proj[r+n+s] * h[c][s]
					}
					z := xz.At(nb, t, ch+c)
					out.Set(y*reference.Swish(z), nb, t, c)
				}
			}
		}
		x = reference.Add(x, reference.Dense(out, p.OutProj, nil))
	}
	return x
}

// PairTile builds y[n, i, j] = w·[s_i, s_j, pair_ij] + b for s [B, L, C] and pair [B, L, L, P] (P may be
// 0, pair then unused), w [2C+P, O].
func PairTile(s, pair, w reference.Tensor, b []float64) reference.Tensor {
	nb, l, c := s.Dims[0], s.Dims[1], s.Dims[2]
	in, out := w.Dims[0], w.Dims[1]
	p := in - 2*c
	y := reference.New(nb, l, l, out)
	for n := range nb {
		for i := range l {
			for j := range l {
				for o := range out {
					v := b[o]
					for k := range c {
						v += s.At(n, i, k)*w.At(k, o) + s.At(n, j, k)*w.At(c+k, o)
					}
					for k := range p {
						v += pair.At(n, i, j, k) * w.At(2*c+k, o)
					}
					y.Set(v, n, i, j, o)
				}
			}
		}
	}
	return y
}
