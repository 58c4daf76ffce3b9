package trainstep

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
)

// Variables returns every variable cfg's train step keeps, by checkpoint name (scope and name) with
// its shape: the net's weights and statistics, the optimizer's slots, the EMA shadows, gradient sums
// and the RNG state. It builds the step's graph over a fresh context on backend without compiling or
// running it, so a checkpoint can be checked for completeness before anything loads from it.
func Variables(backend backends.Backend, cfg config.Config, net Net) (vars map[string]shapes.Shape, err error) {
	n := max(cfg.ReplicaBatch(), 1)
	cfg.Replicas = 1 // the variables are the same on every replica
	ctx := NewContext(cfg)
	step, err := New(backend, ctx, cfg, net)
	if err != nil {
		return nil, err
	}
	defer step.Finalize()
	g := NewGraph(backend, "variables")
	defer g.Finalize()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("building the train step of %s: %v", cfg.Net.Label(), r)
		}
	}()
	batch := BatchOf(cfg, net)
	in := []*Node{Parameter(g, "images", batch.Images(n)), Parameter(g, "labels", batch.Labels(n))}
	for i := range step.NumScalars() {
		in = append(in, Parameter(g, fmt.Sprintf("scalar%d", i), shapes.Make(dtypes.Float32)))
	}
	record, state := carryShapes()
	in = append(in, Parameter(g, "carry_record", record), Parameter(g, "carry_state", state))
	step.build(ctx, step.inputs(in))
	vars = map[string]shapes.Shape{}
	ctx.EnumerateVariables(func(v *context.Variable) { vars[v.ScopeAndName()] = v.Shape() })
	return vars, nil
}
