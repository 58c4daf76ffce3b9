package trainstep

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// guard is the step's part of the non-finite guard. In the graph it reduces the loss and each
// gradient to one finiteness flag (Σg² per gradient, so an overflowing norm counts as non-finite too)
// and, when gating, keeps every variable the step changes at its old value unless all flags are set.
// The policy (stop, skip, reduce_lr) is the host loop's.
type guard struct {
	gate  bool
	names []string // the variables whose gradient flags follow the loss's flag
}

// NonFinite describes what one execution found non-finite; the zero value means nothing was.
type NonFinite struct {
	Loss   bool   // the loss is non-finite
	Tensor string // the first variable (by name) whose gradient is non-finite, "" if none
	More   int    // how many other gradients are non-finite
}

// Any reports whether anything was non-finite.
func (nf NonFinite) Any() bool { return nf.Loss || nf.Tensor != "" }

// measure returns the flags vector [loss, gradients...] (float32, 1 = finite) and their conjunction,
// given each gradient's Σg² (squaredNorms, which clipping reuses).
func (gd *guard) measure(loss *Node, vars []*context.Variable, sums []*Node) (flags, ok *Node) {
	gd.names = make([]string, len(vars))
	finite := []*Node{IsFinite(loss)}
	for i, v := range vars {
		gd.names[i] = v.ScopeAndName()
		finite = append(finite, IsFinite(sums[i]))
	}
	ok = finite[0]
	for _, f := range finite[1:] {
		ok = LogicalAnd(ok, f)
	}
	parts := make([]*Node, len(finite))
	for i, f := range finite {
		parts[i] = Reshape(ConvertDType(f, dtypes.Float32), 1)
	}
	return Concatenate(parts, 0), ok
}

// gateAll, when gating, makes every variable the step changes (weights, optimizer slots, EMA
// shadows, BatchNorm statistics, gradient sums, the RNG state) keep its old value unless ok: a
// skipped step leaves the state exactly as it was. Call it after every other update of the graph.
func (gd *guard) gateAll(ctx *context.Context, g *Graph, ok *Node) {
	if !gd.gate {
		return
	}
	ctx.EnumerateVariables(func(v *context.Variable) {
		if !v.ChangedInGraph(g) {
			return
		}
		before := g.GetParameterByName(v.ParameterName())
		after := v.ValueGraph(g)
		v.SetValueGraph(Where(BroadcastToDims(ok, after.Shape().Dimensions...), after, before))
	})
}

// read turns one execution's flags into what was non-finite.
func (gd *guard) read(flags []float32) NonFinite {
	var nf NonFinite
	for i, f := range flags {
		switch {
		case f == 1:
		case i == 0:
			nf.Loss = true
		case nf.Tensor == "":
			nf.Tensor = gd.names[i-1]
		default:
			nf.More++
		}
	}
	return nf
}
