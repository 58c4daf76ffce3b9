package kernels

// Test support: a small float64 tensor type with plain-loop references (DotGeneral, ConvGeneral,
// Reverse) that the kernels are checked against.

import (
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/trainer/trainer/gobackend/internal/reftest"
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
func forEach(dims []int, fn func(idx []int)) { reftest.ForEach(dims, fn) }

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

// refConv is the float64 reference convolution (reftest.Convolve).
func refConv(x, k tt, cc convCase) tt {
	dims, data := reftest.Convolve(x.dims, x.data, k.dims, k.data, reftest.Conv{Axes: reftest.ConvAxes(cc.axes),
		Strides: cc.strides, Paddings: cc.paddings, InputDilations: cc.inputDilations,
		KernelDilations: cc.kernelDilations, Groups: cc.groups, BatchGroups: cc.batchGroups})
	return tt{dims: dims, data: data}
}

// channelsLast returns the NHWC / HWIO axes configuration for S spatial axes.
func channelsLast(S int) ConvAxes { return ConvAxes(reftest.ChannelsLast(S)) }

// stepConvAxes are the axes of a 2-D channels-last training step's three convolutions: the forward,
// the input gradient (the kernel's in/out channel axes swapped) and the kernel gradient (the input's
// channels as the batch, the output gradient as the kernel).
func stepConvAxes() (fwd, dgrad, kgrad ConvAxes) {
	fwd = channelsLast(2)
	dgrad = fwd
	dgrad.KernelInputChannels, dgrad.KernelOutputChannels = 3, 2
	kgrad = ConvAxes{InputBatch: 3, InputChannels: 0, InputSpatial: []int{1, 2},
		KernelInputChannels: 0, KernelOutputChannels: 3, KernelSpatial: []int{1, 2},
		OutputBatch: 2, OutputChannels: 3, OutputSpatial: []int{0, 1}}
	return fwd, dgrad, kgrad
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
