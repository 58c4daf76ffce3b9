package gobackend

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/trainer/trainer/gobackend/kernels"
)

// fusedConvCases adds to convCases the layouts the fused GEMM meets in a training step: the kernel
// gradient's (input channels as the batch, rows adjacent in memory, a kernel larger than the output,
// kernel dilation standing for the stride), the input gradient's (kernel in/out channels swapped), and
// windows that cross every kind of padding.
func fusedConvCases() []convCase {
	nhwc := channelsLast(2)
	kgrad := backends.ConvolveAxesConfig{InputBatch: 3, InputChannels: 0, InputSpatial: []int{1, 2},
		KernelInputChannels: 0, KernelOutputChannels: 3, KernelSpatial: []int{1, 2},
		OutputBatch: 2, OutputChannels: 3, OutputSpatial: []int{0, 1}}
	dgrad := nhwc
	dgrad.KernelInputChannels, dgrad.KernelOutputChannels = 3, 2
	return append(convCases(),
		convCase{name: "kgrad-3x3-pad1", inDims: []int{3, 5, 5, 20}, kDims: []int{3, 5, 5, 7}, axes: kgrad, paddings: [][2]int{{1, 1}, {1, 1}}},
		convCase{name: "kgrad-stride2-as-dilation", inDims: []int{2, 7, 7, 16}, kDims: []int{2, 4, 4, 5}, axes: kgrad, kernelDilations: []int{2, 2}, paddings: [][2]int{{1, 0}, {1, 0}}},
		convCase{name: "dgrad-swapped-kernel", inDims: []int{2, 5, 4, 6}, kDims: []int{3, 3, 9, 6}, axes: dgrad, paddings: [][2]int{{2, 2}, {1, 2}}},
		// Runs of 16 input channels per kernel position in a K block that spans all nine (packed by run).
		convCase{name: "dgrad-swapped-kernel-wide", inDims: []int{2, 3, 3, 16}, kDims: []int{3, 3, 40, 16}, axes: dgrad, paddings: [][2]int{{1, 1}, {1, 1}}},
		convCase{name: "1x1-wide", inDims: []int{3, 4, 4, 40}, kDims: []int{1, 1, 40, 33}, axes: nhwc},
		convCase{name: "7x7-stride2-stem", inDims: []int{2, 12, 12, 3}, kDims: []int{7, 7, 3, 16}, axes: nhwc, strides: []int{2, 2}, paddings: [][2]int{{3, 3}, {3, 3}}},
		convCase{name: "all-padding-rows", inDims: []int{1, 2, 2, 3}, kDims: []int{3, 3, 3, 4}, axes: nhwc, paddings: [][2]int{{3, 3}, {2, 4}}},
		// Input gradients of strided convolutions: input dilation, so phases (and phases with no kernel
		// position, whose rows stay zero).
		convCase{name: "dgrad-stride2-3x3", inDims: []int{2, 4, 3, 5}, kDims: []int{3, 3, 6, 5}, axes: dgrad, inputDilations: []int{2, 2}, paddings: [][2]int{{1, 2}, {1, 1}}},
		convCase{name: "dgrad-stride2-1x1", inDims: []int{2, 3, 3, 4}, kDims: []int{1, 1, 3, 4}, axes: dgrad, inputDilations: []int{2, 2}, paddings: [][2]int{{0, 1}, {0, 1}}},
		convCase{name: "input-dilation-3x2-kernel-dilation", inDims: []int{1, 4, 5, 2}, kDims: []int{3, 2, 2, 3}, axes: nhwc, inputDilations: []int{3, 2}, kernelDilations: []int{2, 1}, strides: []int{1, 2}, paddings: [][2]int{{2, 3}, {-1, 2}}},
		convCase{name: "input-dilation-1d", inDims: []int{3, 7, 4}, kDims: []int{4, 4, 5}, axes: channelsLast(1), inputDilations: []int{3}, paddings: [][2]int{{2, 1}}},
		// Small feature maps, mostly padding: GEMMs per class of output positions (paddingClasses).
		convCase{name: "1x1-map-3x3-pad1", inDims: []int{2, 1, 1, 5}, kDims: []int{3, 3, 5, 6}, axes: nhwc, paddings: [][2]int{{1, 1}, {1, 1}}},
		convCase{name: "2x2-map-3x3-stride2", inDims: []int{2, 2, 2, 4}, kDims: []int{3, 3, 4, 6}, axes: nhwc, strides: []int{2, 2}, paddings: [][2]int{{1, 1}, {1, 1}}},
		convCase{name: "2x2-map-dgrad", inDims: []int{3, 2, 3, 6}, kDims: []int{3, 3, 7, 6}, axes: dgrad, paddings: [][2]int{{1, 1}, {1, 1}}},
		convCase{name: "kgrad-2x2-map", inDims: []int{3, 2, 2, 4}, kDims: []int{3, 2, 2, 5}, axes: kgrad, paddings: [][2]int{{1, 1}, {1, 1}}},
		convCase{name: "zero-channels", inDims: []int{2, 4, 4, 0}, kDims: []int{3, 3, 0, 2}, axes: nhwc, paddings: [][2]int{{1, 1}, {1, 1}}},
	)
}

// The fused convolution (float32, auto mode) matches the float64 definition on every case; the cases
// it applies to (output channels last: ungrouped, grouped or depthwise) must have run through it, and
// the others through the compositions.
func TestFusedConvMatchesReference(t *testing.T) {
	b := countCompiledOps(testBackend(t))
	rng := rand.New(rand.NewSource(61))
	for _, cc := range fusedConvCases() {
		t.Run(cc.name, func(t *testing.T) {
			x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
			want := refConv(x, k, cc)
			before := b.count(fusedConvOpType)
			got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
				x32, err := bb.ConvertDType(p[0], dtypes.Float32)
				if err != nil {
					return nil, err
				}
				k32, err := bb.ConvertDType(p[1], dtypes.Float32)
				if err != nil {
					return nil, err
				}
				o, err := bb.ConvGeneral(x32, k32, cc.axes, cc.strides, cc.paddings, cc.inputDilations, cc.kernelDilations, cc.groups, cc.batchGroups)
				if err != nil {
					return nil, err
				}
				o, err = bb.ConvertDType(o, dtypes.Float64)
				return []backends.Op{o}, err
			}, x, k)[0]
			assertClose(t, "float32 conv", got, want, 2e-6*float64(kernels.Prod(cc.kDims)))
			fused := b.count(fusedConvOpType) > before
			applies := cc.axes.OutputChannels == len(cc.inDims)-1
			if fused != applies {
				t.Fatalf("ran through the fused GEMM: %v, expected %v", fused, applies)
			}
		})
	}
}

// The fused convolution in float64 (no dtype conversions around it) matches the float64 definition to
// a few roundings on the cases it applies to, and simplego's own float64 ConvGeneral (but for batch
// groups, which simplego computes wrongly: see TestConvForward).
func TestFusedConvFloat64(t *testing.T) {
	b := countCompiledOps(testBackend(t))
	native := &Backend{Backend: simplegoOps(t).Backend, convMode: convNative, strictConv: true, im2colLimit: defaultIm2colLimit}
	rng := rand.New(rand.NewSource(62))
	for _, cc := range fusedConvCases() {
		if cc.axes.OutputChannels != len(cc.inDims)-1 {
			continue
		}
		t.Run(cc.name, func(t *testing.T) {
			x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
			want := refConv(x, k, cc)
			before := b.count(fusedConvOpType)
			got := runConv(t, b, cc, x, k)
			if b.count(fusedConvOpType) == before {
				t.Fatal("the float64 convolution did not run through the fused GEMM")
			}
			assertClose(t, "fused float64 conv vs reference", got, want, 1e-14*float64(kernels.Prod(cc.kDims)))
			if max(cc.batchGroups, 1) == 1 {
				assertClose(t, "fused float64 conv vs simplego", got, runConv(t, native, cc, x, k), 1e-14*float64(kernels.Prod(cc.kDims)))
			}
		})
	}
}

// specOf fills in a case's parameters as the builder does.
func specOf(cc convCase) kernels.ConvGemmSpec {
	S := len(cc.inDims) - 2
	spec := kernels.ConvGemmSpec{Axes: kernels.ConvAxes(cc.axes), Strides: fillOnes(cc.strides, S), KernelDilations: fillOnes(cc.kernelDilations, S),
		InputDilations: fillOnes(cc.inputDilations, S), Paddings: cc.paddings, Flip: make([]bool, S),
		ChannelGroups: cc.groups, BatchGroups: cc.batchGroups}
	if spec.Paddings == nil {
		spec.Paddings = make([][2]int, S)
	}
	return spec
}

// A kernel flipped by unit slices and a concatenation per axis (graphs/gomlxfix/vjp_conv.go's flipSpatial) is
// folded into the fused convolution at compile time: the convolution reads the original kernel
// reversed, and the result is the convolution with the flipped kernel.
func TestFoldKernelFlips(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(63))
	cc := convCase{name: "flipped", inDims: []int{2, 6, 5, 3}, kDims: []int{3, 2, 3, 4}, axes: channelsLast(2), paddings: [][2]int{{1, 1}, {1, 0}}}
	x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
	want := refConv(x, refReverse(k, 0, 1), cc)
	var conv backends.Op
	got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
		x32, err := bb.ConvertDType(p[0], dtypes.Float32)
		if err != nil {
			return nil, err
		}
		flipped, err := bb.ConvertDType(p[1], dtypes.Float32)
		if err != nil {
			return nil, err
		}
		for axis := range 2 {
			n := cc.kDims[axis]
			parts := make([]backends.Op, n)
			for i := range parts {
				starts, limits := make([]int, 4), slices.Clone(cc.kDims)
				starts[axis], limits[axis] = n-1-i, n-i
				if parts[i], err = bb.Slice(flipped, starts, limits, ones(4)); err != nil {
					return nil, err
				}
			}
			if flipped, err = bb.Concatenate(axis, parts...); err != nil {
				return nil, err
			}
		}
		if conv, err = bb.ConvGeneral(x32, flipped, cc.axes, nil, cc.paddings, nil, nil, 1, 1); err != nil {
			return nil, err
		}
		o, err := bb.ConvertDType(conv, dtypes.Float64)
		return []backends.Op{o}, err
	}, x, k)[0]
	assertClose(t, "conv with a folded flip", got, want, 1e-5)
	spec := nodeDataOf(conv.(*simplego.Node)).(*kernels.ConvGemmSpec)
	if fmt.Sprint(spec.Flip) != "[true true]" || nodeOpType(nodeInputsOf(conv.(*simplego.Node))[1]) != backends.OpTypeConvertDType {
		t.Fatalf("the flip was not folded: flip %v, kernel input %s", spec.Flip, nodeOpType(nodeInputsOf(conv.(*simplego.Node))[1]))
	}
}

// depthwiseCase is a convolution the direct depthwise kernels compute, with the kernel flip the
// fusion pass may fold in (flip: read the kernel reversed along every spatial axis).
type depthwiseCase struct {
	convCase
	flip       bool
	kernelGrad bool // The batch-grouped form, else the channel-grouped one.
}

// depthwiseCases covers the three convolutions of a depthwise layer's training step as they reach the
// backend (graphs/gomlxfix/vjp_conv.go): the forward, the input gradient (input dilation by the stride, the
// kernel flipped) and the kernel gradient (batch groups, the channels as the input's batch, kernel
// dilation standing for the stride); strides 1 and 2, symmetric and asymmetric padding, odd sizes,
// channel counts that use the 32-wide and 8-wide kernel blocks and the Go loop's tail, 1-D and 3-D.
func depthwiseCases() []depthwiseCase {
	kgrad := backends.ConvolveAxesConfig{InputBatch: 3, InputChannels: 0, InputSpatial: []int{1, 2},
		KernelInputChannels: 0, KernelOutputChannels: 3, KernelSpatial: []int{1, 2},
		OutputBatch: 2, OutputChannels: 3, OutputSpatial: []int{0, 1}}
	fwd := func(name string, in []int, k, stride, dil int, pads [][2]int) depthwiseCase {
		C := in[len(in)-1]
		S := len(in) - 2
		kd := append(append(make([]int, 0, S+2), fillWith(S, k)...), 1, C)
		return depthwiseCase{convCase: convCase{name: name, inDims: in, kDims: kd, axes: channelsLast(S), strides: fillWith(S, stride),
			kernelDilations: fillWith(S, dil), paddings: pads, groups: C}}
	}
	var cases []depthwiseCase
	for _, C := range []int{3, 8, 13, 45, 72} {
		cases = append(cases,
			fwd(fmt.Sprintf("fwd-3x3-same-C%d", C), []int{2, 7, 6, C}, 3, 1, 1, [][2]int{{1, 1}, {1, 1}}),
			fwd(fmt.Sprintf("fwd-3x3-stride2-C%d", C), []int{2, 7, 8, C}, 3, 2, 1, [][2]int{{1, 1}, {0, 1}}),
		)
	}
	cases = append(cases,
		fwd("fwd-5x5-stride2-even", []int{1, 10, 10, 16}, 5, 2, 1, [][2]int{{2, 2}, {2, 2}}),
		fwd("fwd-7x7-convnext", []int{2, 8, 8, 24}, 7, 1, 1, [][2]int{{3, 3}, {3, 3}}),
		fwd("fwd-3x3-dilation2", []int{1, 9, 9, 16}, 3, 1, 2, [][2]int{{2, 2}, {2, 2}}),
		fwd("fwd-valid", []int{2, 6, 5, 9}, 3, 1, 1, [][2]int{{0, 0}, {0, 0}}),
		fwd("fwd-kernel-larger-than-input", []int{1, 2, 3, 8}, 5, 1, 1, [][2]int{{2, 2}, {2, 2}}),
		fwd("fwd-1d", []int{3, 11, 20}, 3, 2, 1, [][2]int{{1, 1}}),
		fwd("fwd-3d", []int{1, 4, 5, 4, 12}, 3, 1, 1, [][2]int{{1, 1}, {0, 1}, {1, 0}}),
	)
	// Input gradients of the forward cases above (stride s: input dilation s; padding (k-1)·d - lo,
	// and the rest to reach the input's size), with the flipped kernel read in place.
	dgrad := func(name string, out []int, k, stride, dil int, pads [][2]int) depthwiseCase {
		c := fwd(name, out, k, 1, dil, pads)
		c.inputDilations = fillWith(len(out)-2, stride)
		c.flip = true
		return c
	}
	cases = append(cases,
		dgrad("dgrad-3x3-stride1", []int{2, 7, 6, 40}, 3, 1, 1, [][2]int{{1, 1}, {1, 1}}),
		dgrad("dgrad-3x3-stride2", []int{2, 4, 4, 40}, 3, 2, 1, [][2]int{{1, 2}, {1, 1}}),
		dgrad("dgrad-5x5-stride2", []int{1, 5, 5, 13}, 5, 2, 1, [][2]int{{2, 3}, {2, 3}}),
		dgrad("dgrad-3x3-stride2-odd", []int{2, 3, 4, 16}, 3, 2, 1, [][2]int{{1, 1}, {1, 2}}),
	)
	// Kernel gradients: input x as [N, H, W, C] read with the channels as the batch, the output gradient
	// [N, Ho, Wo, C] as the kernel, the forward stride as kernel dilation, the forward dilation as stride.
	kg := func(name string, x []int, vSp []int, stride, dil int, pads [][2]int) depthwiseCase {
		N, C := x[0], x[3]
		return depthwiseCase{kernelGrad: true, convCase: convCase{name: name, inDims: x, kDims: []int{N, vSp[0], vSp[1], C}, axes: kgrad,
			strides: []int{dil, dil}, kernelDilations: []int{stride, stride}, paddings: pads, batchGroups: C}}
	}
	cases = append(cases,
		kg("kgrad-3x3-stride1-C40", []int{2, 7, 6, 40}, []int{7, 6}, 1, 1, [][2]int{{1, 1}, {1, 1}}),
		kg("kgrad-3x3-stride2-C13", []int{3, 7, 8, 13}, []int{4, 4}, 2, 1, [][2]int{{1, 1}, {0, 1}}),
		kg("kgrad-3x3-stride2-C72", []int{2, 8, 8, 72}, []int{4, 4}, 2, 1, [][2]int{{1, 0}, {1, 0}}),
		kg("kgrad-7x7-C8", []int{2, 8, 8, 8}, []int{8, 8}, 1, 1, [][2]int{{3, 3}, {3, 3}}),
		kg("kgrad-3x3-dilation2-C16", []int{1, 9, 9, 16}, []int{9, 9}, 1, 2, [][2]int{{2, 2}, {2, 2}}),
	)
	flipped := kg("kgrad-flipped-stride2-C24", []int{2, 7, 7, 24}, []int{4, 4}, 2, 1, [][2]int{{1, 1}, {1, 1}})
	flipped.flip = true
	cases = append(cases, flipped)
	return cases
}

func fillWith(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}
