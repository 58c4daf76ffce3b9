package gobackend

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	timage "github.com/gomlx/gomlx/pkg/core/tensors/images"
	"github.com/trainer/trainer/gobackend/internal/reftest"
)

// convCase is a ConvGeneral call with every parameter explicit (nil meaning "not given").
type convCase struct {
	name                            string
	inDims, kDims                   []int
	axes                            backends.ConvolveAxesConfig
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
func channelsLast(S int) backends.ConvolveAxesConfig {
	return backends.ConvolveAxesConfig(reftest.ChannelsLast(S))
}

func convCases() []convCase {
	nhwc := channelsLast(2)
	nchw := backends.ConvolveAxesConfig{ // Input NCHW, kernel OIHW, output in yet another order: [H, C, W, N].
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

func runConv(t *testing.T, b backends.Backend, cc convCase, x, k tt) tt {
	return runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
		o, err := bb.ConvGeneral(p[0], p[1], cc.axes, cc.strides, cc.paddings, cc.inputDilations, cc.kernelDilations, cc.groups, cc.batchGroups)
		return []backends.Op{o}, err
	}, x, k)[0]
}

func TestConvForward(t *testing.T) {
	b := testBackend(t)
	native := &Backend{Backend: b.Backend, convMode: convNative, strictConv: true, im2colLimit: defaultIm2colLimit}
	rng := rand.New(rand.NewSource(11))
	for _, cc := range convCases() {
		t.Run(cc.name, func(t *testing.T) {
			x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
			want := refConv(x, k, cc)
			for _, mode := range []convMode{convAuto, convIm2col, convCol2im} {
				mb := &Backend{Backend: b.Backend, convMode: mode, strictConv: true, im2colLimit: defaultIm2colLimit}
				assertClose(t, fmt.Sprintf("ConvGeneral mode %d", mode), runConv(t, mb, cc, x, k), want, 1e-12)
			}
			if cc.batchGroups > 1 {
				// simplego reads input batch (o/batchGroupCount)·(N/batchGroupCount)+n for output channel o instead
				// of (o/(Cout/batchGroupCount))·(N/batchGroupCount)+n: wrong unless Cout == batchGroupCount², and an
				// index-out-of-range panic otherwise. GoMLX's graph never emits batch groups (its grouped conv
				// gradient splits the groups), so the native conv is not run here.
				return
			}
			assertClose(t, "native ConvGeneral (sanitized parameters)", runConv(t, native, cc, x, k), want, 1e-12)
		})
	}
}

// The conv gradients through GoMLX's graph autodiff, which emits ConvGeneral with nil strides, input
// dilations (for strided convs), reversed kernels and per-group convolutions (grouped convs): all of
// those run through the im2col override (and Reverse, Pad), and in auto mode through the fused and
// depthwise convolutions (float64 here). Odd kernels only: GoMLX's input gradient
// (convVJPWrtX) is wrong for even kernel sizes, on every backend.
func TestConvGradients(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(12))
	for _, tc := range []struct {
		name          string
		xDims, kDims  []int
		conv          func(x, k *Node) *Node
		skipShortMode bool
	}{
		{"stride1", []int{2, 5, 5, 2}, []int{3, 3, 2, 3}, func(x, k *Node) *Node { return Convolve(x, k).Done() }, false},
		{"stride2-padsame", []int{2, 6, 5, 2}, []int{3, 3, 2, 3}, func(x, k *Node) *Node { return Convolve(x, k).Strides(2).PadSame().Done() }, false},
		{"stride2-nopad", []int{1, 7, 7, 2}, []int{3, 3, 2, 2}, func(x, k *Node) *Node { return Convolve(x, k).Strides(2).Done() }, false},
		{"padding-asym", []int{2, 5, 4, 2}, []int{3, 3, 2, 2}, func(x, k *Node) *Node {
			return Convolve(x, k).PaddingPerDim([][2]int{{1, 2}, {2, 0}}).Done()
		}, false},
		{"dilation2", []int{1, 7, 7, 2}, []int{3, 3, 2, 2}, func(x, k *Node) *Node { return Convolve(x, k).Dilations(2).PadSame().Done() }, false},
		{"depthwise", []int{2, 5, 5, 3}, []int{3, 3, 1, 3}, func(x, k *Node) *Node {
			return Convolve(x, k).ChannelGroupCount(3).PadSame().Done()
		}, false},
		{"grouped-stride2", []int{1, 6, 6, 4}, []int{3, 3, 2, 4}, func(x, k *Node) *Node {
			return Convolve(x, k).ChannelGroupCount(2).Strides(2).PadSame().Done()
		}, true},
		{"channels-first", []int{2, 2, 5, 6}, []int{3, 2, 3, 3}, func(x, k *Node) *Node {
			return Convolve(x, k).ChannelsAxis(timage.ChannelsFirst).Strides(2).PadSame().Done()
		}, true},
		{"1x1-stride2", []int{2, 5, 5, 3}, []int{1, 1, 3, 2}, func(x, k *Node) *Node { return Convolve(x, k).Strides(2).Done() }, true},
		// Maps smaller than the padded kernel: the fused convolution contracts only the kernel positions
		// that meet the input.
		{"1x1-map-padsame", []int{2, 1, 1, 3}, []int{3, 3, 3, 2}, func(x, k *Node) *Node { return Convolve(x, k).PadSame().Done() }, false},
		{"2x2-map-5x5-padsame", []int{2, 2, 2, 2}, []int{5, 5, 2, 3}, func(x, k *Node) *Node { return Convolve(x, k).PadSame().Done() }, false},
		{"2x2-map-stride2-padsame", []int{2, 2, 2, 2}, []int{3, 3, 2, 3}, func(x, k *Node) *Node { return Convolve(x, k).Strides(2).PadSame().Done() }, true},
	} {
		x, k := randTT(rng, tc.xDims...), randTT(rng, tc.kDims...)
		for _, mode := range []convMode{convIm2col, convCol2im, convAuto} {
			t.Run(fmt.Sprintf("%s/mode%d", tc.name, mode), func(t *testing.T) {
				if tc.skipShortMode && testing.Short() {
					t.Skip("short mode")
				}
				mb := &Backend{Backend: b.Backend, convMode: mode, strictConv: true, im2colLimit: defaultIm2colLimit}
				checkGradient(t, mb, func(in []*Node) *Node { return tc.conv(in[0], in[1]) }, []tt{x, k}, 0, 1)
			})
		}
	}
}

// The override must agree with the native conv on the float32 MNIST shapes too (and gradients run).
func TestConvFloat32MatchesNative(t *testing.T) {
	b := testBackend(t)
	// simplego's own ConvGeneral: float32 ConvGeneral nodes on a fast-ops backend run the fused GEMM.
	native := &Backend{Backend: simplegoOps(t).Backend, convMode: convNative, strictConv: true, im2colLimit: defaultIm2colLimit}
	rng := rand.New(rand.NewSource(13))
	x, k := randTT(rng, 4, 12, 12, 3), randTT(rng, 3, 3, 3, 8)
	fn := func(in []*Node) []*Node {
		x32, k32 := ConvertDType(in[0], dtypes.Float32), ConvertDType(in[1], dtypes.Float32)
		y := Convolve(x32, k32).Strides(2).PadSame().Done()
		loss := ReduceAllSum(Mul(y, y))
		g := Gradient(loss, x32, k32)
		return []*Node{ConvertDType(y, dtypes.Float64), ConvertDType(g[0], dtypes.Float64), ConvertDType(g[1], dtypes.Float64)}
	}
	got, want := runGraph(t, b, fn, x, k), runGraph(t, native, fn, x, k)
	for i := range got {
		assertClose(t, fmt.Sprintf("output %d", i), got[i], want[i], 1e-5)
	}
}

// Convolutions too large for im2col fall back to simplego's, with nil strides and dilations filled in
// (simplego's grouped conv indexes nil dilations in a worker goroutine, killing the process).
func TestConvNativeFallback(t *testing.T) {
	shared := testBackend(t)
	b := &Backend{Backend: shared.Backend, convMode: shared.convMode, fastDot: shared.fastDot, strictConv: shared.strictConv,
		im2colLimit: 0}
	rng := rand.New(rand.NewSource(14))
	cc := convCase{name: "grouped-nil-dilations", inDims: []int{2, 5, 5, 4}, kDims: []int{3, 3, 2, 6}, axes: channelsLast(2), groups: 2}
	x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
	assertClose(t, "fallback ConvGeneral", runConv(t, b, cc, x, k), refConv(x, k, cc), 1e-12)
}

// The conv= and im2col_limit= options choose the convolution algorithm and the fallback size, and
// refuse what they do not know, naming the option.
func TestConvOptions(t *testing.T) {
	b, err := newBackend("conv=col2im,im2col_limit=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if b.convMode != convCol2im || b.im2colLimit != 1000 || !strings.Contains(b.config, "conv=col2im,im2col_limit=1000") {
		t.Errorf("conv=col2im,im2col_limit=1000: mode %d, limit %d, config %q", b.convMode, b.im2colLimit, b.config)
	}
	d, err := newBackend("")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Finalize()
	if d.convMode != convAuto || d.im2colLimit != defaultIm2colLimit {
		t.Errorf("default: mode %d, limit %d; want auto and %d", d.convMode, d.im2colLimit, defaultIm2colLimit)
	}
	for _, bad := range []string{"conv=winograd", "im2col_limit=-1", "im2col_limit=many"} {
		if _, err := newBackend(bad); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]+"=") {
			t.Errorf("%s: error %v, want one naming the option", bad, err)
		}
	}
}
