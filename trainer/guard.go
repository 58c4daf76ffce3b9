package trainer

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX's idiom for graph code.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
)

// maxSkippedInARow ends a skip/reduce_lr run anyway after this many non-finite optimizer steps in a
// row: the state itself is then broken, and skipping for ever would only burn the budget.
const maxSkippedInARow = 10

// testHookImages, when set (only by tests), sees each training micro-batch's pixels before the step:
// optimizer step (1-based) and position in the accumulation group.
var testHookImages func(step, micro int, images []float32)

// stepGuard is the train step's part of the guard. In the graph it reduces the loss and each gradient
// to one finiteness flag (Σg² per gradient, so an overflowing norm counts as non-finite too) and, when
// gating, keeps every variable the step changes at its old value unless all flags are set. On the host
// it holds the flags of the last execution.
type stepGuard struct {
	gate  bool
	names []string  // the variables whose gradient flags follow the loss's flag
	flags []float32 // [loss finite, gradient 0 finite, ...] of the last execution, 1 or 0
}

// measure returns the flags vector [loss, gradients...] (float32, 1 = finite) and their conjunction,
// given each gradient's Σg² (squaredNorms, which clipping reuses).
func (gd *stepGuard) measure(loss *Node, vars []*context.Variable, sums []*Node) (flags, ok *Node) {
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
func (gd *stepGuard) gateAll(ctx *context.Context, g *Graph, ok *Node) {
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

// read stores the flags output of one execution.
func (gd *stepGuard) read(flags *tensors.Tensor) {
	gd.flags = tensors.MustCopyFlatData[float32](flags)
}

// nonFinite describes the last execution's non-finite values; ok is true when there were none.
type nonFinite struct {
	loss   bool   // the loss is non-finite
	tensor string // the first variable (by name) whose gradient is non-finite, "" if none
	more   int    // how many other gradients are non-finite
}

func (gd *stepGuard) lastNonFinite() (nf nonFinite, ok bool) {
	ok = true
	for i, f := range gd.flags {
		if f == 1 {
			continue
		}
		ok = false
		switch {
		case i == 0:
			nf.loss = true
		case nf.tensor == "":
			nf.tensor = gd.names[i-1]
		default:
			nf.more++
		}
	}
	return nf, ok
}

// describe says what was non-finite, for the terminal and the error.
func (nf nonFinite) describe(loss float64) string {
	s := "gradient norm non-finite"
	if nf.loss {
		s = fmt.Sprintf("loss %v", loss)
	}
	switch {
	case nf.tensor == "" && nf.loss:
		s += " (gradients finite)"
	case nf.tensor != "":
		s += "; first non-finite gradient: " + nf.tensor
		if nf.more > 0 {
			s += fmt.Sprintf(" (and %d more)", nf.more)
		}
	}
	return s
}

// record is the metrics.jsonl record of a non-finite step (JSON has no NaN: the loss is a flag).
func (nf nonFinite) record(step int, action string) map[string]any {
	r := map[string]any{"type": "nonfinite", "step": step, "action": action, "loss_finite": !nf.loss}
	if nf.tensor != "" {
		r["tensor"] = nf.tensor
		r["more_tensors"] = nf.more
	}
	return r
}

// hostGuard is the loop's side of the guard: the policy, the lr factor of reduce_lr and the last
// checkpoint written, which an error names as the state to go back to.
type hostGuard struct {
	mode           string
	lrScale        float64
	lastCheckpoint string
	groupBad       bool // a micro-batch of the accumulation group in flight was non-finite
	inARow         int  // optimizer steps skipped in a row
}

// newHostGuard starts the guard of a run, resumed from ckpt when it is not nil.
func newHostGuard(cfg config.GuardConfig, ckpt *checkpoint.Checkpoint) *hostGuard {
	h := &hostGuard{mode: cfg.NonFinite, lrScale: 1}
	if h.mode == "" {
		h.mode = config.GuardStop
	}
	if ckpt != nil {
		h.lastCheckpoint = ckpt.Path
		if ckpt.Header.LRScale > 0 {
			h.lrScale = ckpt.Header.LRScale
		}
	}
	return h
}

// onNonFinite handles a non-finite micro-batch of optimizer step step (1-based): it returns the error
// that ends the run, or the terminal line and the metrics record of a skipped step.
func (h *hostGuard) onNonFinite(step int, loss float64, nf nonFinite) (line string, record map[string]any, err error) {
	what := fmt.Sprintf("step %d: %s", step, nf.describe(loss))
	last := h.lastCheckpoint
	if last == "" {
		last = "none written yet"
	}
	if h.mode == config.GuardStop {
		return "", nil, fmt.Errorf("%s; stopping (guard.nonfinite: stop); last good checkpoint: %s; "+
			"lower optimizer.lr, or set guard.nonfinite to skip or reduce_lr", what, last)
	}
	if !h.groupBad {
		h.groupBad = true
		h.inARow++
		if h.mode == config.GuardReduceLR {
			h.lrScale /= 2
		}
	}
	if h.inARow > maxSkippedInARow {
		return "", nil, fmt.Errorf("%s; %d optimizer steps in a row were non-finite, stopping (guard.nonfinite: %s); "+
			"last good checkpoint: %s", what, h.inARow, h.mode, last)
	}
	line = fmt.Sprintf("%s: step skipped (guard.nonfinite: %s)", what, h.mode)
	record = nf.record(step, h.mode)
	if h.mode == config.GuardReduceLR {
		line += fmt.Sprintf("; lr now x%g of the schedule's", h.lrScale)
		record["lr_scale"] = h.lrScale
	}
	return line, record, nil
}

// endStep closes an optimizer step (the last micro-batch of its group) and reports whether it was
// skipped.
func (h *hostGuard) endStep() (skipped bool) {
	skipped, h.groupBad = h.groupBad, false
	if !skipped {
		h.inARow = 0
	}
	return skipped
}
