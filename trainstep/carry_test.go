package trainstep

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/trainer/trainer/config"
)

// TestDrainGivesEveryExecutionsResult: the record the step keeps on the device hands back, in order,
// exactly what reading each execution's outputs at once gives — loss, correct count and what was
// non-finite (the tensor named) — across a drain in the middle and past the ring's RecordRows rows,
// which Execute keeps by itself when nobody drains.
func TestDrainGivesEveryExecutionsResult(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name, cfg.Net.Name = "carry", "linear"
	cfg.Guard.NonFinite = config.GuardSkip
	_, step := testStep(t, cfg)
	rng := rand.New(rand.NewPCG(3, 4))
	var want, got []Result
	const runs = RecordRows + 40
	for i := range runs {
		x, y := randomBatch(rng, 2)
		if i == 7 || i == RecordRows+3 {
			tensors.MustMutableFlatData(x, func(flat []float32) { flat[0] = float32(math.Inf(1)) })
		}
		outs, err := step.Execute([]*tensors.Tensor{x}, []*tensors.Tensor{y}, Scalars{LR: 0.1, Update: i + 1})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, outs.Result())
		outs.Finalize()
		if i == 99 {
			got = append(got, step.Drain()...)
		}
	}
	got = append(got, step.Drain()...)
	if len(got) != runs {
		t.Fatalf("drained %d results of %d executions", len(got), runs)
	}
	bad := 0
	for i := range want {
		w, g := want[i], got[i]
		same := w.Loss == g.Loss || (math.IsNaN(w.Loss) && math.IsNaN(g.Loss))
		if !same || w.Correct != g.Correct || w.NonFinite != g.NonFinite {
			t.Errorf("execution %d: read at once %+v, drained %+v", i, w, g)
		}
		if w.NonFinite.Any() {
			bad++
			if w.NonFinite.Tensor == "" {
				t.Errorf("execution %d: non-finite without a tensor: %+v", i, w.NonFinite)
			}
		}
	}
	if bad != 2 {
		t.Errorf("%d non-finite executions, want the 2 poisoned", bad)
	}
	if rest := step.Drain(); len(rest) != 0 {
		t.Errorf("a second drain gave %d results", len(rest))
	}
}
