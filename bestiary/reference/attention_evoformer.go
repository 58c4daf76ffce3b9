package reference

import (
	"math"

	"github.com/trainer/trainer/verify/reference"
)

// AlphaFold 2's Evoformer block (supplement Algorithms 6–15) as plain loops, each attention written
// with its own indices as the algorithm states it (no transposes). Parameters are looked up by
// "module/layer/weight" names (Linear weights [in, out]); LayerNorm eps 1e-5.

// EvoformerSizes are the inner sizes of the block.
type EvoformerSizes struct {
	MSAHeads, MSAHeadDim, PairHeads, PairHeadDim, OuterDim, TriMulDim, Transition int
}

// Params returns a parameter by name.
type Params func(name string) reference.Tensor

func (p Params) linear(x reference.Tensor, scope string, bias bool) reference.Tensor {
	var b []float64
	if bias {
		b = p(scope + "/bias").Data
	}
	return reference.Dense(x, p(scope+"/weight"), b)
}

func (p Params) norm(x reference.Tensor, scope string) reference.Tensor {
	return reference.LayerNorm(x, p(scope+"/weight").Data, p(scope+"/bias").Data, 1e-5)
}

// index4 addresses a [d0, d1, d2, d3] tensor.
func index4(t reference.Tensor, a, b, c, d int) int {
	return ((a*t.Dims[1]+b)*t.Dims[2]+c)*t.Dims[3] + d
}

// gatedAttention fills o[n, x, y, h·C+c] = g·Σ_k softmax_k(logit(n, x, y, k, h))·v(n, x, y, k, h·C+c)
// for every (n, x, y) of o's first three axes, with the logit and the value index given by the caller.
func gatedAttention(o, g reference.Tensor, t, heads, c int, logit func(n, x, y, k, h int) float64, value func(n, x, y, k, ch int) float64) {
	for n := range o.Dims[0] {
		for x := range o.Dims[1] {
			for y := range o.Dims[2] {
				for h := range heads {
					a := make([]float64, t)
					top := math.Inf(-1)
					for k := range t {
						a[k] = logit(n, x, y, k, h)
						top = math.Max(top, a[k])
					}
					sum := 0.0
					for k := range a {
						a[k] = math.Exp(a[k] - top)
						sum += a[k]
					}
					for e := h * c; e < (h+1)*c; e++ {
						s := 0.0
						for k := range t {
							s += a[k] / sum * value(n, x, y, k, e)
						}
						o.Data[index4(o, n, x, y, e)] = s * g.Data[index4(g, n, x, y, e)]
					}
				}
			}
		}
	}
}

// at4 reads element (a, b, c, d) of a rank-4 tensor without At's bounds bookkeeping (the finite
// differences call the reference thousands of times).
func at4(t reference.Tensor, a, b, c, d int) float64 { return t.Data[index4(t, a, b, c, d)] }

func dot(a reference.Tensor, ia int, b reference.Tensor, ib int, h, c int) float64 {
	s := 0.0
	for e := h * c; e < (h+1)*c; e++ {
		s += a.Data[ia+e] * b.Data[ib+e]
	}
	return s / math.Sqrt(float64(c))
}

// qkvg returns the attention's projections of x (q, k, v without bias; the gate with bias, sigmoid).
func (p Params) qkvg(x reference.Tensor, scope string) (q, k, v, g reference.Tensor) {
	return p.linear(x, scope+"/linear_q", false), p.linear(x, scope+"/linear_k", false),
		p.linear(x, scope+"/linear_v", false), reference.Map(p.linear(x, scope+"/linear_g", true), reference.Sigmoid)
}

// MSARowAttention is Algorithm 7 over m [B, S, R, Cm] with the pair bias from z [B, R, R, Cz].
func MSARowAttention(m, z reference.Tensor, p Params, scope string, heads, c int) reference.Tensor {
	mn := p.norm(m, scope+"/layer_norm_m")
	bias := p.linear(p.norm(z, scope+"/layer_norm_z"), scope+"/linear_z", false) // [B, R, R, heads]
	q, k, v, g := p.qkvg(mn, scope)
	o := reference.New(g.Dims...)
	r := m.Dims[2]
	gatedAttention(o, g, r, heads, c,
		func(n, s, i, j, h int) float64 {
			return dot(q, index4(q, n, s, i, 0), k, index4(k, n, s, j, 0), h, c) + at4(bias, n, i, j, h)
		},
		func(n, s, _, j, e int) float64 { return at4(v, n, s, j, e) })
	return p.linear(o, scope+"/linear_o", true)
}

// MSAColumnAttention is Algorithm 8: residue i of sequence s attends to residue i of every sequence t.
func MSAColumnAttention(m reference.Tensor, p Params, scope string, heads, c int) reference.Tensor {
	q, k, v, g := p.qkvg(p.norm(m, scope+"/layer_norm_m"), scope)
	o := reference.New(g.Dims...)
	gatedAttention(o, g, m.Dims[1], heads, c,
		func(n, s, i, t, h int) float64 { return dot(q, index4(q, n, s, i, 0), k, index4(k, n, t, i, 0), h, c) },
		func(n, _, i, t, e int) float64 { return at4(v, n, t, i, e) })
	return p.linear(o, scope+"/linear_o", true)
}

// EvoformerTransition is Algorithms 9 and 15 (the MSA and pair transitions).
func EvoformerTransition(x reference.Tensor, p Params, scope string) reference.Tensor {
	h := reference.Map(p.linear(p.norm(x, scope+"/layer_norm"), scope+"/linear_1", true), reference.ReLU)
	return p.linear(h, scope+"/linear_2", true)
}

// OuterProductMean is Algorithm 10: o_ij = mean_s a_si ⊗ b_sj, flattened (a's index first), projected.
func OuterProductMean(m reference.Tensor, p Params, scope string) reference.Tensor {
	mn := p.norm(m, scope+"/layer_norm")
	a, b := p.linear(mn, scope+"/linear_1", true), p.linear(mn, scope+"/linear_2", true)
	nb, ns, r, c := a.Dims[0], a.Dims[1], a.Dims[2], a.Dims[3]
	o := reference.New(nb, r, r, c*c)
	for n := range nb {
		for i := range r {
			for j := range r {
				for x := range c {
					for y := range c {
						s := 0.0
						for t := range ns {
							s += at4(a, n, t, i, x) * at4(b, n, t, j, y)
						}
						o.Set(s/float64(ns), n, i, j, x*c+y)
					}
				}
			}
		}
	}
	return p.linear(o, scope+"/linear_out", true)
}

// TriangleMultiplication is Algorithm 11 (outgoing) or 12 (incoming).
func TriangleMultiplication(z reference.Tensor, p Params, scope string, outgoing bool) reference.Tensor {
	zn := p.norm(z, scope+"/layer_norm_in")
	a := reference.Mul(reference.Map(p.linear(zn, scope+"/linear_a_g", true), reference.Sigmoid), p.linear(zn, scope+"/linear_a_p", true))
	b := reference.Mul(reference.Map(p.linear(zn, scope+"/linear_b_g", true), reference.Sigmoid), p.linear(zn, scope+"/linear_b_p", true))
	nb, r, c := a.Dims[0], a.Dims[1], a.Dims[3]
	x := reference.New(nb, r, r, c)
	for n := range nb {
		for i := range r {
			for j := range r {
				for e := range c {
					s := 0.0
					for k := range r {
						if outgoing {
							s += at4(a, n, i, k, e) * at4(b, n, j, k, e)
						} else {
							s += at4(a, n, k, i, e) * at4(b, n, k, j, e)
						}
					}
					x.Set(s, n, i, j, e)
				}
			}
		}
	}
	g := reference.Map(p.linear(zn, scope+"/linear_g", true), reference.Sigmoid)
	return reference.Mul(g, p.linear(p.norm(x, scope+"/layer_norm_out"), scope+"/linear_z", true))
}

// TriangleAttention is Algorithm 13 (starting node: logits q_ij·k_ik + b_jk, values v_ik) or 14 (ending
// node: q_ij·k_kj + b_ki, values v_kj).
func TriangleAttention(z reference.Tensor, p Params, scope string, starting bool, heads, c int) reference.Tensor {
	zn := p.norm(z, scope+"/layer_norm")
	bias := p.linear(zn, scope+"/linear", false)
	q, k, v, g := p.qkvg(zn, scope)
	o := reference.New(g.Dims...)
	if starting {
		gatedAttention(o, g, z.Dims[1], heads, c,
			func(n, i, j, kk, h int) float64 {
				return dot(q, index4(q, n, i, j, 0), k, index4(k, n, i, kk, 0), h, c) + at4(bias, n, j, kk, h)
			},
			func(n, i, _, kk, e int) float64 { return at4(v, n, i, kk, e) })
	} else {
		gatedAttention(o, g, z.Dims[1], heads, c,
			func(n, i, j, kk, h int) float64 {
				return dot(q, index4(q, n, i, j, 0), k, index4(k, n, kk, j, 0), h, c) + at4(bias, n, kk, i, h)
			},
			func(n, _, j, kk, e int) float64 { return at4(v, n, kk, j, e) })
	}
	return p.linear(o, scope+"/linear_o", true)
}

// EvoformerBlock is Algorithm 6 (eval mode) over m [B, S, R, Cm] and z [B, R, R, Cz].
func EvoformerBlock(m, z reference.Tensor, p Params, s EvoformerSizes) (reference.Tensor, reference.Tensor) {
	m = reference.Add(m, MSARowAttention(m, z, p, "msa_att_row", s.MSAHeads, s.MSAHeadDim))
	m = reference.Add(m, MSAColumnAttention(m, p, "msa_att_col", s.MSAHeads, s.MSAHeadDim))
	m = reference.Add(m, EvoformerTransition(m, p, "msa_transition"))
	z = reference.Add(z, OuterProductMean(m, p, "outer_product_mean"))
	z = reference.Add(z, TriangleMultiplication(z, p, "tri_mul_out", true))
	z = reference.Add(z, TriangleMultiplication(z, p, "tri_mul_in", false))
	z = reference.Add(z, TriangleAttention(z, p, "tri_att_start", true, s.PairHeads, s.PairHeadDim))
	z = reference.Add(z, TriangleAttention(z, p, "tri_att_end", false, s.PairHeads, s.PairHeadDim))
	z = reference.Add(z, EvoformerTransition(z, p, "pair_transition"))
	return m, z
}
