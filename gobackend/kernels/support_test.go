package kernels

// Test support: a small float64 tensor type with plain-loop references (DotGeneral, ConvGeneral,
// Reverse) that the kernels are checked against.

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// tt is a float64 tensor for references.
type tt struct {
	dims []int
	data []float64
}

func newTT(dims ...int) tt {
	return tt{dims: slices.Clone(dims), data: make([]float64, Prod(dims))}
}

// randTT fills with values in [-1, 1).
func randTT(rng *rand.Rand, dims ...int) tt {
	t := newTT(dims...)
	for i := range t.data {
		t.data[i] = 2*rng.Float64() - 1
	}
	return t
}

func (t tt) strides() []int {
	s := make([]int, len(t.dims))
	acc := 1
	for a := len(t.dims) - 1; a >= 0; a-- {
		s[a] = acc
		acc *= t.dims[a]
	}
	return s
}

func (t tt) flat(idx []int) int {
	f := 0
	for a, s := range t.strides() {
		f += idx[a] * s
	}
	return f
}

// forEach calls fn with every multi-index of dims in row-major order.
func forEach(dims []int, fn func(idx []int)) {
	idx := make([]int, len(dims))
	if Prod(dims) == 0 {
		return
	}
	for {
		fn(idx)
		a := len(dims) - 1
		for ; a >= 0; a-- {
			idx[a]++
			if idx[a] < dims[a] {
				break
			}
			idx[a] = 0
		}
		if a < 0 {
			return
		}
	}
}

// assertClose fails unless got and want have the same dims and max|got-want| <= tol·max(1, max|want|).
func assertClose(t *testing.T, what string, got, want tt, tol float64) {
	t.Helper()
	if !slices.Equal(got.dims, want.dims) {
		t.Fatalf("%s: dims %v, want %v", what, got.dims, want.dims)
	}
	maxDiff, maxWant := 0.0, 1.0
	at := -1
	for i := range want.data {
		if d := math.Abs(got.data[i] - want.data[i]); d > maxDiff || math.IsNaN(d) {
			maxDiff, at = d, i
		}
		maxWant = max(maxWant, math.Abs(want.data[i]))
	}
	if maxDiff > tol*maxWant || math.IsNaN(maxDiff) {
		t.Fatalf("%s: max |diff| %g at flat %d (got %g, want %g), tolerance %g", what, maxDiff, at, got.data[at], want.data[at], tol*maxWant)
	}
}

// convCase is a ConvGeneral call with every parameter explicit (nil meaning "not given").
type convCase struct {
	name                            string
	inDims, kDims                   []int
	axes                            ConvAxes
	strides                         []int
	paddings                        [][2]int
	inputDilations, kernelDilations []int
	groups, batchGroups             int
}

// refConv is XLA's (and JAX's) convolution on float64, written as the definition: output channel o
// belongs to channel group o/(Cout/G) and to batch group j = o/(Cout/BG), which reads input batch
// j*(N/BG)+n; the input is dilated then padded (negative padding crops); the kernel is dilated.
func refConv(x, k tt, cc convCase) tt {
	a := cc.axes
	S := len(a.InputSpatial)
	get := func(s []int, i, def int) int {
		if len(s) == 0 {
			return def
		}
		return s[i]
	}
	G, BG := max(cc.groups, 1), max(cc.batchGroups, 1)
	N, Cout, Cg := x.dims[a.InputBatch], k.dims[a.KernelOutputChannels], k.dims[a.KernelInputChannels]
	outDims := make([]int, S+2)
	outDims[a.OutputBatch], outDims[a.OutputChannels] = N/BG, Cout
	for i := range S {
		inDim := (x.dims[a.InputSpatial[i]]-1)*get(cc.inputDilations, i, 1) + 1
		var pad [2]int
		if cc.paddings != nil {
			pad = cc.paddings[i]
		}
		kDim := (k.dims[a.KernelSpatial[i]]-1)*get(cc.kernelDilations, i, 1) + 1
		outDims[a.OutputSpatial[i]] = (inDim+pad[0]+pad[1]-kDim)/get(cc.strides, i, 1) + 1
	}
	out := newTT(outDims...)
	kSpatial := make([]int, S)
	for i := range S {
		kSpatial[i] = k.dims[a.KernelSpatial[i]]
	}
	xIdx, kIdx := make([]int, S+2), make([]int, S+2)
	forEach(outDims, func(oIdx []int) {
		o := oIdx[a.OutputChannels]
		g, j := o/(Cout/G), o/(Cout/BG)
		xIdx[a.InputBatch] = j*(N/BG) + oIdx[a.OutputBatch]
		kIdx[a.KernelOutputChannels] = o
		sum := 0.0
		forEach(kSpatial, func(kPos []int) {
			for i := range S {
				var lo int
				if cc.paddings != nil {
					lo = cc.paddings[i][0]
				}
				id := get(cc.inputDilations, i, 1)
				pos := oIdx[a.OutputSpatial[i]]*get(cc.strides, i, 1) + kPos[i]*get(cc.kernelDilations, i, 1) - lo
				if pos < 0 || pos%id != 0 || pos/id >= x.dims[a.InputSpatial[i]] {
					return
				}
				xIdx[a.InputSpatial[i]] = pos / id
				kIdx[a.KernelSpatial[i]] = kPos[i]
			}
			for ci := range Cg {
				xIdx[a.InputChannels] = g*Cg + ci
				kIdx[a.KernelInputChannels] = ci
				sum += x.data[x.flat(xIdx)] * k.data[k.flat(kIdx)]
			}
		})
		out.data[out.flat(oIdx)] = sum
	})
	return out
}

// channelsLast returns the NHWC / HWIO axes configuration for S spatial axes.
func channelsLast(S int) ConvAxes {
	sp := func(from int) []int {
		s := make([]int, S)
		for i := range s {
			s[i] = from + i
		}
		return s
	}
	return ConvAxes{
		InputBatch: 0, InputSpatial: sp(1), InputChannels: S + 1,
		KernelSpatial: sp(0), KernelInputChannels: S, KernelOutputChannels: S + 1,
		OutputBatch: 0, OutputSpatial: sp(1), OutputChannels: S + 1,
	}
}

func convCases() []convCase {
	nhwc := channelsLast(2)
	nchw := ConvAxes{ // Input NCHW, kernel OIHW, output in yet another order: [H, C, W, N].
		InputBatch: 0, InputChannels: 1, InputSpatial: []int{2, 3},
		KernelOutputChannels: 0, KernelInputChannels: 1, KernelSpatial: []int{2, 3},
		OutputSpatial: []int{0, 2}, OutputChannels: 1, OutputBatch: 3,
	}
	return []convCase{
		{name: "nhwc", inDims: []int{2, 6, 5, 3}, kDims: []int{3, 3, 3, 4}, axes: nhwc, strides: []int{1, 1}},
		{name: "nil-strides-padded", inDims: []int{2, 5, 5, 3}, kDims: []int{3, 3, 3, 2}, axes: nhwc, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "stride2-pad", inDims: []int{2, 7, 6, 2}, kDims: []int{3, 3, 2, 3}, axes: nhwc, strides: []int{2, 2}, paddings: [][2]int{{1, 1}, {0, 1}}},
		{name: "nchw-permuted-out", inDims: []int{2, 3, 6, 5}, kDims: []int{4, 3, 3, 2}, axes: nchw, strides: []int{2, 1}, paddings: [][2]int{{1, 0}, {1, 1}}},
		{name: "input-dilation", inDims: []int{1, 4, 4, 2}, kDims: []int{3, 3, 2, 3}, axes: nhwc, inputDilations: []int{2, 2}, paddings: [][2]int{{2, 2}, {2, 1}}},
		{name: "kernel-dilation", inDims: []int{2, 7, 7, 2}, kDims: []int{3, 3, 2, 3}, axes: nhwc, kernelDilations: []int{2, 1}, paddings: [][2]int{{2, 2}, {1, 1}}},
		{name: "negative-padding", inDims: []int{1, 7, 6, 2}, kDims: []int{3, 3, 2, 2}, axes: nhwc, paddings: [][2]int{{-1, 0}, {-1, -1}}},
		{name: "kernel-larger-than-output", inDims: []int{3, 6, 6, 2}, kDims: []int{5, 4, 2, 3}, axes: nhwc},
		{name: "groups2", inDims: []int{2, 5, 5, 4}, kDims: []int{3, 3, 2, 6}, axes: nhwc, groups: 2, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "depthwise", inDims: []int{2, 5, 5, 3}, kDims: []int{3, 3, 1, 3}, axes: nhwc, groups: 3, strides: []int{2, 2}, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "depthwise-multiplier2", inDims: []int{2, 5, 4, 3}, kDims: []int{3, 3, 1, 6}, axes: nhwc, groups: 3},
		{name: "batch-groups", inDims: []int{4, 5, 5, 2}, kDims: []int{3, 3, 2, 6}, axes: nhwc, batchGroups: 2},
		{name: "batch-groups-cout=bg", inDims: []int{3, 4, 4, 2}, kDims: []int{2, 2, 2, 3}, axes: nhwc, batchGroups: 3},
		{name: "1d", inDims: []int{2, 9, 3}, kDims: []int{3, 3, 2}, axes: channelsLast(1), strides: []int{2}, paddings: [][2]int{{1, 1}}},
		{name: "3d", inDims: []int{1, 4, 5, 4, 2}, kDims: []int{2, 3, 2, 2, 2}, axes: channelsLast(3), strides: []int{1, 2, 1}},
	}
}

func refReverse(x tt, axes ...int) tt {
	out := newTT(x.dims...)
	src := make([]int, len(x.dims))
	forEach(x.dims, func(idx []int) {
		copy(src, idx)
		for _, a := range axes {
			src[a] = x.dims[a] - 1 - idx[a]
		}
		out.data[out.flat(idx)] = x.data[x.flat(src)]
	})
	return out
}

func fillOnes(values []int, n int) []int {
	if len(values) == 0 {
		return ones(n)
	}
	return slices.Clone(values)
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}
