package gobackend

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
)

// trimAxis finds the kernel and output positions that meet real input, and the paddings of the
// smaller convolution; it declines where nothing meets real input or a padding would turn negative.
func TestConvTrimAxis(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		in, k, out, s, kd, d int
		pad                  [2]int
		want                 convAxisTrim
		ok                   bool
	}{
		{"1x1 map, 3x3 pad 1: centre only", 1, 3, 1, 1, 1, 1, [2]int{1, 1}, convAxisTrim{kLo: 1, kHi: 1, oLo: 0, oHi: 0}, true},
		{"2x2 map, 5x5 pad 2: the middle 3", 2, 5, 2, 1, 1, 1, [2]int{2, 2}, convAxisTrim{kLo: 1, kHi: 3, oLo: 0, oHi: 1, padLow: 1, padHigh: 1}, true},
		{"2x2 map, 3x3 pad 1: every position", 2, 3, 2, 1, 1, 1, [2]int{1, 1}, convAxisTrim{kLo: 0, kHi: 2, oLo: 0, oHi: 1, padLow: 1, padHigh: 1}, true},
		{"2x2 map, 3x3 stride 2 pad 1: positions 1, 2", 2, 3, 1, 2, 1, 1, [2]int{1, 1}, convAxisTrim{kLo: 1, kHi: 2, oLo: 0, oHi: 0}, true},
		// The kernel gradient of the first: "input" 1x1, "kernel" the 1x1 output gradient, output 3 taps.
		{"kernel gradient of a 1x1 map", 1, 1, 3, 1, 1, 1, [2]int{1, 1}, convAxisTrim{kLo: 0, kHi: 0, oLo: 1, oHi: 1}, true},
		{"input dilation: holes are not input", 2, 3, 2, 1, 1, 3, [2]int{0, 0}, convAxisTrim{kLo: 0, kHi: 2, oLo: 0, oHi: 1}, true},
		{"input dilation, padded", 2, 3, 4, 1, 1, 3, [2]int{1, 1}, convAxisTrim{kLo: 0, kHi: 2, oLo: 0, oHi: 3, padLow: 1, padHigh: 1}, true},
		{"only padding", 1, 1, 2, 1, 1, 1, [2]int{2, -1}, convAxisTrim{}, false},
	} {
		p := &convParams{inputSpatial: []int{tc.in}, kernelSpatial: []int{tc.k}, outSpatial: []int{tc.out}, strides: []int{tc.s},
			kernelDilations: []int{tc.kd}, inputDilations: []int{tc.d}, paddings: [][2]int{tc.pad}}
		got, ok := p.trimAxis(0)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("%s: %+v ok=%v, want %+v ok=%v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// Convolutions whose kernel or output positions meet only padding (small maps under large padded
// kernels, forward and kernel-gradient shaped, NHWC and permuted layouts, strided, dilated, grouped)
// give the definition's values, float64, in the default mode, which trims them; a kernel given as a
// spatial flip in the form the fused convolution folds (the input gradient's) stays folded where the
// convolution is fused (channels last): the compiled graph has no more Concatenate nodes than with
// the plain kernel.
func TestConvTrimmedMatchesReference(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(31))
	nhwc := channelsLast(2)
	nchw := backends.ConvolveAxesConfig{
		InputBatch: 0, InputChannels: 1, InputSpatial: []int{2, 3},
		KernelOutputChannels: 0, KernelInputChannels: 1, KernelSpatial: []int{2, 3},
		OutputSpatial: []int{0, 2}, OutputChannels: 1, OutputBatch: 3,
	}
	for _, cc := range []convCase{
		{name: "1x1 map 3x3 pad 1", inDims: []int{2, 1, 1, 3}, kDims: []int{3, 3, 3, 4}, axes: nhwc, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "2x2 map 5x5 pad 2", inDims: []int{2, 2, 2, 3}, kDims: []int{5, 5, 3, 2}, axes: nhwc, paddings: [][2]int{{2, 2}, {2, 2}}},
		{name: "2x2 map 3x3 stride 2 pad 1", inDims: []int{2, 2, 2, 3}, kDims: []int{3, 3, 3, 2}, axes: nhwc, strides: []int{2, 2}, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "kernel-gradient shaped: 1x1 kernel, 3 outputs of padding and 1 real", inDims: []int{3, 1, 1, 2}, kDims: []int{1, 1, 2, 4}, axes: nhwc, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "kernel-gradient shaped, output taps padded unevenly", inDims: []int{2, 2, 1, 2}, kDims: []int{2, 1, 2, 3}, axes: nhwc, paddings: [][2]int{{2, 1}, {0, 3}}},
		{name: "nchw permuted output", inDims: []int{2, 3, 1, 2}, kDims: []int{4, 3, 3, 3}, axes: nchw, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "kernel dilation", inDims: []int{1, 2, 2, 2}, kDims: []int{3, 3, 2, 2}, axes: nhwc, kernelDilations: []int{2, 2}, paddings: [][2]int{{2, 2}, {2, 2}}},
		{name: "groups", inDims: []int{2, 1, 1, 4}, kDims: []int{3, 3, 2, 6}, axes: nhwc, groups: 2, paddings: [][2]int{{1, 1}, {1, 1}}},
		{name: "1d", inDims: []int{2, 1, 3}, kDims: []int{3, 3, 2}, axes: channelsLast(1), paddings: [][2]int{{1, 1}}},
	} {
		unflippedConcats := 0 // The output's padding is concatenated.
		for _, flip := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/flipped=%v", cc.name, flip), func(t *testing.T) {
				x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
				want := refConv(x, k, cc)
				if flip { // The kernel is passed as the spatial flip of its flip, flipSpatial's form.
					k = flipTT(k, cc.axes.KernelSpatial)
				}
				counted := countCompiledOps(b)
				got := runOps(t, counted, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
					kernel := p[1]
					if flip {
						for _, axis := range cc.axes.KernelSpatial {
							kernel = flipForTest(t, bb, kernel, axis)
						}
					}
					o, err := bb.ConvGeneral(p[0], kernel, cc.axes, cc.strides, cc.paddings, cc.inputDilations, cc.kernelDilations, cc.groups, cc.batchGroups)
					return []backends.Op{o}, err
				}, x, k)[0]
				assertClose(t, "trimmed ConvGeneral", got, want, 1e-12)
				n := counted.countReachable(backends.OpTypeConcatenate)
				if !flip {
					unflippedConcats = n
				} else if fused := cc.axes.OutputChannels == len(cc.inDims)-1; fused && n != unflippedConcats {
					t.Errorf("%d Concatenate nodes left, %d without the flip: the kernel flip was not folded", n, unflippedConcats)
				}
			})
		}
	}
}

// flipForTest reverses x along axis as graphs/gomlxfix's flipSpatial does: a Concatenate of unit Slices.
func flipForTest(t *testing.T, b backends.Builder, x backends.Op, axis int) backends.Op {
	t.Helper()
	shape, err := b.OpShape(x)
	if err != nil {
		t.Fatal(err)
	}
	n := shape.Dimensions[axis]
	if n == 1 {
		return x
	}
	parts := make([]backends.Op, n)
	for j := range parts {
		starts, limits := make([]int, shape.Rank()), slices.Clone(shape.Dimensions)
		starts[axis], limits[axis] = n-1-j, n-j
		if parts[j], err = b.Slice(x, starts, limits, ones(shape.Rank())); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Concatenate(axis, parts...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// flipTT reverses t along the axes.
func flipTT(t tt, axes []int) tt {
	out := newTT(t.dims...)
	src := make([]int, len(t.dims))
	forEach(t.dims, func(idx []int) {
		copy(src, idx)
		for _, a := range axes {
			src[a] = t.dims[a] - 1 - idx[a]
		}
		out.data[out.flat(idx)] = t.data[t.flat(src)]
	})
	return out
}
