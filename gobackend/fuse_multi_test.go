package gobackend

import (
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// sgdStep builds SGD with momentum and the guard's per-column Σg² with the backend's builder, over
// float32 parameters g, m, w (of dims) and the scalars lr and μ: outputs Σg² (summed over every axis
// but the last), m' = μ·m + g and w' = w − lr·m'. sumLast builds the sum after the update, so its
// reads of g come last in the merged node.
func sgdStep(b backends.Builder, dims []int, sumLast bool) ([]backends.Op, error) {
	f32 := shapes.Make(dtypes.Float32, dims...)
	scalar := shapes.Make(dtypes.Float32)
	var params []backends.Op
	for i, s := range []shapes.Shape{f32, f32, f32, scalar, scalar} {
		p, err := b.Parameter(fmt.Sprintf("p%d", i), s, nil)
		if err != nil {
			return nil, err
		}
		params = append(params, p)
	}
	g, m, w, lr, mu := params[0], params[1], params[2], params[3], params[4]
	sum := func() (backends.Op, error) {
		sq, err := b.Mul(g, g)
		if err != nil {
			return nil, err
		}
		axes := []int{0}
		if len(dims) > 1 {
			axes = make([]int, len(dims)-1)
			for a := range axes {
				axes[a] = a
			}
		}
		return b.ReduceSum(sq, axes...)
	}
	var s backends.Op
	var err error
	if !sumLast {
		if s, err = sum(); err != nil {
			return nil, err
		}
	}
	mm, err := b.Mul(mu, m)
	if err != nil {
		return nil, err
	}
	m2, err := b.Add(mm, g)
	if err != nil {
		return nil, err
	}
	step, err := b.Mul(lr, m2)
	if err != nil {
		return nil, err
	}
	w2, err := b.Sub(w, step)
	if err != nil {
		return nil, err
	}
	if sumLast {
		if s, err = sum(); err != nil {
			return nil, err
		}
	}
	return []backends.Op{s, m2, w2}, nil
}

// wideRangeF32 fills n float32 values spread over ten orders of magnitude, so that a sum taken in
// another order gives other bits.
func wideRangeF32(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.Intn(10)-5)))
	}
	return v
}

// runSGDStep compiles sgdStep on backend and runs it on data (g, m, w, lr, μ), the three arrays
// donated when donate is set; it returns the outputs' values, and which input's buffer each output is
// (-1: a new one).
func runSGDStep(t *testing.T, backend backends.Backend, dims []int, sumLast, donate bool, data [][]float32) ([][]float32, []int) {
	t.Helper()
	builder := backend.Builder(t.Name())
	outs, err := sgdStep(builder, dims, sumLast)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := builder.Compile(outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	ins := make([]backends.Buffer, len(data))
	for i, d := range data {
		shape := shapes.Make(dtypes.Float32, dims...)
		if len(d) == 1 {
			shape = shapes.Make(dtypes.Float32)
		}
		if ins[i], err = backend.BufferFromFlatData(0, slices.Clone(d), shape); err != nil {
			t.Fatal(err)
		}
	}
	results, err := exec.Execute(ins, []bool{donate, donate, donate, false, false}, 0)
	if err != nil {
		t.Fatal(err)
	}
	values := make([][]float32, len(results))
	reused := make([]int, len(results))
	for k, r := range results {
		reused[k] = slices.Index(ins, r)
		shape, err := backend.BufferShape(r)
		if err != nil {
			t.Fatal(err)
		}
		values[k] = make([]float32, shape.Size())
		if err := backend.BufferToFlatData(r, values[k]); err != nil {
			t.Fatal(err)
		}
	}
	return values, reused
}

// The optimizer's step as one node: the guard's Σg² per column, the new momentum and the new weight
// are computed by one multi-output node, with exactly simplego's values (the sums in simplego's order,
// on data whose sums change bits with the order), at any GOMAXPROCS, over rows of 512 or more values,
// short channel rows and a vector; with the inputs donated, each new array is written over one of
// them, and never over g while the sum still has to read it.
func TestMultiFusionSGDStep(t *testing.T) {
	fast, slow := countCompiledOps(testBackend(t)), simplegoOps(t)
	rng := rand.New(rand.NewSource(70))
	for _, dims := range [][]int{{3, 3, 40, 512}, {2, 50, 1000}, {4, 5, 6, 8}, {3, 30, 48}, {300}, {192, 768}} {
		size := 1
		for _, d := range dims {
			size *= d
		}
		data := [][]float32{wideRangeF32(rng, size), wideRangeF32(rng, size), wideRangeF32(rng, size), {0.05}, {0.9}}
		for _, sumLast := range []bool{false, true} {
			want, _ := runSGDStep(t, slow, dims, sumLast, false, data)
			for _, procs := range []int{1, 2, 3} {
				for _, donate := range []bool{false, true} {
					what := fmt.Sprintf("dims %v, sum last %v, GOMAXPROCS %d, donated %v", dims, sumLast, procs, donate)
					prev := runtime.GOMAXPROCS(procs)
					before := fast.countReachable(fusedOpType)
					got, reused := runSGDStep(t, fast, dims, sumLast, donate, data)
					fused := fast.countReachable(fusedOpType) - before
					runtime.GOMAXPROCS(prev)
					if fused != 1 {
						t.Errorf("%s: %d fused nodes run, want 1", what, fused)
					}
					for k := range want {
						for i := range want[k] {
							if math.Float32bits(got[k][i]) != math.Float32bits(want[k][i]) {
								t.Fatalf("%s: output %d flat %d = %v, want %v", what, k, i, got[k][i], want[k][i])
							}
						}
					}
					switch {
					case !donate && (reused[1] >= 0 || reused[2] >= 0):
						t.Errorf("%s: an output is written over an input not donated (%v)", what, reused)
					case donate && (reused[1] < 0 || reused[2] < 0 || reused[1] == reused[2]):
						t.Errorf("%s: outputs m' and w' are over inputs %v, want two of the donated g, m, w", what, reused[1:])
					case donate && sumLast && (reused[1] == 0 || reused[2] == 0):
						t.Errorf("%s: an output is written over g, which the sum reads after it (%v)", what, reused[1:])
					case reused[0] >= 0:
						t.Errorf("%s: the sum is written over input %d", what, reused[0])
					}
				}
			}
		}
	}
}

// Updates as the optimizers, the gradient clipping and the EMA build them (graph package), in float32:
// the merged nodes give exactly simplego's values; a step that scales the gradient by a factor from its
// own Σg² keeps the sum apart (the update needs it first), and AdamW's two moments, which read the
// same gradient, run as one node.
func TestMultiFusionOptimizersMatchSimplego(t *testing.T) {
	fast, slow := countCompiledOps(testBackend(t)), simplegoOps(t)
	rng := rand.New(rand.NewSource(71))
	dims := []int{3, 3, 16, 40}
	sumAxes := []int{0, 1, 2}
	type update func(g, m, v, w, e *Node) []*Node
	scalar := func(x *Node, v float64) *Node { return Scalar(x.Graph(), dtypes.Float32, v) }
	cases := []struct {
		name  string
		fn    update
		fused int
	}{
		{"nesterov", func(g, m, v, w, e *Node) []*Node {
			s := ReduceAllSum(ReduceSum(Square(g), sumAxes...))
			m2 := Add(MulScalar(m, 0.9), g)
			w2 := Sub(w, Mul(scalar(w, 0.1), Add(g, MulScalar(m2, 0.9))))
			e2 := Add(Mul(scalar(w, 0.99), e), Mul(scalar(w, 0.01), w2)) // The EMA shadow of the new weight.
			return []*Node{s, m2, w2, e2}
		}, 1}, // One node; the sum's last reduction (over the columns' sums) isn't element-wise.
		{"clipped", func(g, m, v, w, e *Node) []*Node {
			s := ReduceAllSum(ReduceSum(Square(g), sumAxes...))
			factor := MinScalar(Div(scalar(s, 1), AddScalar(Sqrt(s), 1e-6)), 1)
			m2 := Add(MulScalar(m, 0.9), Mul(g, factor))
			w2 := Sub(w, Mul(scalar(w, 0.1), m2))
			return []*Node{s, m2, w2}
		}, 3}, // The per-column sum, the factor's scalar chain, and one node for m' and w'.
		{"adamw", func(g, m, v, w, e *Node) []*Node {
			m2 := Add(MulScalar(m, 0.9), MulScalar(g, 0.1))
			v2 := Add(MulScalar(v, 0.999), MulScalar(Square(g), 0.001))
			dir := Div(Div(m2, scalar(m2, 0.5)), AddScalar(Sqrt(Div(v2, scalar(v2, 0.3))), 1e-8))
			w2 := Sub(Sub(w, Mul(scalar(w, 0.01), dir)), Mul(scalar(w, 0.01), MulScalar(w, 0.05)))
			return []*Node{m2, v2, w2}
		}, 2}, // The two moments; the weight's chain reads the Sqrt of one, so it stays apart.
	}
	for _, c := range cases {
		fn := func(in []*Node) []*Node {
			f := make([]*Node, len(in))
			for i, x := range in {
				f[i] = ConvertDType(x, dtypes.Float32)
			}
			outs := c.fn(f[0], f[1], f[2], f[3], f[4])
			for i, o := range outs {
				outs[i] = ConvertDType(o, dtypes.Float64)
			}
			return outs
		}
		in := []tt{specialFreeTT(rng, dims...), randTT(rng, dims...), randTT(rng, dims...), randTT(rng, dims...), randTT(rng, dims...)}
		for i := range in[2].data {
			in[2].data[i] = math.Abs(in[2].data[i]) // A second moment.
		}
		before := fast.countReachable(fusedOpType)
		got := runGraph(t, fast, fn, in...)
		if n := fast.countReachable(fusedOpType) - before; n != c.fused {
			t.Errorf("%s: %d fused nodes run, want %d", c.name, n, c.fused)
		}
		want := runGraph(t, slow, fn, in...)
		for i := range want {
			assertSameBits(t, fmt.Sprintf("%s output %d", c.name, i), got[i], want[i])
		}
	}
}
