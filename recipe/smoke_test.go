package recipe

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/trainer/trainer/config"
)

// configFiles lists the repository's recipes.
func configFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs found under ../configs: %v", err)
	}
	return files
}

// flatConfig renders cfg as "section.key" -> value, to compare two configs key by key.
func flatConfig(t *testing.T, cfg config.Config) map[string]string {
	t.Helper()
	var tree map[string]any
	if err := yaml.Unmarshal(cfg.YAML(), &tree); err != nil {
		t.Fatal(err)
	}
	flat := map[string]string{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			flat[prefix+k] = fmt.Sprint(v)
		}
	}
	walk("", tree)
	return flat
}

// TestSmokeChangesOnlyTheDocumentedKeys: smoke mode is the override set SmokeKeys and nothing else, so
// the optimizer, schedule shape, EMA, loss, augmentation and net options a smoke run exercises are the
// recipe's own; and docs/recipes.md lists every key of the set.
func TestSmokeChangesOnlyTheDocumentedKeys(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "recipes.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range config.SmokeKeys {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("docs/recipes.md does not list the smoke key `%s`", key)
		}
	}
	changed := map[string]bool{}
	for _, path := range configFiles(t) {
		recipe, err := Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		smoke, sets, err := LoadSmoke(path, nil, "/tmp/smoke-data")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sets {
			key, _, _ := strings.Cut(s, "=")
			if !slices.Contains(config.SmokeKeys, key) {
				t.Errorf("%s: smoke sets %s, which is not in SmokeKeys", path, key)
			}
		}
		a, b := flatConfig(t, recipe), flatConfig(t, smoke)
		for key, v := range a {
			if b[key] != v {
				changed[key] = true
				if !slices.Contains(config.SmokeKeys, key) {
					t.Errorf("%s: smoke changed %s from %s to %s; it is not in SmokeKeys", path, key, v, b[key])
				}
			}
		}
	}
	if !changed["net.width"] || !changed["schedule.min_lr"] || !changed["optimizer.accumulate_steps"] {
		t.Errorf("expected the smoke set to change net.width, schedule.min_lr (vit_tiny_adamw_imagenette's floor is above its smoke peak) and optimizer.accumulate_steps (the accumulating recipes); changed: %v", changed)
	}

	// One recipe in full: the smoke run keeps its law, schedule shape, EMA and net options.
	smoke, _, err := LoadSmoke(filepath.Join("..", "configs", "effnet_b0_rmsprop.yaml"), nil, "d")
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprintf("%s %g %g %s %g %g %d %d %g %g %g %s %d %g %d %g",
		smoke.Optimizer.Name, smoke.Optimizer.LR, smoke.Optimizer.Rho, smoke.Schedule.Name, smoke.Schedule.DecayRate,
		smoke.EMA.Decay, smoke.Steps, smoke.Schedule.WarmupSteps, smoke.Schedule.WarmupEpochs, smoke.Net.Width,
		smoke.Net.BNDecay, smoke.Data.Source, smoke.Net.ImageSize, smoke.Net.DropPath, smoke.Data.BatchSize, smoke.Loss.LabelSmoothing)
	want := "rmsprop_tf 0.016 0.9 exponential 0.97 0.9999 3 1 0 0.0625 0.99 imagefolder 32 0.2 4 0.1"
	if got != want {
		t.Errorf("effnet_b0_rmsprop in smoke mode:\n got %s\nwant %s", got, want)
	}
}

// TestRecipesFitTheirRunLength checks every recipe's schedule against its run length on its real
// dataset (ImageNet 1,281,167, Imagenette 9,469, CIFAR-10 50,000, MNIST 60,000 training images), as
// Config.CheckScheduleLength will once the split is open.
func TestRecipesFitTheirRunLength(t *testing.T) {
	for _, path := range configFiles(t) {
		cfg, err := Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		switch {
		case cfg.Data.Source == "cifar10":
			n = 50000
		case cfg.Data.Source == "mnist":
			n = 60000
		case cfg.Data.Dataset == "imagenette" || strings.Contains(cfg.Data.Dir, "imagenette"):
			n = 9469
		case strings.Contains(cfg.Data.Dir, "imagenet"):
			n = 1281167
		default:
			t.Fatalf("%s: which dataset does data.dir %q hold?", path, cfg.Data.Dir)
		}
		k := cfg.Optimizer.AccumulateSteps
		micro := n / cfg.Data.BatchSize
		total := cfg.Epochs * micro / k
		if cfg.Steps > 0 {
			total = cfg.Steps
		}
		if err := cfg.CheckScheduleLength(total, float64(micro)/float64(k)); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}
