package gobackend

import (
	"math"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/pkg/errors"

	"github.com/trainer/trainer/gobackend/internal/reftest"
	"github.com/trainer/trainer/gobackend/kernels"
)

// Test support: a small float64 tensor type with plain-loop references, a harness that runs ops on the
// backend API directly, and a gradient checker against central finite differences.

// tt is a float64 tensor for references.
type tt struct {
	dims []int
	data []float64
}

func newTT(dims ...int) tt {
	return tt{dims: slices.Clone(dims), data: make([]float64, kernels.Prod(dims))}
}

// randTT fills with values in [-1, 1).
func randTT(rng *rand.Rand, dims ...int) tt {
	t := newTT(dims...)
	for i := range t.data {
		t.data[i] = 2*rng.Float64() - 1
	}
	return t
}

// distinctTT fills with a random permutation of well separated values (no ties, for max/min pools).
func distinctTT(rng *rand.Rand, dims ...int) tt {
	t := newTT(dims...)
	perm := rng.Perm(len(t.data))
	for i, p := range perm {
		t.data[i] = float64(p)*0.1 - float64(len(t.data))*0.05
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

func (t tt) tensor() *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(slices.Clone(t.data), t.dims...)
}

func fromTensor(t *testing.T, x *tensors.Tensor) tt {
	t.Helper()
	if x.DType() != dtypes.Float64 {
		t.Fatalf("expected a float64 tensor, got %s", x.Shape())
	}
	return tt{dims: slices.Clone(x.Shape().Dimensions), data: tensors.MustCopyFlatData[float64](x)}
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

var testBackend = func() func(t *testing.T) *Backend {
	var b *Backend
	return func(t *testing.T) *Backend {
		t.Helper()
		if b == nil {
			var err error
			// strict_conv: a broken im2col composition must fail the tests, not fall back to the native conv.
			b, err = newBackend("strict_conv")
			if err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
}()

// compiledOps wraps a backend and counts, in every graph compiled on it, the nodes of each op type left
// after Compile's rewrites: the tests see with it that convolutions became fused convolutions and that
// element-wise chains were fused, without the backend keeping counters for them.
type compiledOps struct {
	backends.Backend
	mu        sync.Mutex
	counts    map[backends.OpType]int
	reachable map[backends.OpType]int // Nodes the outputs depend on (the ones simplego runs).
}

func countCompiledOps(b backends.Backend) *compiledOps {
	return &compiledOps{Backend: b, counts: map[backends.OpType]int{}, reachable: map[backends.OpType]int{}}
}

// Builder wraps the backend's builder so that its Compile is seen.
func (c *compiledOps) Builder(name string) backends.Builder {
	return &countingBuilder{Builder: c.Backend.Builder(name), ops: c}
}

// count is the number of op's nodes in the graphs compiled so far.
func (c *compiledOps) count(op backends.OpType) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// countReachable is the number of op's nodes the outputs of the graphs compiled so far depend on.
func (c *compiledOps) countReachable(op backends.OpType) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reachable[op]
}

type countingBuilder struct {
	backends.Builder
	ops *compiledOps
}

// Compile compiles, then counts the nodes of the graph as Compile left them.
func (b *countingBuilder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	exec, err := b.Builder.Compile(outputs, shardings)
	if err != nil {
		return nil, err
	}
	sb, ok := b.Builder.(*goBuilder).Builder.(*simplego.Builder)
	if !ok || !fuseFieldsOK {
		return nil, errors.New("countingBuilder: not a pure-Go backend's builder, or simplego's node fields moved")
	}
	b.ops.mu.Lock()
	defer b.ops.mu.Unlock()
	for _, n := range builderNodesOf(sb) {
		b.ops.counts[nodeOpType(n)]++
	}
	seen := map[*simplego.Node]bool{}
	var visit func(n *simplego.Node)
	visit = func(n *simplego.Node) {
		if seen[n] {
			return
		}
		seen[n] = true
		b.ops.reachable[nodeOpType(n)]++
		for _, in := range nodeInputsOf(n) {
			visit(in)
		}
	}
	for _, o := range outputs {
		visit(o.(*simplego.Node))
	}
	return exec, nil
}

// runOps builds ops with the backend's builder directly (the graph package not involved), runs them on
// float64 inputs and returns the float64 outputs.
func runOps(t *testing.T, backend backends.Backend, build func(b backends.Builder, params []backends.Op) ([]backends.Op, error), inputs ...tt) []tt {
	t.Helper()
	builder := backend.Builder(t.Name())
	params := make([]backends.Op, len(inputs))
	buffers := make([]backends.Buffer, len(inputs))
	for i, in := range inputs {
		shape := shapes.Make(dtypes.Float64, in.dims...)
		var err error
		if params[i], err = builder.Parameter("p", shape, nil); err != nil {
			t.Fatal(err)
		}
		if buffers[i], err = backend.BufferFromFlatData(0, slices.Clone(in.data), shape); err != nil {
			t.Fatal(err)
		}
	}
	outs, err := build(builder, params)
	if err != nil {
		t.Fatalf("building: %+v", err)
	}
	exec, err := builder.Compile(outs, nil)
	if err != nil {
		t.Fatalf("compiling: %+v", err)
	}
	results, err := exec.Execute(buffers, nil, 0)
	if err != nil {
		t.Fatalf("executing: %+v", err)
	}
	var res []tt
	for _, r := range results {
		shape, err := backend.BufferShape(r)
		if err != nil {
			t.Fatal(err)
		}
		if shape.DType != dtypes.Float64 {
			t.Fatalf("output shaped %s, expected float64", shape)
		}
		out := newTT(shape.Dimensions...)
		if err := backend.BufferToFlatData(r, out.data); err != nil {
			t.Fatal(err)
		}
		res = append(res, out)
	}
	return res
}

// runGraph runs a graph function on the backend.
func runGraph(t *testing.T, backend backends.Backend, fn func(in []*Node) []*Node, inputs ...tt) []tt {
	t.Helper()
	exec, err := NewExecAny(backend, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	args := make([]any, len(inputs))
	for i, in := range inputs {
		args[i] = in.tensor()
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		t.Fatalf("%+v", err)
	}
	res := make([]tt, len(outs))
	for i, o := range outs {
		res[i] = fromTensor(t, o)
	}
	return res
}

// checkGradient compares graph.Gradient of loss = Σ f(inputs)·w (w fixed random weights) with respect to
// the inputs listed in wrt against central finite differences: max|g-fd| <= 1e-6·max|fd|.
func checkGradient(t *testing.T, backend backends.Backend, f func(in []*Node) *Node, inputs []tt, wrt ...int) {
	t.Helper()
	rng := rand.New(rand.NewSource(7))
	out := runGraph(t, backend, func(in []*Node) []*Node { return []*Node{f(in)} }, inputs...)[0]
	w := randTT(rng, out.dims...)
	loss := func(in []*Node) *Node {
		y := f(in)
		return ReduceAllSum(Mul(y, Const(y.Graph(), w.tensor())))
	}
	grads := runGraph(t, backend, func(in []*Node) []*Node {
		l := loss(in)
		nodes := make([]*Node, len(wrt))
		for i, idx := range wrt {
			nodes[i] = in[idx]
		}
		return Gradient(l, nodes...)
	}, inputs...)

	lossExec, err := NewExecAny(backend, func(in []*Node) *Node { return loss(in) })
	if err != nil {
		t.Fatal(err)
	}
	defer lossExec.Finalize()
	eval := func(ins []tt) float64 {
		args := make([]any, len(ins))
		for i, in := range ins {
			args[i] = in.tensor()
		}
		outs, err := lossExec.Exec(args...)
		if err != nil {
			t.Fatalf("%+v", err)
		}
		return tensors.MustCopyFlatData[float64](outs[0])[0]
	}
	const h = 1e-5
	for gi, idx := range wrt {
		fd := newTT(inputs[idx].dims...)
		ins := slices.Clone(inputs)
		for e := range fd.data {
			x := tt{dims: inputs[idx].dims, data: slices.Clone(inputs[idx].data)}
			ins[idx] = x
			x.data[e] += h
			up := eval(ins)
			x.data[e] -= 2 * h
			down := eval(ins)
			fd.data[e] = (up - down) / (2 * h)
		}
		maxDiff, maxFD := 0.0, 0.0
		for e := range fd.data {
			maxDiff = max(maxDiff, math.Abs(grads[gi].data[e]-fd.data[e]))
			maxFD = max(maxFD, math.Abs(fd.data[e]))
		}
		if maxFD == 0 {
			t.Fatalf("gradient wrt input #%d is identically zero: the check would be vacuous", idx)
		}
		if rel := maxDiff / maxFD; rel > 1e-6 || math.IsNaN(rel) {
			t.Errorf("gradient wrt input #%d: relative error %.3g (max |diff| %.3g, max |fd| %.3g)", idx, rel, maxDiff, maxFD)
		}
	}
}

func mustShapeF64(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float64, dims...) }

// poolWindows is a pooling's paddings (nil: none) and the number of windows along each axis, the shape
// of SelectAndScatter's source.
func poolWindows(dims, window, strides []int, paddings [][2]int) ([][2]int, []int) {
	if paddings == nil {
		paddings = make([][2]int, len(dims))
	}
	counts := make([]int, len(dims))
	for a := range counts {
		counts[a] = (dims[a]+paddings[a][0]+paddings[a][1]-window[a])/strides[a] + 1
	}
	return paddings, counts
}
