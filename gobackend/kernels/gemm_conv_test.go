package kernels

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"testing"
)

// fusedConvCases adds to convCases the layouts the fused GEMM meets in a training step: the kernel
// gradient's (input channels as the batch, rows adjacent in memory, a kernel larger than the output,
// kernel dilation standing for the stride), the input gradient's (kernel in/out channels swapped), and
// windows that cross every kind of padding.
func fusedConvCases() []convCase {
	nhwc, dgrad, kgrad := stepConvAxes()
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

// specOf fills in a case's parameters as the builder does.
func specOf(cc convCase) ConvGemmSpec {
	S := len(cc.inDims) - 2
	spec := ConvGemmSpec{Axes: cc.axes, Strides: fillOnes(cc.strides, S), KernelDilations: fillOnes(cc.kernelDilations, S),
		InputDilations: fillOnes(cc.inputDilations, S), Paddings: cc.paddings, Flip: make([]bool, S),
		ChannelGroups: cc.groups, BatchGroups: cc.batchGroups}
	if spec.Paddings == nil {
		spec.Paddings = make([][2]int, S)
	}
	return spec
}

// The convolution operand packs exactly the im2col values (zeros in the padding) for every row order
// and panel width, across block boundaries that split rows and contracting indices, in every phase of
// an input-dilated convolution and every group of a grouped one.
func TestConvOperandPacking(t *testing.T) {
	rng := rand.New(rand.NewSource(62))
	for i, cc := range fusedConvCases() {
		if cc.axes.OutputChannels != len(cc.inDims)-1 {
			continue
		}
		x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
		want := refConv(x, k, cc) // Only for the output dims.
		probs, ok := newConvGemms(toF32(x), cc.inDims, toF32(k), cc.kDims, want.dims, specOf(cc))
		if !ok {
			t.Fatalf("%s: newConvGemms refused a layout it handles", cc.name)
		}
		for _, p := range probs {
			op := p.lhs.(*convOperand[float32])
			for _, w := range []int{1, 6, 14} {
				i0, i1 := rng.Intn(p.m), p.m
				k0 := rng.Intn(p.k)
				k1 := k0 + 1 + rng.Intn(p.k-k0)
				dst := make([]float32, ((i1-i0+w-1)/w)*w*(k1-k0))
				for j := range dst {
					dst[j] = 7 // Stale values must be overwritten.
				}
				op.pack(dst, 0, i0, i1, k0, k1, w)
				for r := i0; r < ((i1-i0+w-1)/w)*w+i0; r++ {
					for kk := k0; kk < k1; kk++ {
						q, rr := (r-i0)/w, (r-i0)%w
						got := dst[q*(k1-k0)*w+(kk-k0)*w+rr]
						var want float32
						if r < i1 && op.valid(r, kk) {
							want = op.data[op.rowBase[r]+op.kOff[kk]]
						}
						if got != want {
							t.Fatalf("%d %s w=%d: A(%d, %d) packed %v, want %v", i, cc.name, w, r, kk, got, want)
						}
					}
				}
			}
		}
	}
}

// A fused convolution's GEMM tables are built once per node and dims and reused: running the same spec
// again on other tensors (and other dims) gives each time the definition's result.
func TestConvPlansReused(t *testing.T) {
	rng := rand.New(rand.NewSource(64))
	cases := fusedConvCases()
	for _, cc := range []convCase{cases[2], cases[len(cases)-5]} {
		spec := specOf(cc)
		spec.Plans = &sync.Map{}
		for round := range 3 {
			x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
			want := refConv(x, k, cc)
			out := make([]float64, Prod(want.dims))
			if !RunConv(x.data, x.dims, k.data, k.dims, want.dims, spec, out) {
				t.Fatalf("%s: layout refused", cc.name)
			}
			got := newTT(want.dims...)
			copy(got.data, out)
			assertClose(t, fmt.Sprintf("%s round %d", cc.name, round), got, want, 1e-13)
		}
		n := 0
		spec.Plans.Range(func(_, _ any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("%s: %d plans kept, want 1", cc.name, n)
		}
	}
}

// The kernel's direct form (A read in place: whole-window panels of a convolution's input) gives the
// packed form's bits on every fused-convolution case, and did read panels in place, a last panel of
// fewer rows than the tile among them.
func TestConvDirectPanelsMatchPacked(t *testing.T) {
	kern := defaultKernelOf[float32]()
	if kern.direct == nil {
		t.Skip("the default kernel has no direct form on this CPU")
	}
	packedOnly := *kern
	packedOnly.direct = nil
	rng := rand.New(rand.NewSource(65))
	anyDirect, edgeDirect := false, false
	for _, cc := range append(fusedConvCases(), convCase{name: "interior-heavy", inDims: []int{2, 12, 12, 16},
		kDims: []int{3, 3, 16, 24}, axes: channelsLast(2), paddings: [][2]int{{1, 1}, {1, 1}}},
		// 25 rows, all interior: a last panel of 1, 4 or 11 rows under 6-, 7- and 14-row tiles.
		convCase{name: "unpadded-25-rows", inDims: []int{1, 7, 7, 3}, kDims: []int{3, 3, 3, 4}, axes: channelsLast(2)}) {
		if cc.axes.OutputChannels != len(cc.inDims)-1 {
			continue
		}
		x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
		outDims := refConv(x, k, cc).dims
		probs, ok := newConvGemms(toF32(x), cc.inDims, toF32(k), cc.kDims, outDims, specOf(cc))
		if !ok {
			t.Fatalf("%s: layout refused", cc.name)
		}
		got, want := make([]float32, Prod(outDims)), make([]float32, Prod(outDims))
		for _, p := range probs {
			mark := make([]bool, (p.m+kern.mr-1)/kern.mr)
			marked := p.lhs.(*convOperand[float32]).markDirect(mark, 0, p.m, kern.mr)
			anyDirect = anyDirect || marked
			edgeDirect = edgeDirect || p.m%kern.mr != 0 && mark[len(mark)-1]
			for _, split := range []gemmSplit{splitNone, splitShared} {
				q := *p
				q.forceSplit, q.threads = split, 2
				q.kernel = kern
				q.Run(got)
				q.kernel = &packedOnly
				q.Run(want)
			}
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: output %d direct %v, packed %v", cc.name, i, got[i], want[i])
			}
		}
	}
	if !anyDirect || !edgeDirect {
		t.Fatalf("panels read in place: some %v, a last partial one %v", anyDirect, edgeDirect)
	}
}

// The wide and half kernels (where the CPU has them) give the default kernel's bits, in place and
// packed: on convolutions of 32 to 192 output channels (the kernel gradient's and the input gradient's
// layouts among them) deeper than a K block, and on products whose A is read in place (row-major) or
// packed (transposed), split or not.
func TestWideKernelSameBits(t *testing.T) {
	var kernels []*gemmKernel
	for _, k := range []*gemmKernel{gemmWideKernel, gemmHalfKernel} {
		if k != nil {
			kernels = append(kernels, k)
		}
	}
	if len(kernels) == 0 {
		t.Skip("no wide kernel on this CPU")
	}
	def := defaultKernelOf[float32]()
	rng := rand.New(rand.NewSource(66))
	nhwc, dgrad, kgrad := stepConvAxes()
	pad1 := [][2]int{{1, 1}, {1, 1}}
	check := func(name string, probs []*gemmProblem, size int) {
		for _, kern := range kernels {
			for _, split := range []gemmSplit{splitNone, splitShared, splitK} {
				got, want := make([]float32, size), make([]float32, size)
				for _, p := range probs {
					q := *p
					q.forceSplit, q.threads = split, 2
					q.kernel = kern
					q.Run(got)
					q.kernel = def
					q.Run(want)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s split %d: output %d %v with %s, %v with %s", name, split, i, got[i], kern.name, want[i], def.name)
					}
				}
			}
		}
	}
	for _, cc := range []convCase{
		{name: "fwd-64", inDims: []int{2, 9, 11, 130}, kDims: []int{3, 3, 130, 64}, axes: nhwc, paddings: pad1},
		{name: "fwd-32", inDims: []int{2, 9, 11, 130}, kDims: []int{3, 3, 130, 32}, axes: nhwc, paddings: pad1},
		{name: "fwd-192", inDims: []int{1, 6, 7, 24}, kDims: []int{3, 3, 24, 192}, axes: nhwc, paddings: pad1},
		{name: "dgrad-128", inDims: []int{2, 5, 6, 40}, kDims: []int{3, 3, 128, 40}, axes: dgrad, paddings: pad1},
		{name: "kgrad-64", inDims: []int{3, 8, 8, 20}, kDims: []int{3, 8, 8, 64}, axes: kgrad, paddings: pad1},
		{name: "kgrad-32", inDims: []int{3, 8, 8, 20}, kDims: []int{3, 8, 8, 32}, axes: kgrad, paddings: pad1},
	} {
		x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
		outDims := refConv(x, k, cc).dims
		in, inDims, spec := toF32(x), cc.inDims, specOf(cc)
		if padded, paddedDims, paddedSpec, ok := padInput(in, inDims, cc.kDims, outDims, spec); ok {
			in, inDims, spec = padded, paddedDims, paddedSpec
		}
		probs, ok := newConvGemms(in, inDims, toF32(k), cc.kDims, outDims, spec)
		if !ok {
			t.Fatalf("%s: layout refused", cc.name)
		}
		check(cc.name, probs, Prod(outDims))
	}
	for _, n := range []int{32, 128} {
		for _, transposed := range []bool{false, true} {
			m, k := 45, gemmKC+37
			lhsDims, lc := []int{m, k}, []int{1}
			if transposed {
				lhsDims, lc = []int{k, m}, []int{0}
			}
			lhs, rhs := randTT(rng, lhsDims...), randTT(rng, k, n)
			p, ok := NewDotProblem(toF32(lhs), toF32(rhs), lhsDims, []int{k, n}, lc, nil, []int{0}, nil, 1, m, n, k)
			if !ok {
				t.Fatal("NewDotProblem refused the product")
			}
			check(fmt.Sprintf("dot n=%d transposed=%v", n, transposed), []*gemmProblem{p}, m*n)
		}
	}
}

// A convolution whose windows are mostly padding is split into GEMMs per class of output positions,
// each contracting only the kernel positions that meet the input; mostly-interior ones are not.
func TestPaddingClasses(t *testing.T) {
	spec := func(S, stride, pad int) ConvGemmSpec {
		c := ConvGemmSpec{Strides: make([]int, S), KernelDilations: ones(S), InputDilations: ones(S), Paddings: make([][2]int, S)}
		for i := range S {
			c.Strides[i], c.Paddings[i] = stride, [2]int{pad, pad}
		}
		return c
	}
	// A 1×1 map under a 3×3 kernel, padding 1: one class, the centre.
	got := paddingClasses(spec(2, 1, 1), []int{1, 1}, []int{3, 3}, []int{1, 1})
	want := []convClass{{y: [][2]int{{0, 1}, {0, 1}}, kp: [][2]int{{1, 2}, {1, 2}}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("1x1 map: %v, want %v", got, want)
	}
	// A 2×2 map: each output position meets 2×2 of the 9 kernel positions, 4 classes.
	got = paddingClasses(spec(2, 1, 1), []int{2, 2}, []int{3, 3}, []int{2, 2})
	if len(got) != 4 || fmt.Sprint(got[0]) != fmt.Sprint(convClass{y: [][2]int{{0, 1}, {0, 1}}, kp: [][2]int{{1, 3}, {1, 3}}}) ||
		fmt.Sprint(got[3]) != fmt.Sprint(convClass{y: [][2]int{{1, 2}, {1, 2}}, kp: [][2]int{{0, 2}, {0, 2}}}) {
		t.Errorf("2x2 map: %v", got)
	}
	// The kernel gradient of a 1×1 map (a 3×3 output of kernel positions, a 1×1 window): only the
	// centre row meets the input.
	got = paddingClasses(spec(1, 1, 1), []int{1}, []int{1}, []int{3})
	if fmt.Sprint(got) != fmt.Sprint([]convClass{{y: [][2]int{{1, 2}}, kp: [][2]int{{0, 1}}}}) {
		t.Errorf("kernel gradient of a 1x1 map: %v", got)
	}
	// Every window in the padding (a 1×1 kernel at stride 2 steps over the one input value): no class
	// at all (not nil: nothing to multiply).
	if got = paddingClasses(spec(1, 2, 1), []int{1}, []int{1}, []int{2}); got == nil || len(got) != 0 {
		t.Errorf("all padding: %v, want no class", got)
	}
	// Mostly interior (an 8×8 map), and input dilation: no split.
	if got = paddingClasses(spec(2, 1, 1), []int{8, 8}, []int{3, 3}, []int{8, 8}); got != nil {
		t.Errorf("8x8 map: %v, want nil", got)
	}
	dil := spec(1, 1, 1)
	dil.InputDilations = []int{2}
	if got = paddingClasses(dil, []int{1}, []int{3}, []int{3}); got != nil {
		t.Errorf("input dilation: %v, want nil", got)
	}
}

// The padding classes of a 2×2 map under a padded 3×3 kernel (four equal GEMMs) run whole on the
// workers; an input gradient's stride phases (kernel positions 4:2:2:1), too few problems or one
// worker don't.
func TestEvenProblems(t *testing.T) {
	mk := func(ks ...int) []*gemmProblem {
		var ps []*gemmProblem
		for _, k := range ks {
			ps = append(ps, &gemmProblem{batch: 1, m: 8, n: 512, k: k})
		}
		return ps
	}
	for _, tc := range []struct {
		name    string
		ks      []int
		threads int
		want    bool
	}{
		{"four equal classes, 2 workers", []int{2048, 2048, 2048, 2048}, 2, true},
		{"four equal classes, 1 worker", []int{2048, 2048, 2048, 2048}, 1, false},
		{"stride phases 4:2:2:1", []int{2048, 1024, 1024, 512}, 2, false},
		{"three equal, 2 workers", []int{2048, 2048, 2048}, 2, false},
		{"eight within a quarter, 2 workers", []int{2048, 2048, 1600, 2048, 2048, 2048, 2048, 1536}, 2, true},
		{"one problem", []int{2048}, 2, false},
	} {
		if got := evenProblems(mk(tc.ks...), tc.threads); got != tc.want {
			t.Errorf("%s: evenProblems = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A fused convolution whose GEMMs cover its output stores their first K block over whatever the
// output held, with the bits of the GEMMs added into a cleared output; one whose output has rows no
// GEMM reaches (windows all padding, an input dilation's phase with no kernel position) clears it.
func TestRunConvOverwritesStaleOutput(t *testing.T) {
	rng := rand.New(rand.NewSource(68))
	nhwc, _, _ := stepConvAxes()
	deep := convCase{name: "deeper-than-a-block", inDims: []int{2, 6, 6, gemmKC/9 + 40}, kDims: []int{3, 3, gemmKC/9 + 40, 70}, axes: nhwc, paddings: [][2]int{{1, 1}, {1, 1}}}
	covering := map[string]bool{}
	for _, cc := range append(fusedConvCases(), deep) {
		x, k := randTT(rng, cc.inDims...), randTT(rng, cc.kDims...)
		outDims := refConv(x, k, cc).dims
		spec := specOf(cc)
		if forward, kernelGrad := depthwiseApplies(cc.inDims, cc.kDims, outDims, spec); forward || kernelGrad {
			continue // The depthwise kernels, not GEMMs.
		}
		in, kern := toF32(x), toF32(k)
		// The GEMMs added into a cleared output, as RunConv ran them before it stored.
		want := make([]float32, Prod(outDims))
		pin, pinDims, pspec := in, cc.inDims, spec
		if padded, paddedDims, paddedSpec, ok := padInput(in, cc.inDims, cc.kDims, outDims, spec); ok {
			pin, pinDims, pspec = padded, paddedDims, paddedSpec
		}
		probs, ok := newConvGemms(pin, pinDims, kern, cc.kDims, outDims, pspec)
		if !ok {
			continue // A layout the GEMMs refuse (RunConv refuses it too).
		}
		for _, p := range probs {
			if !p.accumulate {
				t.Fatalf("%s: newConvGemms' problems must accumulate", cc.name)
			}
			p.Run(want)
		}
		if problemsCover(probs, len(want)) {
			covering[cc.name] = true
		}
		got := make([]float32, len(want))
		for i := range got {
			got[i] = float32(math.NaN())
		}
		if !RunConv(in, cc.inDims, kern, cc.kDims, outDims, spec, got) {
			t.Fatalf("%s: RunConv refused the layout", cc.name)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: output %d is %v over a stale output, %v added into zeros", cc.name, i, got[i], want[i])
			}
		}
	}
	for name, want := range map[string]bool{"nhwc": true, "1x1-wide": true, "1x1-map-3x3-pad1": true, "2x2-map-dgrad": true, "groups2": true,
		"deeper-than-a-block": true, "dgrad-stride2-1x1": false, "all-padding-rows": false} {
		if covering[name] != want {
			t.Errorf("%s: problems cover the output %v, want %v", name, covering[name], want)
		}
	}
}

// copyRows copies a kernel gradient's B (rows of w values, the batches of one output position far
// apart, then the next position's) in source order: every row lands where row order puts it, whether
// the block starts at a position's first batch or in the middle of its batches, and whatever its
// length; and interleavedRun finds the sequences only where they are.
func TestCopyRowsInterleaved(t *testing.T) {
	const batch, positions, w = 20, 7, 64
	stride := positions * w * 3 // Far apart: more than interleavedFar.
	src := make([]float32, batch*stride)
	for i := range src {
		src[i] = float32(i)
	}
	var offs []int
	for p := range positions {
		for b := range batch {
			offs = append(offs, b*stride+p*w)
		}
	}
	for _, r := range [][2]int{{0, len(offs)}, {0, 3 * batch}, {0, 2*batch + 5}, {7, len(offs)}, {batch, 3*batch + 1}} {
		ks := offs[r[0]:r[1]]
		if g := interleavedRun(ks, w); (r[0]%batch == 0) != (g == batch) {
			t.Errorf("rows [%d, %d): interleavedRun %d", r[0], r[1], g)
		}
		got := make([]float32, len(ks)*w)
		copyRows(got, src, 0, ks, w)
		for j, o := range ks {
			if !slices.Equal(got[j*w:j*w+w], src[o:o+w]) {
				t.Fatalf("rows [%d, %d): row %d is not src[%d:]", r[0], r[1], j, o)
			}
		}
	}
	for _, c := range []struct {
		ks   []int
		want int
	}{{[]int{0, 4096, 8192, 64}, 3}, {[]int{0, 64, 128, 192}, 0}, {[]int{0, 4096, 8192}, 0}, {[]int{0, 4096, 8192, 8192 + 4096 + 64}, 0}, {[]int{0, 4096, 8192, 32}, 0}, {[]int{0, 4096, 8192, 128}, 0}} {
		if g := interleavedRun(c.ks, w); g != c.want {
			t.Errorf("interleavedRun(%v) = %d, want %d", c.ks, g, c.want)
		}
	}
}
