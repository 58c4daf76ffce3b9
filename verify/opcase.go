package verify

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

var inf = math.Inf(1)

// Tolerances of the op checks (MaxRelErr bounds; see Result).
const (
	// forwardTol: the float64 graph against the float64 reference; both only round.
	forwardTol = 1e-10
	// gradTol: GoMLX's autodiff against central differences of the reference.
	gradTol = 1e-6
	// float32Tol: the float32 graph (forward and gradients) against the float64 graph: float32 rounds at
	// 6e-8, and gradients are sums of up to ~10³ terms that partly cancel (measured worst: 1.2e-4).
	float32Tol = 1e-3
	// fdStep is the default finite-difference step; inputs are kept further than that from kinks.
	fdStep = 1e-3
)

// gen draws the values of one operand.
type gen func(rng *rand.Rand, dims []int) []float64

// operand is one input of an op check: a graph input, or a variable the op reads from its context.
type operand struct {
	name string
	// scope is the variable's scope below the check's root ("conv", "attn/qkv"); "" for graph inputs.
	scope string
	dims  []int
	gen   gen
	// fixed operands are not differentiated (labels, targets, running statistics).
	fixed bool
	// integer inputs are fed as int32 (class labels).
	integer bool
}

func input(name string, g gen, dims ...int) operand { return operand{name: name, dims: dims, gen: g} }

func param(scope, name string, g gen, dims ...int) operand {
	return operand{name: name, scope: scope, dims: dims, gen: g}
}

func state(scope, name string, g gen, dims ...int) operand {
	return operand{name: name, scope: scope, dims: dims, gen: g, fixed: true}
}

func (o operand) isParam() bool { return o.scope != "" }

// opCase checks one op of package graphs (or trainer's losses) against the reference.
type opCase struct {
	name           string
	inputs, params []operand
	// build builds the op with the params already in ctx (ctx is unchecked, so layers find them).
	build func(ctx *context.Context, in []*Node, opts graphs.Options) *Node
	// ref computes the op from the operand values (same order as inputs, then params).
	ref func(in, params []reference.Tensor) reference.Tensor
	// smooth ops take Richardson-extrapolated differences; piecewise-linear and bilinear ones plain
	// central differences, which are exact for them.
	smooth bool
	step   float64
	// f32Tol overrides float32Tol; negative skips the float32 comparison.
	f32Tol float64
	// observe reads what the graph decided (a dropout mask) from the float64 output, before ref runs.
	observe func(in []reference.Tensor, y reference.Tensor) error
	// after adds results read from the float64 run's context (running statistics).
	after func(ctx *context.Context, in, params []reference.Tensor) []Result
	// expectGradFailure marks a documented trap: the gradient check must fail, and this says why.
	expectGradFailure string
}

// graphRun is what one execution of the op's graph produced, as float64.
type graphRun struct {
	y     reference.Tensor
	grads []reference.Tensor // the differentiated operands, inputs first, then params
	ctx   *context.Context
}

func (c *opCase) operands() []operand {
	return append(append([]operand(nil), c.inputs...), c.params...)
}

// seed derives a check's random stream from its name, so checks are independent of their order.
func seed(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

func dimsString(dims []int) string {
	if len(dims) == 0 {
		return "scalar"
	}
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, "x")
}

func (c *opCase) shapes(out []int) string {
	var parts []string
	for _, o := range c.operands() {
		parts = append(parts, o.name+" "+dimsString(o.dims))
	}
	s := strings.Join(parts, ", ")
	if out != nil {
		s += " -> " + dimsString(out)
	}
	return s
}

// functional returns the weights w of the linear functional L = Σ w_i·y_i whose gradient the checks
// compare: deterministic, irregular, of both signs.
func functional(n int) []float64 {
	w := make([]float64, n)
	for i := range w {
		w[i] = math.Cos(1.7*float64(i) + 0.3)
	}
	return w
}

func (c *opCase) run(backend backends.Backend) []Result {
	rng := rand.New(rand.NewPCG(seed(c.name), 7))
	ops := c.operands()
	vals := make([]reference.Tensor, len(ops))
	for i, o := range ops {
		vals[i] = reference.FromData(o.gen(rng, o.dims), o.dims...)
	}
	inVals, paramVals := vals[:len(c.inputs)], vals[len(c.inputs):]

	var f64 graphRun
	if res := safeRun(c.name+"/forward", func() []Result {
		f64 = c.runGraph(backend, dtypes.Float64, vals)
		return nil
	}); len(res) > 0 {
		res[0].Shapes = c.shapes(nil)
		return res
	}
	shapes := c.shapes(f64.y.Dims)
	if c.observe != nil {
		if err := c.observe(inVals, f64.y); err != nil {
			return []Result{failed(c.name+"/forward", shapes, err)}
		}
	}

	var results []Result
	want := c.ref(inVals, paramVals)
	fwd := within(c.name+"/forward", shapes, inf, inf, forwardTol)
	if !slices.Equal(want.Dims, f64.y.Dims) {
		fwd.Note = fmt.Sprintf("output dims %v, reference %v", f64.y.Dims, want.Dims)
	} else {
		abs, rel := reference.Errors(f64.y.Data, want.Data)
		fwd = within(c.name+"/forward", shapes, abs, rel, forwardTol)
	}
	results = append(results, fwd)

	results = append(results, c.gradResult(shapes, vals, f64))

	if c.f32Tol >= 0 {
		tol := c.f32Tol
		if tol == 0 {
			tol = float32Tol
		}
		results = append(results, safeRun(c.name+"/float32", func() []Result {
			f32 := c.runGraph(backend, dtypes.Float32, vals)
			abs, rel := reference.Errors(f32.y.Data, f64.y.Data)
			worst := "output"
			for i, g := range f32.grads {
				a, r := reference.Errors(g.Data, f64.grads[i].Data)
				abs = max(abs, a)
				if r > rel {
					rel, worst = r, "d/d"+c.diffOperands()[i].name
				}
			}
			r := within(c.name+"/float32", shapes, abs, rel, tol)
			if !r.Pass {
				r.Note = "worst: " + worst
			}
			return []Result{r}
		})...)
	}
	if c.after != nil {
		results = append(results, c.after(f64.ctx, inVals, paramVals)...)
	}
	return results
}

// diffOperands lists the differentiated operands in the order of graphRun.grads.
func (c *opCase) diffOperands() []operand {
	var d []operand
	for _, o := range c.operands() {
		if !o.fixed {
			d = append(d, o)
		}
	}
	return d
}

// gradResult compares the graph's gradients of L = Σ w·y with central differences of the reference.
func (c *opCase) gradResult(shapes string, vals []reference.Tensor, f64 graphRun) Result {
	name := c.name + "/grad"
	w := reference.FromData(functional(f64.y.Size()), f64.y.Dims...)
	nIn := len(c.inputs)
	step := c.step
	if step == 0 {
		step = fdStep
	}
	var maxAbs, maxRel float64
	worst := ""
	k := 0
	for i, o := range c.operands() {
		if o.fixed {
			continue
		}
		work := append([]reference.Tensor(nil), vals...)
		loss := func(x []float64) float64 {
			work[i] = reference.FromData(x, o.dims...)
			return reference.Dot(w, c.ref(work[:nIn], work[nIn:]))
		}
		x := append([]float64(nil), vals[i].Data...)
		var fd []float64
		if c.smooth {
			fd = reference.CentralDiffRichardson(loss, x, step)
		} else {
			fd = reference.CentralDiff(loss, x, step)
		}
		abs, rel := reference.Errors(f64.grads[k].Data, fd)
		k++
		maxAbs = max(maxAbs, abs)
		if rel > maxRel || worst == "" {
			maxRel, worst = rel, o.name
		}
	}
	r := within(name, shapes, maxAbs, maxRel, gradTol)
	if c.expectGradFailure != "" {
		r.Pass = maxRel > gradTol
		r.Note = "expected failure: " + c.expectGradFailure
		if !r.Pass {
			r.Note = "the trap is gone (the gradient now matches), update this check: " + c.expectGradFailure
		}
	} else if !r.Pass {
		r.Note = "worst: d/d" + worst
	}
	return r
}

// runGraph builds and runs the op at dtype: the output and the gradients of Σ w·y with respect to
// every differentiated operand, all converted to float64 on the way out.
func (c *opCase) runGraph(backend backends.Backend, dtype dtypes.DType, vals []reference.Tensor) graphRun {
	ctx := context.New()
	if err := ctx.SetRNGStateFromSeed(int64(seed(c.name) >> 1)); err != nil {
		panic(err)
	}
	ops := c.operands()
	var args []any
	for i, o := range ops {
		t := hostTensor(vals[i], dtype, o.integer)
		if o.isParam() {
			v := ctx.InAbsPath("/"+o.scope).VariableWithValue(o.name, t)
			v.SetTrainable(!o.fixed)
		} else {
			args = append(args, t)
		}
	}
	opts := graphs.Options{Precision: "float32"}
	if dtype == dtypes.Float64 {
		opts.Precision = "float64"
	}
	exec, err := context.NewExec(backend, ctx.Checked(false), func(ctx *context.Context, in []*Node) []*Node {
		g := in[0].Graph()
		y := c.build(ctx, in, opts)
		if y.DType() != dtype {
			panic(fmt.Errorf("the op computes in %s, expected %s", y.DType(), dtype))
		}
		n := y.Shape().Size()
		w := ConvertDType(Const(g, tensors.FromFlatDataAndDimensions(functional(n), y.Shape().Dimensions...)), dtype)
		loss := ReduceAllSum(Mul(y, w))
		var wrt []*Node
		for i, o := range ops {
			if o.fixed {
				continue
			}
			if o.isParam() {
				wrt = append(wrt, ctx.GetVariableByScopeAndName("/"+o.scope, o.name).ValueGraph(g))
			} else {
				wrt = append(wrt, in[i])
			}
		}
		outs := []*Node{ConvertDType(y, dtypes.Float64)}
		for _, gr := range Gradient(loss, wrt...) {
			outs = append(outs, ConvertDType(gr, dtypes.Float64))
		}
		return outs
	})
	if err != nil {
		panic(err)
	}
	defer exec.Finalize()
	outs, err := exec.Exec(args...)
	if err != nil {
		panic(err)
	}
	run := graphRun{y: fromHost(outs[0]), ctx: ctx}
	for _, t := range outs[1:] {
		run.grads = append(run.grads, fromHost(t))
	}
	return run
}

// hostTensor makes a tensor of the given dtype (int32 for integer operands) from reference values.
func hostTensor(t reference.Tensor, dtype dtypes.DType, integer bool) *tensors.Tensor {
	switch {
	case integer:
		v := make([]int32, t.Size())
		for i, x := range t.Data {
			v[i] = int32(x)
		}
		return tensors.FromFlatDataAndDimensions(v, t.Dims...)
	case dtype == dtypes.Float32:
		v := make([]float32, t.Size())
		for i, x := range t.Data {
			v[i] = float32(x)
		}
		return tensors.FromFlatDataAndDimensions(v, t.Dims...)
	}
	return tensors.FromFlatDataAndDimensions(append([]float64(nil), t.Data...), t.Dims...)
}

// fromHost copies a float64 tensor into a reference tensor.
func fromHost(t *tensors.Tensor) reference.Tensor {
	dims := t.Shape().Dimensions
	return reference.FromData(tensors.MustCopyFlatData[float64](t), dims...)
}

// Value generators. Inputs of piecewise-linear ops stay further than the FD step from their kinks.

// normal draws N(0, std²).
func normal(std float64) gen {
	return func(rng *rand.Rand, dims []int) []float64 {
		v := make([]float64, prod(dims))
		for i := range v {
			v[i] = std * rng.NormFloat64()
		}
		return v
	}
}

// awayFrom draws ±U(lo, hi) around each centre, never within lo of one (ReLU's 0, ReLU6's 0 and 6).
func awayFrom(lo, hi float64, centres ...float64) gen {
	return func(rng *rand.Rand, dims []int) []float64 {
		v := make([]float64, prod(dims))
		for i := range v {
			c := centres[rng.IntN(len(centres))]
			d := lo + (hi-lo)*rng.Float64()
			if rng.IntN(2) == 0 {
				d = -d
			}
			v[i] = c + d
		}
		return v
	}
}

// uniform draws U(lo, hi).
func uniform(lo, hi float64) gen {
	return func(rng *rand.Rand, dims []int) []float64 {
		v := make([]float64, prod(dims))
		for i := range v {
			v[i] = lo + (hi-lo)*rng.Float64()
		}
		return v
	}
}

// distinct draws a shuffled grid with spacing 0.01 around 0: no two values within 0.01 of each other,
// so no max-pool window has a tie or a near-tie the FD step could cross.
func distinct() gen {
	return func(rng *rand.Rand, dims []int) []float64 {
		n := prod(dims)
		v := make([]float64, n)
		for i, p := range rng.Perm(n) {
			v[i] = 0.01 * float64(p-n/2)
		}
		return v
	}
}

// labels draws class indices in [0, k).
func labels(k int) gen {
	return func(rng *rand.Rand, dims []int) []float64 {
		v := make([]float64, prod(dims))
		for i := range v {
			v[i] = float64(rng.IntN(k))
		}
		return v
	}
}

// simplex draws rows (the last axis) of non-negative values that sum to 1: soft targets.
func simplex() gen {
	return func(rng *rand.Rand, dims []int) []float64 {
		k := dims[len(dims)-1]
		v := make([]float64, prod(dims))
		for r := 0; r < len(v); r += k {
			s := 0.0
			for j := range k {
				v[r+j] = rng.ExpFloat64()
				s += v[r+j]
			}
			for j := range k {
				v[r+j] /= s
			}
		}
		return v
	}
}

func prod(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}
