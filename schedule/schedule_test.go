package schedule

import (
	"math"
	"strings"
	"testing"

	"github.com/trainer/trainer/checkpoint"
	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
)

func TestScheduleBoundaries(t *testing.T) {
	base := config.Defaults()
	base.Name = "schedule"
	base.Optimizer.LR = 0.1
	type at struct {
		step int
		want float64
	}
	cases := []struct {
		name     string
		schedule config.ScheduleConfig
		perEpoch float64
		total    int
		points   []at
	}{
		{"warmup steps from a start value, then constant", config.ScheduleConfig{Name: "constant", WarmupSteps: 4, WarmupStartLR: 0.02}, 10, 100,
			[]at{{0, 0.04}, {1, 0.06}, {3, 0.1}, {4, 0.1}, {99, 0.1}}},
		{"cosine to a floor: end of warmup, midpoint, last step", config.ScheduleConfig{Name: "cosine", WarmupEpochs: 1, MinLR: 0.001}, 10, 110,
			[]at{{9, 0.1}, {10, 0.1}, {60, 0.001 + 0.099*0.5}, {109, 0.001 + 0.099*0.5*(1+math.Cos(math.Pi*99/100))}, {110, 0.001}}},
		{"step: staircase edges", config.ScheduleConfig{Name: "step", DecayRate: 0.1, DecayEpochs: 30}, 10, 900,
			[]at{{0, 0.1}, {299, 0.1}, {300, 0.01}, {599, 0.01}, {600, 0.001}, {899, 0.001}}},
		{"multistep at milestones", config.ScheduleConfig{Name: "multistep", DecayRate: 0.5, Milestones: []float64{2, 5}}, 10, 100,
			[]at{{19, 0.1}, {20, 0.05}, {49, 0.05}, {50, 0.025}, {99, 0.025}}},
		{"exponential, smooth (MobileNetV2: 0.98 per epoch)", config.ScheduleConfig{Name: "exponential", DecayRate: 0.98, DecayEpochs: 1}, 4, 40,
			[]at{{0, 0.1}, {2, 0.1 * math.Pow(0.98, 0.5)}, {4, 0.098}, {39, 0.1 * math.Pow(0.98, 9.75)}}},
		{"exponential staircase under warmup (EfficientNet: 0.97 per 2.4 epochs)",
			config.ScheduleConfig{Name: "exponential", DecayRate: 0.97, DecayEpochs: 2.4, Staircase: true, WarmupEpochs: 1}, 10, 100,
			[]at{{0, 0.01}, {9, 0.1}, {10, 0.1}, {23, 0.1}, {24, 0.097}, {47, 0.097}, {48, 0.1 * 0.97 * 0.97}, {99, 0.1 * math.Pow(0.97, 4)}}},
		{"fractional steps per epoch (accumulation)", config.ScheduleConfig{Name: "step", DecayRate: 0.1, DecayEpochs: 1}, 2.5, 10,
			[]at{{2, 0.1}, {3, 0.01}, {4, 0.01}, {5, 0.001}}},
	}
	for _, c := range cases {
		cfg := base
		cfg.Schedule = c.schedule
		if err := recipe.Validate(cfg); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, p := range c.points {
			if got := LearningRate(cfg, p.step, c.total, c.perEpoch); math.Abs(got-p.want) > 1e-12 {
				t.Errorf("%s: step %d: lr %.15g, want %.15g", c.name, p.step, got, p.want)
			}
		}
	}
}

func TestPeakLRScalesWithTheGlobalBatch(t *testing.T) {
	cfg := config.Defaults()
	cfg.Optimizer.LR = 0.1
	cfg.Data.BatchSize = 128
	if got := cfg.PeakLR(); got != 0.1 {
		t.Errorf("no scaling: %g", got)
	}
	cfg.Optimizer.LRBaseBatch = 256
	cfg.Optimizer.AccumulateSteps = 4 // global batch 512
	if got := cfg.PeakLR(); math.Abs(got-0.2) > 1e-15 {
		t.Errorf("lr 0.1 per 256 at global batch 512: %g, want 0.2", got)
	}
	cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupSteps: 2}
	if got := LearningRate(cfg, 1, 10, 5); math.Abs(got-0.2) > 1e-15 {
		t.Errorf("end of warmup: %g, want the scaled peak 0.2", got)
	}
}

func TestEMADecayWarmup(t *testing.T) {
	c := config.EMAConfig{Decay: 0.9999, Warmup: true}
	for _, p := range []struct {
		t    int
		want float64
	}{{0, 0.1}, {1, 2.0 / 11}, {8, 0.5}, {89990, 89991.0 / 90000}, {89991, 0.9999}, {1000000, 0.9999}} {
		if got := EMADecay(c, p.t); math.Abs(got-p.want) > 1e-15 {
			t.Errorf("t=%d: %.17g, want %.17g", p.t, got, p.want)
		}
	}
	c.Warmup = false
	if got := EMADecay(c, 0); got != 0.9999 {
		t.Errorf("without warmup: %g", got)
	}
}

func TestLearningRateSchedule(t *testing.T) {
	cfg := config.Defaults()
	cfg.Optimizer.LR = 0.1
	cfg.Schedule = config.ScheduleConfig{Name: "cosine", WarmupEpochs: 1, MinLR: 0.001}
	const perEpoch, total = 10, 110
	if got := LearningRate(cfg, 0, total, perEpoch); !near(got, 0.01) {
		t.Errorf("first warmup step: %g, want 0.01", got)
	}
	if got := LearningRate(cfg, 9, total, perEpoch); !near(got, 0.1) {
		t.Errorf("last warmup step: %g, want 0.1", got)
	}
	if got := LearningRate(cfg, 10, total, perEpoch); !near(got, 0.1) {
		t.Errorf("cosine start: %g, want 0.1", got)
	}
	if got := LearningRate(cfg, 60, total, perEpoch); !near(got, 0.001+0.099*0.5) {
		t.Errorf("cosine midpoint: %g, want %g", got, 0.001+0.099*0.5)
	}
	if got := LearningRate(cfg, total, total, perEpoch); !near(got, 0.001) {
		t.Errorf("cosine end: %g, want 0.001", got)
	}
	cfg.Schedule.Name = "constant"
	if got := LearningRate(cfg, 50, total, perEpoch); got != 0.1 {
		t.Errorf("constant: %g", got)
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// Length counts optimizer steps: epochs × batches / k, or steps when set; per epoch is fractional
// under accumulation.
func TestLength(t *testing.T) {
	cfg := config.Defaults()
	cfg.Epochs = 3
	cfg.Optimizer.AccumulateSteps = 4
	if total, perEpoch, err := Length(cfg, 10); err != nil || total != 7 || perEpoch != 2.5 {
		t.Errorf("3 epochs of 10 batches, k = 4: %d steps, %g per epoch, %v; want 7 and 2.5", total, perEpoch, err)
	}
	cfg.Steps = 5
	if total, _, err := Length(cfg, 10); err != nil || total != 5 {
		t.Errorf("steps 5: %d, %v", total, err)
	}
}

// TestLengthRefusesRunsPastMaxSteps: the product epochs × batches is bounded before it is formed, so
// epochs=1e18 (which wrapped to a negative step count) and a product just past config.MaxSteps are
// errors naming epochs, while the longest run allowed is exact.
func TestLengthRefusesRunsPastMaxSteps(t *testing.T) {
	cfg := config.Defaults()
	for _, c := range []struct{ epochs, batches, k int }{
		{1e18, 100, 1}, {math.MaxInt, 3, 1}, {1e8, 100, 1}, {config.MaxSteps, 2, 1}, {config.MaxSteps + 1, 1, 1}, {4 * (config.MaxSteps + 1), 1, 4},
	} {
		cfg.Epochs, cfg.Optimizer.AccumulateSteps = c.epochs, c.k
		total, _, err := Length(cfg, c.batches)
		if err == nil || !strings.Contains(err.Error(), "epochs") || !strings.Contains(err.Error(), "999999999") {
			t.Errorf("epochs %d of %d batches, k %d: %d steps, %v; want an error naming epochs and the bound", c.epochs, c.batches, c.k, total, err)
		}
	}
	for _, c := range []struct{ epochs, batches, k int }{{config.MaxSteps, 1, 1}, {333_333_333, 3, 1}, {4*(config.MaxSteps+1) - 1, 1, 4}} {
		cfg.Epochs, cfg.Optimizer.AccumulateSteps = c.epochs, c.k
		if total, _, err := Length(cfg, c.batches); err != nil || total != c.epochs*c.batches/c.k {
			t.Errorf("epochs %d of %d batches, k %d: %d steps, %v; want %d", c.epochs, c.batches, c.k, total, err, c.epochs*c.batches/c.k)
		}
	}
}

// TestMaxStepsFitsACheckpointName: a run's longest length is the largest step a checkpoint names.
func TestMaxStepsFitsACheckpointName(t *testing.T) {
	if config.MaxSteps != checkpoint.MaxStep {
		t.Errorf("config.MaxSteps %d, checkpoint.MaxStep %d: want them equal", config.MaxSteps, checkpoint.MaxStep)
	}
}
