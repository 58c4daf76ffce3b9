package trainstep

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/trainer/trainer/backend"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/graphs/testnets"
)

func TestMatchKey(t *testing.T) {
	for _, c := range []struct {
		pattern, key string
		want         bool
	}{
		{"layer1", "layer1.0.conv1.weight", true},
		{"layer1.*", "layer1.0.conv1.weight", true},
		{"layer1", "layer10.weight", false},
		{"layer1", "layer1", true},
		{"*", "fc.bias", true},
		{"fc", "fc.bias", true},
		{"fc", "fc1.bias", false},
		{"fc*", "fc1.bias", true},
		{"layer[12]", "layer2.3.bn1.weight", true},
		{"layer[12]", "layer3.0.bn1.weight", false},
		{"*.bn1", "layer2.3.bn1.weight", true},
		{"layer4.?.conv3", "layer4.2.conv3.weight", true},
		{"conv1.weight", "conv1.weight", true},
		{"conv1.weight", "conv1.weight_g", false},
	} {
		if got := MatchKey(c.pattern, c.key); got != c.want {
			t.Errorf("MatchKey(%q, %q) = %v, want %v", c.pattern, c.key, got, c.want)
		}
	}
}

// freezeConfig is a BatchNorm MLP (fc1, bn, fc2) under SGD with momentum and weight decay.
func freezeConfig(edit func(*config.OptimizerConfig)) config.Config {
	cfg := config.Defaults()
	cfg.Name, cfg.Net.Name = "freeze", testnets.BNDropoutMLP
	cfg.Data.BatchSize = 8
	cfg.Optimizer.Momentum, cfg.Optimizer.WeightDecay, cfg.Optimizer.ClipGradNorm = 0.9, 0.01, 1
	edit(&cfg.Optimizer)
	return cfg
}

// Frozen variables keep their values, get no optimizer slots (Variables agrees, so checkpoints stay
// complete-or-refused), and do not count in the clipping norm; the others train, and BatchNorm's
// running statistics still move under a frozen BatchNorm.
func TestFreezeKeepsVariablesAndTheirSlotsOut(t *testing.T) {
	cfg := freezeConfig(func(o *config.OptimizerConfig) { o.Freeze = []string{"fc1", "bn"} })
	x, y := randomBatch(rand.New(rand.NewPCG(1, 2)), 8)
	ctx, step := primedStep(t, cfg, x)
	before := values(ctx, "/model")
	for i := range 3 {
		if _, err := step.Run(x, y, Scalars{LR: 0.1, Update: i + 1, Apply: true}); err != nil {
			t.Fatal(err)
		}
	}
	after := values(ctx, "/model")
	for name, v := range after {
		frozen := strings.Contains(name, "/fc1/") || (strings.Contains(name, "/bn/") && !strings.Contains(name, "running"))
		if same := slices.Equal(v, before[name]); same != frozen {
			t.Errorf("%s: unchanged %v after 3 steps, frozen %v", name, same, frozen)
		}
	}
	slots := values(ctx, "/optimizer")
	var names []string
	for name := range slots {
		names = append(names, name)
	}
	slices.Sort(names)
	if len(names) != 2 || !strings.Contains(names[0], "/fc2/") || !strings.Contains(names[1], "/fc2/") {
		t.Errorf("optimizer slots %v, want fc2's two velocities only", names)
	}
	b, err := backend.Open(cfg.Backend)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	net, _ := NetOf(cfg)
	want, err := Variables(b, cfg, net)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if _, ok := want[name]; !ok {
			t.Errorf("Variables does not list the slot %s", name)
		}
	}
	for name := range want {
		if strings.HasPrefix(name, "/optimizer/") && !slices.Contains(names, name) {
			t.Errorf("Variables lists %s, which the frozen step never made", name)
		}
	}
}

// lr_mult scales a group's learning rate: after one plain-SGD step from the same weights and batch,
// fc1's change is the factor times its change at the full rate, the rest move identically; the
// longest matching pattern wins.
func TestLRMultScalesTheGroupsRate(t *testing.T) {
	delta := func(mult map[string]float64) map[string][]float64 {
		x, y := randomBatch(rand.New(rand.NewPCG(3, 4)), 8) // the same batch, on each run's backend
		cfg := freezeConfig(func(o *config.OptimizerConfig) {
			o.Momentum, o.ClipGradNorm, o.LRMult = 0, 0, mult
		})
		cfg.Net.Dropout = 0
		ctx, step := primedStep(t, cfg, x)
		before := values(ctx, "/model")
		if _, err := step.Run(x, y, Scalars{LR: 0.1, Update: 1, Apply: true}); err != nil {
			t.Fatal(err)
		}
		out := map[string][]float64{}
		for name, v := range values(ctx, "/model") {
			for i := range v {
				out[name] = append(out[name], float64(v[i]-before[name][i]))
			}
		}
		return out
	}
	full := delta(nil)
	scaled := delta(map[string]float64{"*": 1, "fc1": 0.25, "fc1.bias": 0.5})
	for name, d := range full {
		factor := 1.0
		switch {
		case strings.HasSuffix(name, "/fc1/weight"):
			factor = 0.25
		case strings.HasSuffix(name, "/fc1/bias"):
			factor = 0.5
		}
		for i := range d {
			// The changes are differences of float32 weights of about 0.1: each is off by up to an ulp.
			if math.Abs(scaled[name][i]-factor*d[i]) > 1e-6*math.Abs(d[i])+2e-8 {
				t.Fatalf("%s[%d]: changed by %g, want %g × %g", name, i, scaled[name][i], factor, d[i])
			}
		}
	}
}

func TestFreezePatternsMustMatch(t *testing.T) {
	for _, c := range []struct {
		edit func(*config.OptimizerConfig)
		want string
	}{
		{func(o *config.OptimizerConfig) { o.Freeze = []string{"layer1"} }, `optimizer.freeze "layer1": matches no trained variable`},
		{func(o *config.OptimizerConfig) { o.LRMult = map[string]float64{"head": 2} }, `optimizer.lr_mult "head": matches no trained variable`},
		{func(o *config.OptimizerConfig) { o.Freeze = []string{"*"} }, "freezes every trained variable"},
	} {
		_, step := testStep(t, freezeConfig(c.edit))
		x, y := randomBatch(rand.New(rand.NewPCG(5, 6)), 8)
		if _, err := step.Run(x, y, Scalars{LR: 0.1, Update: 1, Apply: true}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}
