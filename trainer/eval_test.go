package trainer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
	"github.com/trainer/trainer/schedule"
	"github.com/trainer/trainer/trainstep"
)

// floatValues returns the flat float32 values of every variable whose scope starts with prefix.
func floatValues(ctx *context.Context, prefix string) map[string][]float32 {
	out := map[string][]float32{}
	ctx.EnumerateVariables(func(v *context.Variable) {
		if strings.HasPrefix(v.Scope(), prefix) && v.DType().IsFloat() {
			out[v.ScopeAndName()] = tensors.MustCopyFlatData[float32](v.MustValue())
		}
	})
	return out
}

// The EMA eval context holds the shadows (weights and BatchNorm statistics) under the model scope,
// where the eval pass reads the net's variables.
func TestEMAContextHoldsTheShadows(t *testing.T) {
	cfg := config.Defaults()
	cfg.Name, cfg.Net.Name = "ema", testnets.BNDropoutMLP
	cfg.EMA = config.EMAConfig{Decay: 0.99, Warmup: true}
	s, err := newSession(cfg)
	if err != nil {
		t.Fatal(err)
	}
	step, err := s.newStep()
	if err != nil {
		t.Fatal(err)
	}
	defer step.Finalize()
	rng := rand.New(rand.NewPCG(1, 1))
	images, labels := make([]float32, 8*28*28), make([]int32, 8)
	for i := range images {
		images[i] = float32(rng.NormFloat64())
	}
	for i := range labels {
		labels[i] = int32(rng.IntN(10))
	}
	x, y := tensors.FromFlatDataAndDimensions(images, 8, 28, 28, 1), tensors.FromFlatDataAndDimensions(labels, 8)
	for tt := range 3 {
		sc := trainstep.Scalars{LR: 0.1, Update: tt + 1, EMADecay: schedule.EMADecay(cfg.EMA, tt), EMAFresh: tt == 0}
		if _, err := step.Run(x, y, sc); err != nil {
			t.Fatal(err)
		}
	}
	ectx, err := s.emaContext()
	if err != nil {
		t.Fatal(err)
	}
	shadows := floatValues(s.ctx, trainstep.EMAScope)
	for _, name := range []string{"/model/bn/running_var", "/model/fc1/weight"} {
		got, want := floatValues(ectx, "/model")[name], shadows[trainstep.EMAScope+name]
		if len(want) == 0 || !slices.Equal(got, want) {
			t.Errorf("EMA eval context %s %v, shadow %v", name, got, want)
		}
	}
}
