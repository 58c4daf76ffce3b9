package trainer

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
)

// TestEachCheckpointIsWrittenOnce: the loop fires every hook that has a step method, so a periodic
// checkpoint is written once per due step (not again by the final-checkpoint hook), and the final
// checkpoint once at the end.
func TestEachCheckpointIsWrittenOnce(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name = "once"
	cfg.Checkpoint.EverySteps, cfg.Checkpoint.Keep = 5, 10
	s := &session{cfg: cfg, ctx: context.New()}
	s.ctx.In("model").VariableWithValue("w", []float32{1})
	ckpts := &checkpointHook{s: s, dir: t.TempDir()}
	hooks := []any{ckpts, signalHook{}, ckpts.final()}
	st := &loopState{cfg: cfg, total: 12, k: 1, batchesPerEpoch: 4, lrScale: 1}
	wanting := 0
	for step := 1; step <= 12; step++ {
		st.step = step
		for _, h := range hooks {
			if h, ok := h.(stateHook); ok && h.wantsState(st, step) {
				wanting++
			}
		}
		if err := fire(hooks, func(h stepHook) error { return h.afterStep(st) }); err != nil {
			t.Fatal(err)
		}
	}
	if ckpts.writes != 2 || wanting != 2 {
		t.Errorf("steps 1..12 with every_steps 5: %d checkpoints written, %d asks for the state; want 2 and 2 (steps 5 and 10)",
			ckpts.writes, wanting)
	}
	if err := fire(hooks, func(h endHook) error { return h.atEnd(st) }); err != nil {
		t.Fatal(err)
	}
	paths, err := checkpoint.List(ckpts.dir)
	if ckpts.writes != 3 || err != nil || len(paths) != 3 {
		t.Errorf("after the end: %d writes, files %v (%v); want 3: steps 5, 10 and the final 12", ckpts.writes, paths, err)
	}
}
