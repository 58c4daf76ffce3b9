package gobackend

import (
	"fmt"
	"math/rand"
	"runtime"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
)

// A BatchNorm + ReLU block written with plain ops, its gradients, a leaky-ReLU select, ReLU6 and its
// gradient (comparisons and logical ops, recomputed in each chain) and an SGD-like update, in float32: the fused backend (chains fused at compile time, broadcasts read in place,
// reductions accumulated block by block) gives exactly simplego's values, and fusion did happen.
func TestFusionMatchesSimplego(t *testing.T) {
	fast, slow := countCompiledOps(testBackend(t)), simplegoOps(t)
	rng := rand.New(rand.NewSource(67))
	for _, dims := range [][]int{{4, 5, 6, 8}, {2, 3, 3, 40}, {3, 70, 90, 1}, {2, 17}} {
		ch := dims[len(dims)-1]
		fn := func(in []*Node) []*Node {
			x, gamma, beta := ConvertDType(in[0], dtypes.Float32), ConvertDType(in[1], dtypes.Float32), ConvertDType(in[2], dtypes.Float32)
			axes := make([]int, len(dims)-1)
			for i := range axes {
				axes[i] = i
			}
			asCh := func(v *Node) *Node {
				d := make([]int, len(dims))
				for i := range d {
					d[i] = 1
				}
				d[len(d)-1] = ch
				return Reshape(v, d...)
			}
			mean := ReduceMean(x, axes...)
			centered := Sub(x, asCh(mean))
			variance := ReduceMean(Square(centered), axes...)
			scale := Div(gamma, Sqrt(AddScalar(variance, 1e-5)))
			y := Add(Mul(centered, asCh(scale)), asCh(beta))
			r := Max(y, ZerosLike(y))
			loss := ReduceAllSum(Mul(r, r))
			grads := Gradient(loss, x, gamma, beta)
			leaky := Where(GreaterThan(x, ZerosLike(x)), x, MulScalar(x, 0.1))
			update := Sub(x, Mul(Scalar(x.Graph(), dtypes.Float32, 0.01), Add(MulScalar(leaky, 0.9), grads[0])))
			// A squeeze-excitation style scale (per example and channel) and a per-row centring.
			spatial := make([]int, 0, len(dims))
			for a := 1; a < len(dims)-1; a++ {
				spatial = append(spatial, a)
			}
			se := y
			if len(spatial) > 0 {
				se = Mul(y, Sigmoid(ReduceAndKeep(y, ReduceMean, spatial...)))
			}
			rowCentred := Sub(x, ReduceAndKeep(x, ReduceMean, len(dims)-1))
			// ReLU6 as graphs writes it (a conjunction of two comparisons selects), its gradient, and
			// the other comparisons and logical ops.
			zeros := ZerosLike(x)
			six := AddScalar(zeros, 1.5)
			inside := LogicalAnd(GreaterThan(x, zeros), LessThan(x, six))
			relu6 := Where(inside, x, Where(GreaterOrEqual(x, six), six, zeros))
			relu6Grad := Gradient(ReduceAllSum(Mul(relu6, y)), x)[0]
			masks := Where(LogicalOr(LogicalNot(inside), LessOrEqual(x, MulScalar(y, 0.5))), y, x)
			outs := append([]*Node{y, r, leaky, update, ReduceSum(Mul(leaky, y), len(dims)-1), se, rowCentred, relu6, relu6Grad, masks}, grads...)
			for i, o := range outs {
				outs[i] = ConvertDType(o, dtypes.Float64)
			}
			return outs
		}
		x, gamma, beta := specialFreeTT(rng, dims...), randTT(rng, ch), randTT(rng, ch)
		before := fast.count(fusedOpType)
		got := runGraph(t, fast, fn, x, gamma, beta)
		if fast.count(fusedOpType) == before {
			t.Fatalf("dims %v: nothing was fused", dims)
		}
		for _, op := range []backends.OpType{backends.OpTypeLogicalAnd, backends.OpTypeLessThan, backends.OpTypeGreaterOrEqual, backends.OpTypeLogicalNot} {
			if n := fast.countReachable(op); n > 0 {
				t.Fatalf("dims %v: %d %s nodes left unfused", dims, n, op)
			}
		}
		want := runGraph(t, slow, fn, x, gamma, beta)
		for i := range want {
			assertSameBits(t, fmt.Sprintf("dims %v output %d", dims, i), got[i], want[i])
		}
	}
}

// specialFreeTT is randTT scaled up, with exact zeros sprinkled in (ReLU's ties).
func specialFreeTT(rng *rand.Rand, dims ...int) tt {
	t := randTT(rng, dims...)
	for i := range t.data {
		t.data[i] *= 3
		if rng.Intn(9) == 0 {
			t.data[i] = 0
		}
	}
	return t
}

// A compiled step runs its fused nodes once per execution, with evaluators kept between executions:
// running one executable on new inputs (per-channel vectors repeated over short rows, a per-row value,
// a column sum, at any GOMAXPROCS) gives simplego's values every time, nothing of the previous
// execution's operands left in the evaluators.
func TestFusedNodesRerunOnNewInputs(t *testing.T) {
	fast, slow := testBackend(t), simplegoOps(t)
	rng := rand.New(rand.NewSource(69))
	fn := func(in []*Node) []*Node {
		x, scale, shift := ConvertDType(in[0], dtypes.Float32), ConvertDType(in[1], dtypes.Float32), ConvertDType(in[2], dtypes.Float32)
		y := Add(Mul(x, Reshape(scale, 1, 1, 8)), Reshape(shift, 1, 1, 8))
		rows := Sub(y, ReduceAndKeep(x, ReduceMax, 2))
		sums := ReduceSum(Mul(y, rows), 0, 1)
		return []*Node{ConvertDType(rows, dtypes.Float64), ConvertDType(sums, dtypes.Float64)}
	}
	exec, err := NewExecAny(fast, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	for _, procs := range []int{1, 2} {
		prev := runtime.GOMAXPROCS(procs)
		for run := range 4 {
			x, scale, shift := randTT(rng, 30, 40, 8), randTT(rng, 8), randTT(rng, 8)
			outs, err := exec.Exec(x.tensor(), scale.tensor(), shift.tensor())
			if err != nil {
				t.Fatalf("%+v", err)
			}
			want := runGraph(t, slow, fn, x, scale, shift)
			for i, o := range outs {
				assertSameBits(t, fmt.Sprintf("GOMAXPROCS %d, run %d, output %d", procs, run, i), fromTensor(t, o), want[i])
			}
		}
		runtime.GOMAXPROCS(prev)
	}
}

// BatchNorm's centred input, used by the variance's sum and by the normalised output, is computed in
// both chains from the input instead of being written out: the graph runs two fused nodes and no
// separate subtraction, and the values are simplego's.
func TestFusionRecomputesCentredInput(t *testing.T) {
	fast, slow := countCompiledOps(testBackend(t)), simplegoOps(t)
	rng := rand.New(rand.NewSource(68))
	fn := func(in []*Node) []*Node {
		x, mean := ConvertDType(in[0], dtypes.Float32), ConvertDType(in[1], dtypes.Float32)
		centred := Sub(x, Reshape(mean, 1, 1, 8))
		variance := ReduceSum(Mul(centred, centred), 0, 1)
		out := Add(MulScalar(centred, 2), Reshape(variance, 1, 1, 8))
		return []*Node{ConvertDType(out, dtypes.Float64)}
	}
	x, mean := randTT(rng, 5, 6, 8), randTT(rng, 8)
	before := fast.countReachable(fusedOpType)
	subBefore := fast.countReachable(backends.OpTypeSub)
	got := runGraph(t, fast, fn, x, mean)
	assertSameBits(t, "centred", got[0], runGraph(t, slow, fn, x, mean)[0])
	if n := fast.countReachable(fusedOpType) - before; n != 2 {
		t.Errorf("%d fused nodes run, want 2 (the sum of squares and the output)", n)
	}
	if n := fast.countReachable(backends.OpTypeSub) - subBefore; n != 0 {
		t.Errorf("%d subtractions run on their own, want 0", n)
	}
}

// Fused per-column sums over many rows of 512 or more values (the guard's Σg² of a 3×3 kernel
// gradient, per-channel sums of wide maps) and of short channel rows, and a per-channel chain over
// them, give exactly simplego's values at any GOMAXPROCS.
func TestFusedColumnSumsMatchSimplego(t *testing.T) {
	fast, slow := countCompiledOps(testBackend(t)), simplegoOps(t)
	rng := rand.New(rand.NewSource(69))
	for _, dims := range [][]int{{3, 3, 40, 512}, {2, 50, 1000}, {64, 8, 8, 64}, {3, 30, 48}} {
		fn := func(in []*Node) []*Node {
			x, y := ConvertDType(in[0], dtypes.Float32), ConvertDType(in[1], dtypes.Float32)
			axes := make([]int, len(dims)-1)
			for i := range axes {
				axes[i] = i
			}
			sq := ReduceSum(Mul(x, x), axes...)
			dot := ReduceSum(Mul(Sub(x, y), y), axes...)
			asCh := make([]int, len(dims))
			for i := range asCh {
				asCh[i] = 1
			}
			asCh[len(dims)-1] = dims[len(dims)-1]
			norm := Add(Mul(Sub(x, Reshape(sq, asCh...)), Reshape(dot, asCh...)), y)
			return []*Node{ConvertDType(sq, dtypes.Float64), ConvertDType(dot, dtypes.Float64), ConvertDType(norm, dtypes.Float64)}
		}
		x, y := specialFreeTT(rng, dims...), randTT(rng, dims...)
		for _, procs := range []int{1, 2, 3} {
			prev := runtime.GOMAXPROCS(procs)
			before := fast.countReachable(fusedOpType)
			got := runGraph(t, fast, fn, x, y)
			fused := fast.countReachable(fusedOpType) - before
			runtime.GOMAXPROCS(prev)
			if fused != 3 {
				t.Errorf("dims %v: %d fused nodes run, want 3", dims, fused)
			}
			want := runGraph(t, slow, fn, x, y)
			for i := range want {
				assertSameBits(t, fmt.Sprintf("dims %v GOMAXPROCS %d output %d", dims, procs, i), got[i], want[i])
			}
		}
	}
}
