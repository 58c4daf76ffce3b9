package reference

import (
	"math"

	"github.com/trainer/trainer/verify/reference"
)

// AlphaFold 2's structure module without side chains (Algorithms 20, 22, 23) as plain loops: frames
// are 3×3 rotations and translations per residue, points are mapped by T∘x = R·x + t.

// StructureSizes are the invariant point attention's sizes.
type StructureSizes struct {
	Heads, HeadDim, QueryPoints, ValuePoints int
}

type frame struct {
	r [3][3]float64
	t [3]float64
}

func (f frame) apply(x [3]float64) (y [3]float64) {
	for a := range 3 {
		y[a] = f.t[a]
		for b := range 3 {
			y[a] += f.r[a][b] * x[b]
		}
	}
	return y
}

func (f frame) invert(y [3]float64) (x [3]float64) {
	for a := range 3 {
		for b := range 3 {
			x[a] += f.r[b][a] * (y[b] - f.t[b])
		}
	}
	return x
}

// compose returns f∘g: rotation f.r·g.r, translation f.r·g.t + f.t.
func (f frame) compose(g frame) (h frame) {
	h.t = f.apply(g.t)
	for a := range 3 {
		for b := range 3 {
			for k := range 3 {
				h.r[a][b] += f.r[a][k] * g.r[k][b]
			}
		}
	}
	return h
}

// point reads point (head h, index p) of row (n, i) of a [B, R, heads·points·3] projection.
func point(x reference.Tensor, n, i, h, p, points int) [3]float64 {
	base := (n*x.Dims[1]+i)*x.Dims[2] + (h*points+p)*3
	return [3]float64{x.Data[base], x.Data[base+1], x.Data[base+2]}
}

// InvariantPointAttention is Algorithm 22 over s [B, R, Cs], z [B, R, R, Cz] and frames[n][i]; the
// concatenation fed to linear_out is, per residue: attended values (head-major), attended value points
// in the local frame ([head, point, xyz]), their norms √(‖·‖² + 1e-8), attended pair features.
func invariantPointAttention(s, z reference.Tensor, frames [][]frame, p Params, scope string, c StructureSizes) reference.Tensor {
	nb, r := s.Dims[0], s.Dims[1]
	cz := z.Dims[3]
	h, hc, nq, nv := c.Heads, c.HeadDim, c.QueryPoints, c.ValuePoints
	q, k, v := p.linear(s, scope+"/linear_q", false), p.linear(s, scope+"/linear_k", false), p.linear(s, scope+"/linear_v", false)
	qp, kp := p.linear(s, scope+"/linear_q_points", false), p.linear(s, scope+"/linear_k_points", false)
	vp := p.linear(s, scope+"/linear_v_points", false)
	bias := p.linear(z, scope+"/linear_b", false) // [B, R, R, heads]
	wC, wL := math.Sqrt(2/(9*float64(nq))), math.Sqrt(1.0/3)
	width := h*hc + h*nv*3 + h*nv + h*cz
	cat := reference.New(nb, r, width)
	for n := range nb {
		for i := range r {
			row := cat.Data[(n*r+i)*width : (n*r+i+1)*width]
			for hh := range h {
				gamma := math.Log1p(math.Exp(p(scope + "/head_weights").Data[hh]))
				a := make([]float64, r)
				top := math.Inf(-1)
				for j := range r {
					sc := 0.0
					for e := range hc {
						sc += q.At(n, i, hh*hc+e) * k.At(n, j, hh*hc+e)
					}
					dist := 0.0
					for pp := range nq {
						gq := frames[n][i].apply(point(qp, n, i, hh, pp, nq))
						gk := frames[n][j].apply(point(kp, n, j, hh, pp, nq))
						for x := range 3 {
							dist += (gq[x] - gk[x]) * (gq[x] - gk[x])
						}
					}
					a[j] = wL * (sc/math.Sqrt(float64(hc)) + bias.At(n, i, j, hh) - gamma*wC/2*dist)
					top = math.Max(top, a[j])
				}
				sum := 0.0
				for j := range a {
					a[j] = math.Exp(a[j] - top)
					sum += a[j]
				}
				for j := range a {
					a[j] /= sum
				}
				for e := range hc {
					for j := range r {
						row[hh*hc+e] += a[j] * v.At(n, j, hh*hc+e)
					}
				}
				for pp := range nv {
					var g [3]float64
					for j := range r {
						gv := frames[n][j].apply(point(vp, n, j, hh, pp, nv))
						for x := range 3 {
							g[x] += a[j] * gv[x]
						}
					}
					local := frames[n][i].invert(g)
					sq := 1e-8
					for x := range 3 {
						row[h*hc+(hh*nv+pp)*3+x] = local[x]
						sq += local[x] * local[x]
					}
					row[h*hc+h*nv*3+hh*nv+pp] = math.Sqrt(sq)
				}
				for e := range cz {
					for j := range r {
						row[h*hc+h*nv*4+hh*cz+e] += a[j] * z.At(n, i, j, e)
					}
				}
			}
		}
	}
	return p.linear(cat, scope+"/linear_out", true)
}

// backboneUpdate is Algorithm 23: the quaternion (1, b, c, d)/‖·‖ as a rotation, and a translation.
func backboneUpdate(s reference.Tensor, p Params, scope string) [][]frame {
	u := p.linear(s, scope+"/linear", true)
	nb, r := s.Dims[0], s.Dims[1]
	out := make([][]frame, nb)
	for n := range nb {
		out[n] = make([]frame, r)
		for i := range r {
			x := u.Data[(n*r+i)*6 : (n*r+i+1)*6]
			norm := math.Sqrt(1 + x[0]*x[0] + x[1]*x[1] + x[2]*x[2])
			a, b, c, d := 1/norm, x[0]/norm, x[1]/norm, x[2]/norm
			out[n][i] = frame{
				r: [3][3]float64{
					{a*a + b*b - c*c - d*d, 2 * (b*c - a*d), 2 * (b*d + a*c)},
					{2 * (b*c + a*d), a*a - b*b + c*c - d*d, 2 * (c*d - a*b)},
					{2 * (b*d - a*c), 2 * (c*d + a*b), a*a - b*b - c*c + d*d},
				},
				t: [3]float64{x[3], x[4], x[5]},
			}
		}
	}
	return out
}

// StructureModule is Algorithm 20 without side chains, weights shared by the nBlocks iterations; it
// returns s [B, R, Cs], the rotations [B, R, 3, 3] and the translations [B, R, 3].
func StructureModule(s, z reference.Tensor, p Params, c StructureSizes, nBlocks int) (sOut, rot, trans reference.Tensor) {
	nb, r := s.Dims[0], s.Dims[1]
	s = p.linear(p.norm(s, "layer_norm_s"), "linear_in", true)
	z = p.norm(z, "layer_norm_z")
	frames := make([][]frame, nb)
	for n := range frames {
		frames[n] = make([]frame, r)
		for i := range frames[n] {
			frames[n][i].r = [3][3]float64{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}}
		}
	}
	for range nBlocks {
		s = reference.Add(s, invariantPointAttention(s, z, frames, p, "ipa", c))
		s = p.norm(s, "layer_norm_ipa")
		t := reference.Map(p.linear(s, "transition/linear_1", true), reference.ReLU)
		t = reference.Map(p.linear(t, "transition/linear_2", true), reference.ReLU)
		s = p.norm(reference.Add(s, p.linear(t, "transition/linear_3", true)), "transition/layer_norm")
		update := backboneUpdate(s, p, "bb_update")
		for n := range frames {
			for i := range frames[n] {
				frames[n][i] = frames[n][i].compose(update[n][i])
			}
		}
	}
	rot, trans = reference.New(nb, r, 3, 3), reference.New(nb, r, 3)
	for n := range frames {
		for i, f := range frames[n] {
			for a := range 3 {
				trans.Set(f.t[a], n, i, a)
				for b := range 3 {
					rot.Set(f.r[a][b], n, i, a, b)
				}
			}
		}
	}
	return s, rot, trans
}
