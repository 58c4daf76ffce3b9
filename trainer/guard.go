package trainer

import (
	"fmt"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/trainstep"
)

// maxSkippedInARow ends a skip/reduce_lr run anyway after this many non-finite optimizer steps in a
// row: the state itself is then broken, and skipping for ever would only burn the budget.
const maxSkippedInARow = 10

// guardHook is the loop's side of the non-finite guard (the step measures and, when skipping, gates:
// trainstep): the policy of guard.nonfinite. It stops the run naming the step, the tensor and the last
// good checkpoint, or withholds the optimizer step's update (halving the lr under reduce_lr) and logs
// the skip.
type guardHook struct {
	mode    string
	inARow  int // optimizer steps skipped in a row
	metrics *metricsLog
	term    *progressHook
}

func newGuardHook(cfg config.GuardConfig, metrics *metricsLog, term *progressHook) *guardHook {
	h := &guardHook{mode: cfg.NonFinite, metrics: metrics, term: term}
	if h.mode == "" {
		h.mode = config.GuardStop
	}
	return h
}

// onNonFinite handles a non-finite micro-batch of optimizer step st.step+1.
func (h *guardHook) onNonFinite(st *loopState, res trainstep.Result) error {
	step, nf := st.step+1, res.NonFinite
	what := fmt.Sprintf("step %d: %s", step, describe(nf, res.Loss))
	last := st.lastCheckpoint
	if last == "" {
		last = "none written yet"
	}
	if h.mode == config.GuardStop {
		return fmt.Errorf("%s; stopping (guard.nonfinite: stop); last good checkpoint: %s; "+
			"lower optimizer.lr, or set guard.nonfinite to skip or reduce_lr", what, last)
	}
	if !st.holdBack {
		st.holdBack = true
		h.inARow++
		if h.mode == config.GuardReduceLR {
			st.lrScale /= 2
		}
	}
	if h.inARow > maxSkippedInARow {
		return fmt.Errorf("%s; %d optimizer steps in a row were non-finite, stopping (guard.nonfinite: %s); "+
			"last good checkpoint: %s", what, h.inARow, h.mode, last)
	}
	line := fmt.Sprintf("%s: step skipped (guard.nonfinite: %s)", what, h.mode)
	record := nonFiniteRecord(nf, step, h.mode)
	if h.mode == config.GuardReduceLR {
		line += fmt.Sprintf("; lr now x%g of the schedule's", st.lrScale)
		record["lr_scale"] = st.lrScale
	}
	h.term.say("%s", line)
	return h.metrics.write(record)
}

// afterStep ends a run of skipped steps at the first applied one.
func (h *guardHook) afterStep(st *loopState) error {
	if !st.skipped {
		h.inARow = 0
	}
	return nil
}

// describe says what was non-finite, for the terminal and the error.
func describe(nf trainstep.NonFinite, loss float64) string {
	s := "gradient norm non-finite"
	if nf.Loss {
		s = fmt.Sprintf("loss %v", loss)
	}
	switch {
	case nf.Tensor == "" && nf.Loss:
		s += " (gradients finite)"
	case nf.Tensor != "":
		s += "; first non-finite gradient: " + nf.Tensor
		if nf.More > 0 {
			s += fmt.Sprintf(" (and %d more)", nf.More)
		}
	}
	return s
}

// nonFiniteRecord is the metrics.jsonl record of a non-finite step (JSON has no NaN: the loss is a flag).
func nonFiniteRecord(nf trainstep.NonFinite, step int, action string) map[string]any {
	r := map[string]any{"type": "nonfinite", "step": step, "action": action, "loss_finite": !nf.Loss}
	if nf.Tensor != "" {
		r["tensor"] = nf.Tensor
		r["more_tensors"] = nf.More
	}
	return r
}
