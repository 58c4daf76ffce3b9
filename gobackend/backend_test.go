package gobackend

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
)

func TestGoBackendIdentity(t *testing.T) {
	b := testBackend(t)
	if b.String() != "go" {
		t.Errorf("String() = %q, want \"go\"", b.String())
	}
	if b.Name() != (&simplego.Backend{}).Name() {
		t.Errorf("Name() = %q, want simplego's", b.Name())
	}
	if b.NumDevices() != 1 {
		t.Errorf("NumDevices() = %d", b.NumDevices())
	}
	caps := b.Capabilities()
	for _, op := range append(slices.Clone(addedOps), backends.OpTypeConvGeneral, backends.OpTypeDotGeneral) {
		if !caps.Operations[op] {
			t.Errorf("capability %s not reported", op)
		}
	}
	if simplego.Capabilities.Operations[backends.OpTypePad] {
		t.Errorf("simplego's own capabilities were modified (or simplego now has Pad: drop the wrapper's)")
	}
	for _, tc := range []struct{ in, want string }{
		{"", "ops_sequential"},
		{"parallelism=2", "parallelism=2,ops_sequential"},
		{"ops_parallel", "ops_parallel"},
	} {
		if got := normalizeConfig(tc.in); got != tc.want {
			t.Errorf("normalizeConfig(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if !b.strictConv || !strings.HasSuffix(b.Config(), ",strict_conv") {
		t.Errorf("the tests' backend is not strict about convolution compositions: config %q", b.Config())
	}
	if _, err := New("no_such_option"); err == nil {
		t.Errorf("New accepted an unknown simplego option")
	}
}

// refPad is XLA's Pad on float64: interior first, then edges (negative ones crop).
func refPad(x tt, fill float64, cfg []backends.PadAxis) tt {
	rank := len(x.dims)
	cfg = append(slices.Clone(cfg), make([]backends.PadAxis, rank-len(cfg))...)
	dims := make([]int, rank)
	for a, n := range x.dims {
		dims[a] = n + max(n-1, 0)*cfg[a].Interior + cfg[a].Start + cfg[a].End
	}
	out := newTT(dims...)
	src := make([]int, rank)
	forEach(dims, func(idx []int) {
		v := fill
		inside := true
		for a := range rank {
			p := idx[a] - cfg[a].Start
			step := cfg[a].Interior + 1
			if p < 0 || p%step != 0 || p/step >= x.dims[a] {
				inside = false
				break
			}
			src[a] = p / step
		}
		if inside {
			v = x.data[x.flat(src)]
		}
		out.data[out.flat(idx)] = v
	})
	return out
}

func TestPadForward(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(1))
	x := randTT(rng, 3, 4, 5)
	for _, cfg := range [][]backends.PadAxis{
		{{Start: 1, End: 2}},
		{{}, {Start: -1, End: -2}},
		{{Interior: 2}, {Interior: 1, Start: 1, End: 1}, {Start: 2, End: -1, Interior: 1}},
		{{Start: -2, End: 3, Interior: 3}, {}, {Start: -1, End: -1, Interior: 2}},
		{{Start: -3, End: -1, Interior: 1}},
		{{Start: 5, End: -7}, {Start: -6, End: 7}},                                   // Cropping into the other side's padding: all fill.
		{{Start: 1, End: -2}, {Start: -1, End: 1}, {Start: 2, End: -5, Interior: 1}}, // Cropping data and padding.
		{}, // No padding at all.
	} {
		fill := 0.5
		got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
			f, err := bb.Constant([]float64{fill})
			if err != nil {
				return nil, err
			}
			o, err := bb.Pad(p[0], f, cfg...)
			return []backends.Op{o}, err
		}, x)[0]
		assertClose(t, "Pad", got, refPad(x, fill, cfg), 0)
	}
	// Through the graph package too.
	got := runGraph(t, b, func(in []*Node) []*Node {
		return []*Node{Pad(in[0], Const(in[0].Graph(), -7.0), backends.PadAxis{Start: 1, Interior: 1}, backends.PadAxis{End: -2})}
	}, x)[0]
	assertClose(t, "graph.Pad", got, refPad(x, -7, []backends.PadAxis{{Start: 1, Interior: 1}, {End: -2}}), 0)

	// Bad configurations are errors, not panics.
	for _, cfg := range [][]backends.PadAxis{{{Interior: -1}}, {{Start: -3, End: -1}}, {{}, {}, {}, {}}} {
		builder := b.Builder("bad")
		p, _ := builder.Parameter("x", mustShapeF64(3, 4, 5), nil)
		f, _ := builder.Constant([]float64{0})
		if _, err := builder.Pad(p, f, cfg...); err == nil {
			t.Errorf("Pad(%+v) accepted", cfg)
		}
	}
}

// Pad has no VJP in GoMLX's graph; it *is* the VJP of Slice (interior padding for strided slices) and,
// with negative padding, part of the sum/mean-pool gradient. Those gradients exercise it.
func TestPadThroughGradients(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(2))
	x := randTT(rng, 5, 7)
	checkGradient(t, b, func(in []*Node) *Node {
		return Slice(in[0], AxisRange(1, 5).Stride(2), AxisRange(0, 7).Stride(3))
	}, []tt{x}, 0)
	img := randTT(rng, 2, 5, 6, 3)
	checkGradient(t, b, func(in []*Node) *Node {
		return MeanPool(in[0]).Window(3).Strides(2).PaddingPerDim([][2]int{{1, 1}, {1, 0}}).Done()
	}, []tt{img}, 0)
	checkGradient(t, b, func(in []*Node) *Node {
		return SumPool(in[0]).Window(2).Strides(2).Done()
	}, []tt{img}, 0)
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

func TestReverse(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(3))
	x := randTT(rng, 2, 3, 4, 1)
	for _, axes := range [][]int{{0}, {1}, {2, 0}, {0, 1, 2, 3}, {3}, {}} {
		got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
			o, err := bb.Reverse(p[0], axes...)
			return []backends.Op{o}, err
		}, x)[0]
		assertClose(t, "Reverse", got, refReverse(x, axes...), 0)
	}
	got := runGraph(t, b, func(in []*Node) []*Node { return []*Node{Reverse(in[0], 1, 2)} }, x)[0]
	assertClose(t, "graph.Reverse", got, refReverse(x, 1, 2), 0)
	// A kernel's spatial flip (leading axes, one row Gather) in float32, and with a unit axis between.
	for _, tc := range []struct {
		dims, axes []int
	}{{[]int{3, 3, 4, 5}, []int{0, 1}}, {[]int{1, 2, 3, 1, 4}, []int{2, 1}}, {[]int{4, 1, 3, 2}, []int{2, 0}}} {
		k := randTT(rng, tc.dims...)
		got := runOps(t, b, inDType(dtypes.Float32, func(bb backends.Builder, x backends.Op) (backends.Op, error) {
			return bb.Reverse(x, tc.axes...)
		}), k)[0]
		assertClose(t, fmt.Sprintf("Reverse%v of %v", tc.axes, tc.dims), got, refReverse(k, tc.axes...), 1e-7)
	}
	// Reverse has no VJP in GoMLX either; the conv input gradient (TestConvGradients) runs it.
}

// refSelectAndScatter: for every window the first maximal (minimal) real cell, row-major, gets the source.
func refSelectAndScatter(x, src tt, window, strides []int, paddings [][2]int, isMin bool) tt {
	rank := len(x.dims)
	out := newTT(x.dims...)
	cell := make([]int, rank)
	forEach(src.dims, func(o []int) {
		best, bestAt := math.Inf(-1), -1
		forEach(window, func(w []int) {
			for a := range rank {
				cell[a] = o[a]*strides[a] + w[a] - paddings[a][0]
				if cell[a] < 0 || cell[a] >= x.dims[a] {
					return // A padding cell: never chosen.
				}
			}
			v := x.data[x.flat(cell)]
			if isMin {
				v = -v
			}
			if bestAt < 0 || v > best {
				best, bestAt = v, x.flat(cell)
			}
		})
		if bestAt >= 0 {
			out.data[bestAt] += src.data[src.flat(o)]
		}
	})
	return out
}

func TestSelectAndScatterForward(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(4))
	for _, tc := range []struct {
		dims, window, strides []int
		paddings              [][2]int
	}{
		{[]int{2, 4, 6, 1}, []int{1, 2, 2, 1}, []int{1, 2, 2, 1}, nil},
		{[]int{1, 5, 5, 2}, []int{1, 3, 3, 1}, []int{1, 1, 1, 1}, nil},                                      // Overlapping windows.
		{[]int{1, 5, 4, 2}, []int{1, 3, 2, 1}, []int{1, 2, 2, 1}, [][2]int{{0, 0}, {1, 1}, {0, 1}, {0, 0}}}, // Padded.
		{[]int{7}, []int{3}, []int{2}, [][2]int{{2, 1}}},
		{[]int{1, 5, 7, 2}, []int{1, 2, 3, 1}, []int{1, 2, 3, 1}, [][2]int{{0, 0}, {1, 0}, {1, 1}, {0, 0}}}, // Non-overlapping, padded.
		{[]int{2, 7, 5, 1}, []int{1, 2, 2, 1}, []int{1, 2, 2, 1}, [][2]int{{0, 0}, {0, 0}, {1, 0}, {0, 0}}}, // Uncovered last row.
	} {
		x := distinctTT(rng, tc.dims...)
		paddings, srcDims := poolWindows(tc.dims, tc.window, tc.strides, tc.paddings)
		src := randTT(rng, srcDims...)
		for _, isMin := range []bool{false, true} {
			got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
				var o backends.Op
				var err error
				if isMin {
					o, err = bb.SelectAndScatterMin(p[0], p[1], tc.window, tc.strides, tc.paddings)
				} else {
					o, err = bb.SelectAndScatterMax(p[0], p[1], tc.window, tc.strides, tc.paddings)
				}
				return []backends.Op{o}, err
			}, x, src)[0]
			assertClose(t, "SelectAndScatter", got, refSelectAndScatter(x, src, tc.window, tc.strides, paddings, isMin), 1e-15)
		}
	}
}

// On ties the first maximal cell of the window (row-major) gets the whole source value, as XLA's GE select.
func TestSelectAndScatterTies(t *testing.T) {
	b := testBackend(t)
	x := tt{dims: []int{2, 4}, data: []float64{
		1, 5, 5, 2,
		5, 3, 2, 2,
	}}
	src := tt{dims: []int{1, 2}, data: []float64{10, 20}}
	got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
		mx, err := bb.SelectAndScatterMax(p[0], p[1], []int{2, 2}, []int{2, 2}, nil)
		if err != nil {
			return nil, err
		}
		mn, err := bb.SelectAndScatterMin(p[0], p[1], []int{2, 2}, []int{2, 2}, nil)
		return []backends.Op{mx, mn}, err
	}, x, src)
	// Window 0 holds 1,5 / 5,3: max 5 first at (0,1); window 1 holds 5,2 / 2,2: max at (0,2), min 2 first at (0,3).
	assertClose(t, "tie max", got[0], tt{dims: []int{2, 4}, data: []float64{0, 10, 20, 0, 0, 0, 0, 0}}, 0)
	assertClose(t, "tie min", got[1], tt{dims: []int{2, 4}, data: []float64{10, 0, 0, 20, 0, 0, 0, 0}}, 0)
}

func TestPoolGradients(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(5))
	x := distinctTT(rng, 2, 6, 6, 2)
	for name, pool := range map[string]func(x *Node) *Node{
		"max2x2":     func(x *Node) *Node { return MaxPool(x).Window(2).Strides(2).Done() },
		"min2x2":     func(x *Node) *Node { return MinPool(x).Window(2).Strides(2).Done() },
		"max3s1":     func(x *Node) *Node { return MaxPool(x).Window(3).Strides(1).Done() },
		"max3s2same": func(x *Node) *Node { return MaxPool(x).Window(3).Strides(2).PadSame().Done() },
		"min3s2padded": func(x *Node) *Node {
			return MinPool(x).Window(3).Strides(2).PaddingPerDim([][2]int{{1, 1}, {1, 1}}).Done()
		},
		"max2x3strides": func(x *Node) *Node { return MaxPool(x).WindowPerAxis(2, 3).StridePerAxis(2, 1).Done() },
	} {
		t.Run(name, func(t *testing.T) {
			checkGradient(t, b, func(in []*Node) *Node { return pool(in[0]) }, []tt{x}, 0)
		})
	}
}

// refBatchNorm returns normalized, mean, variance (biased) over all axes but featureAxis.
func refBatchNorm(x, scale, offset tt, eps float64, featureAxis int) (tt, tt, tt) {
	C := x.dims[featureAxis]
	mean, variance, count := newTT(C), newTT(C), float64(len(x.data)/C)
	forEach(x.dims, func(idx []int) { mean.data[idx[featureAxis]] += x.data[x.flat(idx)] / count })
	forEach(x.dims, func(idx []int) {
		d := x.data[x.flat(idx)] - mean.data[idx[featureAxis]]
		variance.data[idx[featureAxis]] += d * d / count
	})
	return refBatchNormInference(x, scale, offset, mean, variance, eps, featureAxis), mean, variance
}

func refBatchNormInference(x, scale, offset, mean, variance tt, eps float64, featureAxis int) tt {
	out := newTT(x.dims...)
	forEach(x.dims, func(idx []int) {
		c := idx[featureAxis]
		out.data[out.flat(idx)] = (x.data[x.flat(idx)]-mean.data[c])/math.Sqrt(variance.data[c]+eps)*scale.data[c] + offset.data[c]
	})
	return out
}

func TestBatchNorm(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(6))
	const eps = 1e-3
	eps64 := float64(float32(eps)) // The ops take epsilon as a float32.
	for _, featureAxis := range []int{3, 1} {
		x := randTT(rng, 3, 4, 2, 5)
		C := x.dims[featureAxis]
		scale, offset := randTT(rng, C), randTT(rng, C)
		mean, variance := randTT(rng, C), randTT(rng, C)
		for i := range variance.data {
			variance.data[i] = math.Abs(variance.data[i]) + 0.1
		}
		got := runGraph(t, b, func(in []*Node) []*Node {
			n, m, v := InternalBatchNormForTraining(in[0], in[1], in[2], eps, featureAxis)
			inf := InternalBatchNormForInference(in[0], in[1], in[2], in[3], in[4], eps, featureAxis)
			return []*Node{n, m, v, inf}
		}, x, scale, offset, mean, variance)
		wantN, wantM, wantV := refBatchNorm(x, scale, offset, eps64, featureAxis)
		assertClose(t, "BatchNormForTraining normalized", got[0], wantN, 1e-12)
		assertClose(t, "BatchNormForTraining mean", got[1], wantM, 1e-12)
		assertClose(t, "BatchNormForTraining variance", got[2], wantV, 1e-12)
		assertClose(t, "BatchNormForInference", got[3], refBatchNormInference(x, scale, offset, mean, variance, eps64, featureAxis), 1e-12)

		// The training op's VJP is BatchNormGradient.
		checkGradient(t, b, func(in []*Node) *Node {
			n, _, _ := InternalBatchNormForTraining(in[0], in[1], in[2], eps, featureAxis)
			return n
		}, []tt{x, scale, offset}, 0, 1, 2)
	}
}

// refReduceWindow is XLA's ReduceWindow: holes (base dilation) and padding hold the reduction's identity.
func refReduceWindow(x tt, op backends.ReduceOpType, window, strides, baseDil, winDil []int, paddings [][2]int) tt {
	rank := len(x.dims)
	init, combine := 0.0, func(a, b float64) float64 { return a + b }
	switch op {
	case backends.ReduceOpMax:
		init, combine = math.Inf(-1), math.Max
	case backends.ReduceOpMin:
		init, combine = math.Inf(1), math.Min
	case backends.ReduceOpProduct:
		init, combine = 1, func(a, b float64) float64 { return a * b }
	}
	outDims := make([]int, rank)
	for a := range rank {
		padded := (x.dims[a]-1)*baseDil[a] + 1 + paddings[a][0] + paddings[a][1]
		outDims[a] = (padded-((window[a]-1)*winDil[a]+1))/strides[a] + 1
	}
	out := newTT(outDims...)
	src := make([]int, rank)
	forEach(outDims, func(o []int) {
		acc := init
		forEach(window, func(w []int) {
			for a := range rank {
				q := o[a]*strides[a] + w[a]*winDil[a] - paddings[a][0]
				if q < 0 || q%baseDil[a] != 0 || q/baseDil[a] >= x.dims[a] {
					return
				}
				src[a] = q / baseDil[a]
			}
			acc = combine(acc, x.data[x.flat(src)])
		})
		out.data[out.flat(o)] = acc
	})
	return out
}

func TestReduceWindow(t *testing.T) {
	b := testBackend(t)
	rng := rand.New(rand.NewSource(8))
	x := randTT(rng, 2, 7, 6, 3)
	for _, tc := range []struct {
		window, strides, baseDil, winDil []int
		paddings                         [][2]int
	}{
		{window: []int{1, 2, 2, 1}, strides: []int{1, 2, 2, 1}},
		{window: []int{1, 3, 3, 1}, strides: nil}, // nil strides: the window size.
		{window: []int{1, 3, 2, 1}, strides: []int{1, 1, 2, 1}, paddings: [][2]int{{0, 0}, {1, 1}, {0, 1}, {0, 0}}},
		{window: []int{1, 2, 2, 2}, strides: []int{1, 1, 1, 1}, baseDil: []int{1, 2, 1, 1}, winDil: []int{1, 1, 2, 1}},
	} {
		for _, op := range []backends.ReduceOpType{backends.ReduceOpMax, backends.ReduceOpMin, backends.ReduceOpSum, backends.ReduceOpProduct} {
			got := runOps(t, b, func(bb backends.Builder, p []backends.Op) ([]backends.Op, error) {
				o, err := bb.ReduceWindow(p[0], op, tc.window, tc.strides, tc.baseDil, tc.winDil, tc.paddings)
				return []backends.Op{o}, err
			}, x)[0]
			strides, paddings := tc.strides, tc.paddings
			if strides == nil {
				strides = tc.window
			}
			if paddings == nil {
				paddings = make([][2]int, 4)
			}
			baseDil, winDil := fillOnes(tc.baseDil, 4), fillOnes(tc.winDil, 4)
			assertClose(t, "ReduceWindow "+op.String(), got, refReduceWindow(x, op, tc.window, strides, baseDil, winDil, paddings), 1e-14)
		}
	}
}
