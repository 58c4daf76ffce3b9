package trainstep

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
)

// TestVariablesAreWhatAStepKeeps: Variables names exactly the variables (and shapes) a run of the step
// creates, for optimizers with and without slots, EMA, accumulation and a net with BatchNorm and
// dropout (the RNG state).
func TestVariablesAreWhatAStepKeeps(t *testing.T) {
	cases := map[string]func(*config.Config){
		"sgd momentum": func(c *config.Config) {},
		"adamw ema accumulate": func(c *config.Config) {
			c.Optimizer.Name, c.Optimizer.Momentum = "adamw", -1
			c.EMA = config.EMAConfig{Decay: 0.9}
			c.Optimizer.AccumulateSteps = 2
		},
		"rmsprop_tf": func(c *config.Config) { c.Optimizer.Name = "rmsprop_tf" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := config.Defaults()
			cfg.Name, cfg.Net.Name = "vars", testnets.BNDropoutMLP
			cfg.Data.BatchSize = 8
			edit(&cfg)
			ctx, step := testStep(t, cfg)
			x, y := randomBatch(rand.New(rand.NewPCG(1, 2)), 8)
			sc := Scalars{LR: 0.1, Update: 1, Apply: true, EMADecay: cfg.EMA.Decay, EMAFresh: true}
			if _, err := step.Run(x, y, sc); err != nil {
				t.Fatal(err)
			}
			ran := map[string]shapes.Shape{}
			ctx.EnumerateVariables(func(v *context.Variable) { ran[v.ScopeAndName()] = v.Shape() })
			b, err := backend.Open(cfg.Backend)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Finalize()
			net, err := NetOf(cfg)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Variables(b, cfg, net)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) != len(ran) {
				t.Errorf("Variables names %d variables, the step kept %d", len(want), len(ran))
			}
			for n, shape := range ran {
				if w, ok := want[n]; !ok || !w.Equal(shape) {
					t.Errorf("%s (%s): Variables says %s (listed: %v)", n, shape, w, ok)
				}
			}
			t.Logf("%d variables: %v", len(want), slices.Sorted(maps.Keys(want)))
		})
	}
}
