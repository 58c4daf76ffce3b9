package kernels

import (
	"fmt"
	"math/rand"
	"testing"
)

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
	kgrad := ConvAxes{InputBatch: 3, InputChannels: 0, InputSpatial: []int{1, 2},
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

// runDepthwise computes the case through runConvGemms in element type T, with the AVX2 kernels on or off.
func runDepthwise[T Float](t *testing.T, dc depthwiseCase, x, k tt, outDims []int, vec bool) tt {
	t.Helper()
	saved := hasDwAVX2
	hasDwAVX2 = vec && saved
	defer func() { hasDwAVX2 = saved }()
	spec := specOf(dc.convCase)
	for i := range spec.Flip {
		spec.Flip[i] = dc.flip
	}
	forward, kernelGrad := depthwiseApplies(x.dims, k.dims, outDims, spec)
	if forward == dc.kernelGrad || kernelGrad != dc.kernelGrad {
		t.Fatalf("depthwiseApplies: forward %v, kernel gradient %v; want the %s form", forward, kernelGrad, map[bool]string{false: "forward", true: "kernel-gradient"}[dc.kernelGrad])
	}
	conv := func(v []float64) []T {
		out := make([]T, len(v))
		for i, f := range v {
			out[i] = T(f)
		}
		return out
	}
	out := make([]T, Prod(outDims))
	for i := range out {
		out[i] = 7 // Stale values must be overwritten.
	}
	if !RunConv(conv(x.data), x.dims, conv(k.data), k.dims, outDims, spec, out) {
		t.Fatal("runConvGemms refused the layout")
	}
	got := newTT(outDims...)
	for i, v := range out {
		got.data[i] = float64(v)
	}
	return got
}

// The direct depthwise kernels (AVX2 and Go loops, float32 and float64) match the float64 definition on
// every form, stride, padding and channel count.
func TestDepthwiseConvMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(71))
	for _, dc := range depthwiseCases() {
		t.Run(dc.name, func(t *testing.T) {
			x, k := randTT(rng, dc.inDims...), randTT(rng, dc.kDims...)
			kRef := k
			if dc.flip {
				axes := dc.axes.KernelSpatial
				kRef = refReverse(k, axes...)
			}
			want := refConv(x, kRef, dc.convCase)
			taps := float64(Prod(dc.kDims) / dc.kDims[dc.axes.KernelOutputChannels] * max(dc.kDims[dc.axes.KernelInputChannels], 1))
			for _, vec := range []bool{true, false} {
				assertClose(t, fmt.Sprintf("float64, AVX2 %v", vec), runDepthwise[float64](t, dc, x, k, want.dims, vec), want, 1e-14*taps)
				assertClose(t, fmt.Sprintf("float32, AVX2 %v", vec), runDepthwise[float32](t, dc, x, k, want.dims, vec), want, 2e-6*taps)
			}
		})
	}
}

// BenchmarkDepthwiseConvs times depthwise convolutions of the depthwise nets' training steps at batch 8
// and 64 px (the forward, and the kernel gradient whose channels the workers share out); run with
// -cpu 1,2 to compare one core with two.
func BenchmarkDepthwiseConvs(b *testing.B) {
	_, _, kgrad := stepConvAxes()
	pad := func(p int) [][2]int { return [][2]int{{p, p}, {p, p}} }
	fwd := func(name string, dims []int, k int) depthwiseCase {
		C := dims[3]
		return depthwiseCase{convCase: convCase{name: name, inDims: dims, kDims: []int{k, k, 1, C}, axes: channelsLast(2),
			strides: []int{1, 1}, kernelDilations: []int{1, 1}, paddings: pad(k / 2), groups: C}}
	}
	kg := func(name string, dims []int, k int) depthwiseCase {
		return depthwiseCase{kernelGrad: true, convCase: convCase{name: name, inDims: dims, kDims: dims, axes: kgrad,
			strides: []int{1, 1}, kernelDilations: []int{1, 1}, paddings: pad(k / 2), batchGroups: dims[3]}}
	}
	cases := []depthwiseCase{
		fwd("fwd-3x3-32x32x32", []int{8, 32, 32, 32}, 3),
		fwd("fwd-3x3-16x16x144", []int{8, 16, 16, 144}, 3),
		kg("kgrad-3x3-32x32x32", []int{8, 32, 32, 32}, 3),
		kg("kgrad-3x3-32x32x96", []int{8, 32, 32, 96}, 3),
		kg("kgrad-3x3-16x16x144", []int{8, 16, 16, 144}, 3),
		kg("kgrad-3x3-16x16x192", []int{8, 16, 16, 192}, 3),
		kg("kgrad-3x3-8x8x384", []int{8, 8, 8, 384}, 3),
		kg("kgrad-5x5-16x16x240", []int{8, 16, 16, 240}, 5),
		kg("kgrad-7x7-16x16x192", []int{8, 16, 16, 192}, 7),
	}
	rng := rand.New(rand.NewSource(1))
	for _, dc := range cases {
		x, k := randTT(rng, dc.inDims...), randTT(rng, dc.kDims...)
		outDims := refConv(newTT(dc.inDims...), newTT(dc.kDims...), dc.convCase).dims
		spec := specOf(dc.convCase)
		xs, ks, out := make([]float32, len(x.data)), make([]float32, len(k.data)), make([]float32, Prod(outDims))
		for i, v := range x.data {
			xs[i] = float32(v)
		}
		for i, v := range k.data {
			ks[i] = float32(v)
		}
		b.Run(dc.name, func(b *testing.B) {
			for range b.N {
				if !RunConv(xs, x.dims, ks, k.dims, outDims, spec, out) {
					b.Fatal("RunConv refused the layout")
				}
			}
		})
	}
}
