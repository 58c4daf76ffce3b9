package verify

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/verify/reference"
)

// phaseTol is the smallest relative difference that counts as "the two paddings differ".
const phaseTol = 1e-3

// specialChecks are the checks that are not one op against the reference: padding phases that must
// differ (or agree), max-pool ties, and the RNG reset the net checks rely on.
func specialChecks() []Check {
	sym, same := graphs.PadSymmetric, graphs.PadSame
	conv := func(name string, x []int, k, s, groups int, p graphs.Padding) opCase {
		return convCase(name, convSpec{x: x, filters: x[3], k: k, stride: s, groups: groups, pad: p})
	}
	x8 := []int{2, 8, 8, 4}
	return []Check{
		phaseCheck("conv3x3_s1_phase", conv("conv3x3_s1_phase", x8, 3, 1, 1, sym), conv("conv3x3_s1_phase", x8, 3, 1, 1, same), false),
		phaseCheck("conv3x3_s2_phase", conv("conv3x3_s2_phase", x8, 3, 2, 1, sym), conv("conv3x3_s2_phase", x8, 3, 2, 1, same), true),
		phaseCheck("depthwise3x3_s2_phase", conv("dw_phase", x8, 3, 2, 4, sym), conv("dw_phase", x8, 3, 2, 4, same), true),
		phaseCheck("stem7x7_s2_phase", conv("stem_phase", []int{1, 16, 16, 3}, 7, 2, 1, sym), conv("stem_phase", []int{1, 16, 16, 3}, 7, 2, 1, same), true),
		maxPoolTieCheck("maxpool3x3_s2_p1_ties", 3, 2, 1),
		maxPoolTieCheck("maxpool2x2_s2_ties", 2, 2, 0),
		{Name: "dropout_rng_reset", Run: dropoutRNGReset},
	}
}

// phaseCheck runs two conv graphs on the same values: at stride 2 on an even input, PyTorch's symmetric
// padding and XLA's SAME phase must give different numbers (a padding override that does nothing
// would pass every other check); at stride 1 with an odd kernel they must agree.
func phaseCheck(name string, a, b opCase, differ bool) Check {
	return Check{Name: name, Run: func(backend backends.Backend) []Result {
		rng := rand.New(rand.NewPCG(seed(name), 7))
		ops := a.operands()
		vals := make([]reference.Tensor, len(ops))
		for i, o := range ops {
			vals[i] = reference.FromData(o.gen(rng, o.dims), o.dims...)
		}
		ya := a.runGraph(backend, dtypes.Float64, vals).y
		yb := b.runGraph(backend, dtypes.Float64, vals).y
		shapes := a.shapes(ya.Dims)
		abs, rel := reference.Errors(ya.Data, yb.Data)
		if differ {
			return []Result{{Name: name + "/differ", Shapes: shapes, MaxAbsErr: abs, MaxRelErr: rel, Tolerance: phaseTol,
				Pass: rel > phaseTol, Note: "symmetric and SAME must differ (relative difference ≥ tolerance)"}}
		}
		r := within(name+"/agree", shapes, abs, rel, forwardTol)
		r.Note = "symmetric and SAME must agree"
		return []Result{r}
	}}
}

// maxPoolTieCheck feeds a max-pool an input full of ties and checks that the gradient of each window
// goes to its FIRST maximal cell in row-major order (XLA's select-and-scatter and PyTorch both do).
func maxPoolTieCheck(name string, k, s, pad int) Check {
	return Check{Name: name, Run: func(backend backends.Backend) []Result {
		pads := [2][2]int{{pad, pad}, {pad, pad}}
		// Values from {0, 1, 2}: most windows hold their maximum more than once.
		ties := func(rng *rand.Rand, dims []int) []float64 {
			v := make([]float64, prod(dims))
			for i := range v {
				v[i] = float64(rng.IntN(3))
			}
			return v
		}
		c := maxPoolCase(name, k, s, pad)
		c.inputs = []operand{input("x", ties, 2, 6, 6, 2)}
		rng := rand.New(rand.NewPCG(seed(name), 7))
		x := reference.FromData(c.inputs[0].gen(rng, c.inputs[0].dims), c.inputs[0].dims...)
		shapes := c.shapes(nil)
		if n := reference.MaxPool2DTies(x, k, s, pads); n == 0 {
			return []Result{failed(name, shapes, fmt.Errorf("the input has no tied window, the check cannot discriminate"))}
		}
		run := c.runGraph(backend, dtypes.Float64, []reference.Tensor{x})
		y, argmax := reference.MaxPool2D(x, k, s, pads)
		shapes = c.shapes(y.Dims)
		w := reference.FromData(functional(y.Size()), y.Dims...)
		dx := reference.MaxPool2DBackward(x.Dims, argmax, w)
		fa, fr := reference.Errors(run.y.Data, y.Data)
		ga, gr := reference.Errors(run.grads[0].Data, dx.Data)
		grad := within(name+"/grad", shapes, ga, gr, forwardTol)
		grad.Note = "gradient to the first maximal cell of each window"
		return []Result{within(name+"/forward", shapes, fa, fr, forwardTol), grad}
	}}
}

// dropoutRNGReset checks what the net checks rely on: resetting the context's RNG state replays the
// same dropout mask, and not resetting it draws a new one.
func dropoutRNGReset(backend backends.Backend) []Result {
	const name = "dropout_rng_reset"
	ctx := context.New()
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, x *Node) *Node {
		return graphs.Dropout(ctx, x, 0.5, true)
	})
	if err != nil {
		return []Result{failed(name, "", err)}
	}
	defer exec.Finalize()
	ones := make([]float64, 64)
	for i := range ones {
		ones[i] = 1
	}
	x := tensors.FromFlatDataAndDimensions(ones, 4, 16)
	draw := func() []float64 {
		out, err := exec.Exec(x)
		if err != nil {
			panic(err)
		}
		return tensors.MustCopyFlatData[float64](out[0])
	}
	if err := ctx.SetRNGStateFromSeed(5); err != nil {
		panic(err)
	}
	first := draw()
	second := draw()
	if err := ctx.SetRNGStateFromSeed(5); err != nil {
		panic(err)
	}
	replay := draw()
	shapes := "x 4x16, rate 0.5"
	ra, rr := reference.Errors(replay, first)
	aa, ar := reference.Errors(second, first)
	repeat := within(name+"/replay", shapes, ra, rr, 0)
	repeat.Note = "same RNG state, same mask"
	advance := Result{Name: name + "/advance", Shapes: shapes, MaxAbsErr: aa, MaxRelErr: ar, Tolerance: phaseTol,
		Pass: ar > phaseTol, Note: "the state advances: the next mask must differ"}
	return []Result{repeat, advance}
}

// dropoutCase checks Dropout against the reference with the mask read back from the graph's output
// (y/x, x never 0); the mask itself must hold only 0 and 1/(1−rate), kept at a plausible rate.
func dropoutCase() opCase {
	const rate = 0.3
	var mask reference.Tensor
	return opCase{
		name:   "dropout",
		inputs: []operand{input("x", awayFrom(0.1, 2, 0), 2, 6, 6, 4)},
		build: func(ctx *context.Context, in []*Node, _ graphs.Options) *Node {
			return graphs.Dropout(ctx, in[0], rate, true)
		},
		observe: func(in []reference.Tensor, y reference.Tensor) error {
			mask = reference.New(y.Dims...)
			kept := 0
			for i := range y.Data {
				m := y.Data[i] / in[0].Data[i]
				switch {
				case math.Abs(m) < 1e-12:
					m = 0
				case math.Abs(m-1/(1-rate)) < 1e-12:
					m = 1 / (1 - rate)
					kept++
				default:
					return fmt.Errorf("dropout mask value %v is neither 0 nor 1/(1−%v)", m, rate)
				}
				mask.Data[i] = m
			}
			if f := float64(kept) / float64(y.Size()); math.Abs(f-(1-rate)) > 0.15 {
				return fmt.Errorf("dropout kept %.2f of the values at rate %v", f, rate)
			}
			return nil
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor { return reference.Dropout(in[0], mask) },
	}
}

// dropPathCase checks DropPath with the per-example mask read back from the output: every value of an
// example shares one factor, 0 or 1/(1−rate), and both occur.
func dropPathCase() opCase {
	const rate, batch = 0.5, 8
	keep := make([]float64, batch)
	return opCase{
		name:   "drop_path",
		inputs: []operand{input("x", awayFrom(0.1, 2, 0), batch, 3, 3, 4)},
		build: func(ctx *context.Context, in []*Node, _ graphs.Options) *Node {
			return graphs.DropPath(ctx, in[0], rate, true)
		},
		observe: func(in []reference.Tensor, y reference.Tensor) error {
			per := y.Size() / batch
			kept := 0
			for b := range batch {
				f := y.Data[b*per] / in[0].Data[b*per]
				for i := b * per; i < (b+1)*per; i++ {
					if math.Abs(y.Data[i]/in[0].Data[i]-f) > 1e-12 {
						return fmt.Errorf("drop path: example %d is not scaled by one factor", b)
					}
				}
				switch {
				case math.Abs(f) < 1e-12:
					keep[b] = 0
				case math.Abs(f-1/(1-rate)) < 1e-12:
					keep[b] = 1 / (1 - rate)
					kept++
				default:
					return fmt.Errorf("drop path factor %v is neither 0 nor 1/(1−%v)", f, rate)
				}
			}
			if kept == 0 || kept == batch {
				return fmt.Errorf("drop path kept %d of %d examples: the check needs both", kept, batch)
			}
			return nil
		},
		ref: func(in, _ []reference.Tensor) reference.Tensor { return reference.DropPath(in[0], keep) },
	}
}
