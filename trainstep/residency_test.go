package trainstep

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/gobackend"
	"github.com/trainer/trainer/graphs/testnets"
	"github.com/trainer/trainer/recipe"
)

// TestStepKeepsStateResident counts the bytes a real train step (BatchNorm, dropout, AdamW, EMA)
// moves between host and device: after the first step, exactly its batch and runtime scalars go in
// and a few metric bytes come out, while parameters, optimizer slots and EMA shadows (here ~30× the
// batch) never cross. The book's runs lost half their throughput when this silently broke.
func TestStepKeepsStateResident(t *testing.T) {
	goBackend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	counter := backend.CountTransfers(goBackend)
	defer counter.Finalize()
	cfg := config.Defaults()
	cfg.Name, cfg.Net.Name = "residency", testnets.BNDropoutMLP
	cfg.Optimizer.Name, cfg.Optimizer.LR, cfg.Optimizer.WeightDecay = "adamw", 1e-3, 0.05
	cfg.EMA.Decay = 0.99
	if err := recipe.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	ctx := NewContext(cfg)
	step := testStepOn(t, counter, ctx, cfg, nil)

	const n = 2
	rng := rand.New(rand.NewPCG(1, 2))
	batchBytes := int64(n*28*28*4 + n*4)
	for i := 1; i <= 4; i++ {
		x, y := randomBatch(rng, n) // A new batch every step, as the loader gives.
		sc := Scalars{LR: 1e-3, Update: i, EMADecay: 0.99, EMAFresh: i == 1}
		in0, out0 := counter.Transferred()
		if _, err := step.Run(x, y, sc); err != nil {
			t.Fatal(err)
		}
		in1, out1 := counter.Transferred()
		if i == 1 {
			continue // Variables are initialised and sent once.
		}
		scalars := int64(4 * step.NumScalars())
		if in, out := in1-in0, out1-out0; in != batchBytes+scalars || out > 256 {
			t.Errorf("step %d moved %d bytes in and %d out; want %d in (batch %d + %d scalars) and at most 256 out (loss, correct count, the guard's flags)",
				i, in, out, batchBytes+scalars, batchBytes, scalars)
		}
	}
	var state int64
	ctx.EnumerateVariables(func(v *context.Variable) { state += int64(v.Shape().Memory()) })
	if state < 25*batchBytes {
		t.Errorf("the state is %d bytes, only %.0f× the batch: the test would not see it move", state, float64(state)/float64(batchBytes))
	}
}
