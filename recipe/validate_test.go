package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
)

// TestRecipeTrapsAreRefused: each mutation of a valid recipe is refused with an error naming the key
// and what was expected; the unmutated recipe passes.
func TestRecipeTrapsAreRefused(t *testing.T) {
	base := func() config.Config {
		c := config.Defaults()
		c.Name = "trap"
		c.Epochs = 10
		c.Schedule = config.ScheduleConfig{Name: "cosine", WarmupEpochs: 2}
		return c
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("base recipe refused: %v", err)
	}
	cases := []struct {
		name, want string
		mutate     func(*config.Config)
	}{
		{"warmup start without warmup", "schedule.warmup_start_lr: got 0.01 without a warmup",
			func(c *config.Config) { c.Schedule.WarmupEpochs, c.Schedule.WarmupStartLR = 0, 0.01 }},
		{"ema warmup without ema", "ema.warmup: false without an EMA", func(c *config.Config) { c.EMA.Warmup = false }},
		{"bce divisor on softmax", `loss.bce_divisor: got "batch" with loss.name softmax_ce`,
			func(c *config.Config) { c.Loss.BCEDivisor = "batch" }},
		{"crop ratio without crop", "data.augment.random_resized_crop_ratio: got [0.5 2] without random_resized_crop_scale",
			func(c *config.Config) {
				c.Data.Source, c.Data.Augment.RandomResizedCropRatio = "imagefolder", []float64{0.5, 2}
			}},
		{"mixup prob without mixing", "data.augment.mixup_prob: got 0.5 with mixup_alpha and cutmix_alpha both 0",
			func(c *config.Config) { c.Data.Augment.MixupProb = 0.5 }},
		{"switch prob with mixup only", "data.augment.mixup_switch_prob: got 0.8",
			func(c *config.Config) { c.Data.Augment.MixupAlpha, c.Data.Augment.MixupSwitchProb = 0.2, 0.8 }},
		{"eval size on an idx source", "data.eval_image_size: got 32 with data.source mnist",
			func(c *config.Config) { c.Data.EvalImageSize = 32 }},
		{"eval size on ViT", "data.eval_image_size: got 256, but net vit_tiny only takes",
			func(c *config.Config) {
				c.Data.Source, c.Net.Name, c.Data.EvalImageSize = "imagefolder", "vit_tiny", 256
			}},
		{"erasing mode without erasing", `data.augment.random_erasing_mode: got "const" with random_erasing 0`,
			func(c *config.Config) { c.Data.Augment.RandomErasingMode = "const" }},
		// Already refused by validateRecipe: an optimizer option foreign to the optimizer.
		{"momentum with adamw", "optimizer.momentum: got 0.9, but optimizer adamw has no momentum",
			func(c *config.Config) { c.Optimizer.Name, c.Optimizer.Momentum = "adamw", 0.9 }},
		{"nesterov with lamb", "optimizer.nesterov: only sgd has a Nesterov form",
			func(c *config.Config) { c.Optimizer.Name, c.Optimizer.Nesterov = "lamb", true }},
		{"rho with sgd", "optimizer.rho: got 0.9, but optimizer sgd has no rho", func(c *config.Config) { c.Optimizer.Rho = 0.9 }},
		{"lr_outside with sgd", "optimizer.lr_outside: only rmsprop_tf has this form",
			func(c *config.Config) { c.Optimizer.LROutside = true }},
	}
	for _, tc := range cases {
		c := base()
		tc.mutate(&c)
		err := Validate(c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	// Near misses stay valid: warmup one epoch short of the run; milestones inside it; a steps run's
	// warmup in epochs is left to CheckScheduleLength.
	for _, mutate := range []func(*config.Config){
		func(c *config.Config) { c.Schedule.WarmupEpochs = 9.5 },
		func(c *config.Config) {
			c.Schedule = config.ScheduleConfig{Name: "multistep", DecayRate: 0.1, Milestones: []float64{5, 9}}
		},
		func(c *config.Config) { c.Steps = 3 },
		// a quick try shorter than the warmup: RunWarmup shortens it
		func(c *config.Config) { c.Steps, c.Schedule.WarmupEpochs, c.Schedule.WarmupSteps = 20, 0, 50 },
		func(c *config.Config) { c.Loss.Name, c.Loss.BCEDivisor = "bce", "batch" },
	} {
		c := base()
		mutate(&c)
		if err := Validate(c); err != nil {
			t.Errorf("a valid recipe was refused: %v", err)
		}
	}
}

func TestReplicasConfig(t *testing.T) {
	dir := t.TempDir()
	load := func(yaml string) error {
		path := filepath.Join(dir, "r.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, nil)
		return err
	}
	if err := load("backend: xla:cuda\nreplicas: 4\ndata: {batch_size: 256}\n"); err != nil {
		t.Errorf("4 replicas of batch 256 on xla:cuda: %v", err)
	}
	if config.Defaults().Replicas != 1 || config.Defaults().DataParallel != (config.DataParallelConfig{Mode: "spmd", SyncBN: true}) {
		t.Errorf("default replicas %d, data_parallel %+v", config.Defaults().Replicas, config.Defaults().DataParallel)
	}
	// The pure-Go backend opens with as many devices as replicas (pjrt.ForReplicas), or with those
	// its config names; XLA's backends take either mode.
	for _, yaml := range []string{"replicas: 2\n", "backend: go\nreplicas: 4\n", "backend: go:devices=4\nreplicas: 2\n",
		"backend: go:nofuse\nreplicas: 2\ndata_parallel: {sync_bn: false}\n", "backend: xla:cuda\nreplicas: 2\ndata_parallel: {mode: auto}\n"} {
		if err := load(yaml); err != nil {
			t.Errorf("%q: %v", yaml, err)
		}
	}
	for yaml, want := range map[string]string{
		"backend: xla:cuda\nreplicas: 0\n":                                 "replicas: got 0",
		"backend: xla:cuda\nreplicas: 3\ndata: {batch_size: 128}\n":        "expected a multiple of 3",
		"backend: go:devices=1\nreplicas: 2\n":                             `backend "go:devices=1" has 1 device(s)`,
		"backend: go:devices=2,nofuse\nreplicas: 4\n":                      "use backend go (opened with as many devices as replicas) or go:devices=4",
		"backend: xla:cuda\nreplicas: x":                                   "expected an integer",
		"replicas: 2\ndata_parallel: {mode: auto}\n":                       "data_parallel.mode: auto needs XLA's automatic partitioner",
		"data_parallel: {mode: shardy}\n":                                  "data_parallel.mode: got \"shardy\", expected one of: spmd, auto",
		"backend: xla:cuda\ndata_parallel: {mode: auto, sync_bn: false}\n": "data_parallel.sync_bn: false needs data_parallel.mode spmd",
	} {
		err := load(yaml)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want an error with %q", yaml, err, want)
		}
	}
}

func TestAugmentKeysValidated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.yaml")
	os.WriteFile(path, []byte("data:\n  augment:\n    mixup_alpha: 0.8\n    cutmix_alpha: 1.0\n"), 0o644)
	cfg, err := Load(path, nil)
	if err != nil {
		t.Fatalf("mixup on MNIST (a batch operation): %v", err)
	}
	if a := cfg.Data.Augment; !a.Mixing() || a.MixupProb != 1 || a.MixupSwitchProb != 0.5 || a.RandomErasingMode != "pixel" {
		t.Errorf("augment %+v: want mixing with timm's defaults prob 1, switch 0.5, mode pixel", a)
	}
	for _, c := range []struct{ set, key string }{
		{"data.augment.mixup_alpha=-1", "data.augment.mixup_alpha"},
		{"data.augment.cutmix_alpha=-0.5", "data.augment.cutmix_alpha"},
		{"data.augment.mixup_prob=1.5", "data.augment.mixup_prob"},
		{"data.augment.mixup_switch_prob=-0.1", "data.augment.mixup_switch_prob"},
		{"data.augment.random_erasing=2", "data.augment.random_erasing"},
		{"data.augment.random_erasing_mode=noise", "data.augment.random_erasing_mode"},
		{"data.augment.random_erasing=0.25", "per-example augmentation"}, // not on MNIST
		{"data.augment.rand_augment=rand-m9-x3", "data.augment.rand_augment"},
		{"data.augment.rand_augment=m9", "rand-m{M}"}, // the message gives the grammar
		{"data.augment.rand_augment=rand-m9", "per-example augmentation"},
		{"data.augment.auto_augment=original", "data.augment.auto_augment"}, // timm's policy is not torchvision's
		{"data.augment.auto_augment=imagenet", "per-example augmentation"},
		{"data.augment.auto_augment_interpolation=bicubic", "data.augment.auto_augment_interpolation"},
	} {
		_, err := Load(path, []string{c.set})
		if err == nil || !strings.Contains(err.Error(), c.key) || !strings.Contains(err.Error(), path) {
			t.Errorf("--set %s: %v", c.set, err)
		}
	}
	if _, err := Load(path, []string{"data.augment.auto_augment=imagenet", "data.augment.rand_augment=rand-m9"}); err == nil ||
		!strings.Contains(err.Error(), "data.augment.auto_augment") || !strings.Contains(err.Error(), "exclusive") {
		t.Errorf("auto_augment with rand_augment: %v", err)
	}
}
