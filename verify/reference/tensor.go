// Package reference is a float64 reference of every op the nets use: plain loops over NHWC activations
// and HWIO kernels, written to be obviously correct rather than fast. The op checks of package verify
// compare GoMLX graphs against it, and its central finite differences are the gradients they trust.
package reference

import (
	"fmt"
	"math"
)

// Tensor is a dense row-major float64 array.
type Tensor struct {
	Dims []int
	Data []float64
}

// New returns a zero tensor of the given dims.
func New(dims ...int) Tensor {
	return Tensor{Dims: append([]int(nil), dims...), Data: make([]float64, size(dims))}
}

// FromData wraps data (not copied) as a tensor of the given dims; it panics if the sizes differ.
func FromData(data []float64, dims ...int) Tensor {
	if len(data) != size(dims) {
		panic(fmt.Sprintf("reference.FromData: %d values for dims %v", len(data), dims))
	}
	return Tensor{Dims: append([]int(nil), dims...), Data: data}
}

func size(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// Size is the number of elements.
func (t Tensor) Size() int { return len(t.Data) }

// Clone returns a deep copy.
func (t Tensor) Clone() Tensor {
	return Tensor{Dims: append([]int(nil), t.Dims...), Data: append([]float64(nil), t.Data...)}
}

// Reshape returns the same data under new dims (a view).
func (t Tensor) Reshape(dims ...int) Tensor { return FromData(t.Data, dims...) }

// offset is the flat index of idx.
func (t Tensor) offset(idx []int) int {
	if len(idx) != len(t.Dims) {
		panic(fmt.Sprintf("reference: index %v into a rank-%d tensor", idx, len(t.Dims)))
	}
	off := 0
	for i, d := range t.Dims {
		if idx[i] < 0 || idx[i] >= d {
			panic(fmt.Sprintf("reference: index %v out of dims %v", idx, t.Dims))
		}
		off = off*d + idx[i]
	}
	return off
}

// At returns the element at idx.
func (t Tensor) At(idx ...int) float64 { return t.Data[t.offset(idx)] }

// Set stores v at idx.
func (t Tensor) Set(v float64, idx ...int) { t.Data[t.offset(idx)] = v }

// Map applies f to every element.
func Map(t Tensor, f func(float64) float64) Tensor {
	out := New(t.Dims...)
	for i, v := range t.Data {
		out.Data[i] = f(v)
	}
	return out
}

// Dot is Σ a_i·b_i over the flat data (the linear functionals the gradient checks differentiate).
func Dot(a, b Tensor) float64 {
	if len(a.Data) != len(b.Data) {
		panic(fmt.Sprintf("reference.Dot: sizes %d and %d", len(a.Data), len(b.Data)))
	}
	s := 0.0
	for i := range a.Data {
		s += a.Data[i] * b.Data[i]
	}
	return s
}

// Add is a + b elementwise (a residual connection).
func Add(a, b Tensor) Tensor {
	if len(a.Data) != len(b.Data) {
		panic(fmt.Sprintf("reference.Add: dims %v and %v", a.Dims, b.Dims))
	}
	out := New(a.Dims...)
	for i := range a.Data {
		out.Data[i] = a.Data[i] + b.Data[i]
	}
	return out
}

// Mul is a·b elementwise (dropout with its mask of 0 and 1/(1−rate)).
func Mul(a, b Tensor) Tensor {
	if len(a.Data) != len(b.Data) {
		panic(fmt.Sprintf("reference.Mul: dims %v and %v", a.Dims, b.Dims))
	}
	out := New(a.Dims...)
	for i := range a.Data {
		out.Data[i] = a.Data[i] * b.Data[i]
	}
	return out
}

// LastAxis splits dims into (rows, last): the rows of a tensor over its last axis, and their width.
func LastAxis(dims []int) (rows, last int) {
	last = dims[len(dims)-1]
	return size(dims) / last, last
}

// Errors compares got against want elementwise: the largest absolute difference, and the largest
// relative one, |got−want| / max(|want|, floor) with floor = 1e-3·max|want| (so elements near zero
// are judged on the tensor's scale, not their own). NaNs count as infinite errors.
func Errors(got, want []float64) (maxAbs, maxRel float64) {
	if len(got) != len(want) {
		return math.Inf(1), math.Inf(1)
	}
	scale := 0.0
	for _, w := range want {
		scale = max(scale, math.Abs(w))
	}
	floor := max(1e-3*scale, 1e-300)
	for i := range got {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			return math.Inf(1), math.Inf(1)
		}
		maxAbs = max(maxAbs, d)
		maxRel = max(maxRel, d/max(math.Abs(want[i]), floor))
	}
	return maxAbs, maxRel
}
