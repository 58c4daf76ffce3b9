package trainer

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRecipeTrapsAreRefused: each mutation of a valid recipe is refused with an error naming the key
// and what was expected; the unmutated recipe passes.
func TestRecipeTrapsAreRefused(t *testing.T) {
	base := func() Config {
		c := Defaults()
		c.Name = "trap"
		c.Epochs = 10
		c.Schedule = ScheduleConfig{Name: "cosine", WarmupEpochs: 2}
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("base recipe refused: %v", err)
	}
	cases := []struct {
		name, want string
		mutate     func(*Config)
	}{
		{"warmup steps beyond a steps run", "schedule.warmup_steps: 50 warmup steps in a run of 20 steps",
			func(c *Config) { c.Steps, c.Schedule.WarmupEpochs, c.Schedule.WarmupSteps = 20, 0, 50 }},
		{"warmup start without warmup", "schedule.warmup_start_lr: got 0.01 without a warmup",
			func(c *Config) { c.Schedule.WarmupEpochs, c.Schedule.WarmupStartLR = 0, 0.01 }},
		{"ema warmup without ema", "ema.warmup: false without an EMA", func(c *Config) { c.EMA.Warmup = false }},
		{"bce divisor on softmax", `loss.bce_divisor: got "batch" with loss.name softmax_ce`,
			func(c *Config) { c.Loss.BCEDivisor = "batch" }},
		{"crop ratio without crop", "data.augment.random_resized_crop_ratio: got [0.5 2] without random_resized_crop_scale",
			func(c *Config) {
				c.Data.Source, c.Data.Augment.RandomResizedCropRatio = "imagefolder", []float64{0.5, 2}
			}},
		{"mixup prob without mixing", "data.augment.mixup_prob: got 0.5 with mixup_alpha and cutmix_alpha both 0",
			func(c *Config) { c.Data.Augment.MixupProb = 0.5 }},
		{"switch prob with mixup only", "data.augment.mixup_switch_prob: got 0.8",
			func(c *Config) { c.Data.Augment.MixupAlpha, c.Data.Augment.MixupSwitchProb = 0.2, 0.8 }},
		{"eval size on an idx source", "data.eval_image_size: got 32 with data.source mnist",
			func(c *Config) { c.Data.EvalImageSize = 32 }},
		{"eval size on ViT", "data.eval_image_size: got 256, but net vit_tiny only takes",
			func(c *Config) { c.Data.Source, c.Net.Name, c.Data.EvalImageSize = "imagefolder", "vit_tiny", 256 }},
		{"erasing mode without erasing", `data.augment.random_erasing_mode: got "const" with random_erasing 0`,
			func(c *Config) { c.Data.Augment.RandomErasingMode = "const" }},
		// Already refused by validateRecipe: an optimizer option foreign to the optimizer.
		{"momentum with adamw", "optimizer.momentum: got 0.9, but optimizer adamw has no momentum",
			func(c *Config) { c.Optimizer.Name, c.Optimizer.Momentum = "adamw", 0.9 }},
		{"nesterov with lamb", "optimizer.nesterov: only sgd has a Nesterov form",
			func(c *Config) { c.Optimizer.Name, c.Optimizer.Nesterov = "lamb", true }},
		{"rho with sgd", "optimizer.rho: got 0.9, but optimizer sgd has no rho", func(c *Config) { c.Optimizer.Rho = 0.9 }},
		{"lr_outside with sgd", "optimizer.lr_outside: only rmsprop_tf has this form",
			func(c *Config) { c.Optimizer.LROutside = true }},
	}
	for _, tc := range cases {
		c := base()
		tc.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Near misses stay valid: warmup one epoch short of the run; milestones inside it; a steps run's
	// warmup in epochs is left to CheckScheduleLength.
	for _, mutate := range []func(*Config){
		func(c *Config) { c.Schedule.WarmupEpochs = 9.5 },
		func(c *Config) {
			c.Schedule = ScheduleConfig{Name: "multistep", DecayRate: 0.1, Milestones: []float64{5, 9}}
		},
		func(c *Config) { c.Steps = 3 },
		func(c *Config) { c.Loss.Name, c.Loss.BCEDivisor = "bce", "batch" },
	} {
		c := base()
		mutate(&c)
		if err := c.Validate(); err != nil {
			t.Errorf("a valid recipe was refused: %v", err)
		}
	}
}

// TestCheckScheduleLength: schedule positions in epochs against the run's length in optimizer steps,
// here 10 epochs of 30 steps (300 steps), or a 100-step run.
func TestCheckScheduleLength(t *testing.T) {
	cases := []struct {
		name     string
		schedule ScheduleConfig
		total    int
		want     string // "" means valid
	}{
		{"warmup in epochs outlasting a steps run", ScheduleConfig{Name: "cosine", WarmupEpochs: 5}, 100,
			"schedule.warmup_epochs: the warmup is 150 optimizer steps, the run is 100 optimizer steps (3.333 epochs of 30 steps)"},
		{"warmup as long as the run", ScheduleConfig{Name: "cosine", WarmupEpochs: 10}, 300, "schedule.warmup_epochs: the warmup is 300"},
		{"warmup steps as long as the run", ScheduleConfig{Name: "cosine", WarmupSteps: 300}, 300, "schedule.warmup_steps: the warmup is 300"},
		{"warmup one step short", ScheduleConfig{Name: "cosine", WarmupSteps: 299}, 300, ""},
		{"step decay never reached", ScheduleConfig{Name: "step", DecayRate: 0.1, DecayEpochs: 30}, 300,
			"schedule.decay_epochs: the step schedule decays every 30 epochs"},
		{"step decay at the last epoch", ScheduleConfig{Name: "step", DecayRate: 0.1, DecayEpochs: 9}, 300, ""},
		{"staircase never reached", ScheduleConfig{Name: "exponential", DecayRate: 0.97, DecayEpochs: 12, Staircase: true}, 300,
			"schedule.decay_epochs: the exponential schedule decays every 12 epochs"},
		{"smooth exponential decays anyway", ScheduleConfig{Name: "exponential", DecayRate: 0.97, DecayEpochs: 12}, 300, ""},
		{"a 90-epoch multistep in a 10-epoch run", ScheduleConfig{Name: "multistep", DecayRate: 0.1, Milestones: []float64{30, 60}}, 300,
			"schedule.milestones: a milestone at epoch 60, the run is 300 optimizer steps (10 epochs of 30 steps)"},
		{"milestones inside the run", ScheduleConfig{Name: "multistep", DecayRate: 0.1, Milestones: []float64{5, 9.5}}, 300, ""},
		{"no warmup", ScheduleConfig{Name: "constant"}, 1, ""},
	}
	for _, tc := range cases {
		c := Defaults()
		c.Schedule = tc.schedule
		err := c.CheckScheduleLength(tc.total, 30)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestFlagshipWithoutDataStopsAtOnce: the EfficientNet-B0 recipe without ImageNet names the missing
// path, the key and how to pack one, and creates no run directory.
func TestFlagshipWithoutDataStopsAtOnce(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "imagenet")
	runDir := t.TempDir()
	cfg, err := LoadConfig(filepath.Join("..", "configs", "effnet_b0_rmsprop.yaml"), []string{"data.dir=" + missing, "run_dir=" + runDir})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(cfg, RunOptions{Out: io.Discard})
	for _, want := range []string{"data.train", filepath.Join(missing, "train"), "not found", "trainer data pack"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error containing %q", err, want)
		}
	}
	if entries, _ := os.ReadDir(runDir); len(entries) != 0 {
		t.Errorf("the failed run wrote %d entries under run_dir", len(entries))
	}
}
