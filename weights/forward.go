package weights

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/graphs"
	"github.com/trainer/trainer/graphs/gomlxfix"
)

// Evaluator runs a net's eval-mode forward pass over the variables of a context.
type Evaluator struct {
	spec graphs.Spec
	opts graphs.Options
	exec *context.Exec
	// reuse says the variables exist (loaded); otherwise the first run initialises them.
	reuse bool
}

// NewEvaluator compiles (lazily, per input shape) spec's eval forward pass in ctx's /model scope. With
// reuse, every variable must already be in ctx (after Load); without, missing ones are initialised.
func NewEvaluator(backend backends.Backend, ctx *context.Context, spec graphs.Spec, opts graphs.Options, reuse bool) (*Evaluator, error) {
	e := &Evaluator{spec: spec, opts: opts, reuse: reuse}
	gomlxfix.Install() // one gradient table per process, whichever graph is built first
	exec, err := context.NewExec(backend, ctx, func(ctx *context.Context, images *Node) *Node {
		ctx = ctx.In(graphs.ModelScope)
		if e.reuse {
			ctx = ctx.Reuse()
		}
		// The input in the compute dtype, as precision_test.go feeds it: nets that convert it themselves
		// see no change, and the small nets (which do not) then compute in float64 when asked.
		return spec.Build(ctx, graphs.ToCompute(images, opts), false, opts)
	})
	if err != nil {
		return nil, err
	}
	e.exec = exec
	return e, nil
}

// Logits runs images (NHWC float32, n examples of h×w×c) and returns the [n, classes] logits as
// float64 rows (the net computes in float32, or float64 under Precision "float64").
func (e *Evaluator) Logits(images []float32, n, h, w, c int) (rows [][]float64, err error) {
	if n*h*w*c != len(images) {
		return nil, fmt.Errorf("%d image values for %d×%d×%d×%d", len(images), n, h, w, c)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("net %q forward: %v", e.spec.Name, r)
		}
	}()
	in := tensors.FromFlatDataAndDimensions(images, n, h, w, c)
	defer in.FinalizeAll()
	outs, err := e.exec.Exec(in)
	if err != nil {
		return nil, fmt.Errorf("net %q forward: %w", e.spec.Name, err)
	}
	out := outs[0]
	defer out.FinalizeAll()
	dims := out.Shape().Dimensions
	if len(dims) != 2 || dims[0] != n {
		return nil, fmt.Errorf("net %q returned logits of shape %v for %d images", e.spec.Name, dims, n)
	}
	var flat []float64
	switch out.DType() {
	case dtypes.Float64:
		flat = tensors.MustCopyFlatData[float64](out)
	case dtypes.Float32:
		for _, v := range tensors.MustCopyFlatData[float32](out) {
			flat = append(flat, float64(v))
		}
	default:
		return nil, fmt.Errorf("net %q returned %s logits, expected float32", e.spec.Name, out.DType())
	}
	for i := range n {
		rows = append(rows, flat[i*dims[1]:(i+1)*dims[1]])
	}
	return rows, nil
}

// Finalize releases the compiled graphs.
func (e *Evaluator) Finalize() { e.exec.Finalize() }
