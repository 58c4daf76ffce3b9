package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckScheduleLength: schedule positions in epochs against the run's length in optimizer steps,
// here 10 epochs of 30 steps (300 steps), or a 100-step run.
func TestCheckScheduleLength(t *testing.T) {
	cases := []struct {
		name     string
		schedule ScheduleConfig
		total    int
		want     string // "" means valid
	}{
		// A warmup as long as the run is shortened (TestRunWarmup), not refused.
		{"warmup in epochs outlasting a steps run", ScheduleConfig{Name: "cosine", WarmupEpochs: 5}, 100, ""},
		{"warmup steps as long as the run", ScheduleConfig{Name: "cosine", WarmupSteps: 300}, 300, ""},
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

func TestGuardConfigValidation(t *testing.T) {
	cfg := Defaults()
	cfg.Name = "x"
	cfg.Guard.NonFinite = "ignore"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `guard.nonfinite: got "ignore"`) {
		t.Errorf("guard.nonfinite=ignore: %v", err)
	}
	if Defaults().Guard.NonFinite != GuardStop {
		t.Errorf("default guard.nonfinite %q, want stop", Defaults().Guard.NonFinite)
	}
}

// TestBadInputConfig: data.on_bad_record is stop (default) or skip, data.max_image_pixels >= 1
// (default Pillow's 89478485); both may change on resume, so a run stopped by a bad record resumes.
func TestBadInputConfig(t *testing.T) {
	d := Defaults()
	if d.Data.OnBadRecord != BadRecordStop || d.Data.MaxImagePixels != 89478485 {
		t.Errorf("defaults: on_bad_record %q, max_image_pixels %d", d.Data.OnBadRecord, d.Data.MaxImagePixels)
	}
	for _, c := range []struct {
		set, want string
	}{
		{"data.on_bad_record=ignore", `data.on_bad_record: got "ignore", expected stop or skip`},
		{"data.max_image_pixels=0", "data.max_image_pixels: got 0, expected >= 1"},
		{"data.max_image_pixels=1.5", "data.max_image_pixels: expected an integer"},
		{"data.on_bad_record=skip", ""},
		{"data.max_image_pixels=400000000", ""},
	} {
		_, err := Load(writeConfig(t, "seed: 1\n"), []string{c.set})
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("--set %s: %v, want %q", c.set, err, c.want)
		}
	}
	for _, key := range []string{"data.on_bad_record", "data.max_image_pixels"} {
		if !Resumable(key) {
			t.Errorf("%s cannot change on resume", key)
		}
	}
}

func TestOptimizerRefusesForeignOptions(t *testing.T) {
	cases := []struct{ body, want string }{
		{"optimizer:\n  name: adamw\n  momentum: 0.9\n", "optimizer.momentum: got 0.9, but optimizer adamw has no momentum"},
		{"optimizer:\n  name: sgd\n  beta2: 0.99\n", "optimizer sgd has no beta2"},
		{"optimizer:\n  name: lamb\n  rho: 0.9\n", "optimizer lamb has no rho"},
		{"optimizer:\n  name: rmsprop_tf\n  nesterov: true\n", "only sgd has a Nesterov form"},
		{"optimizer:\n  name: adamw\n  lr_outside: true\n", "only rmsprop_tf"},
		{"optimizer:\n  name: adam\n", "sgd, adamw, lamb, rmsprop_tf"},
		{"optimizer:\n  name: adamw\n  eps: 0\n", "optimizer.eps"},
		{"optimizer:\n  accumulate_steps: 0\n", "optimizer.accumulate_steps"},
		{"schedule:\n  name: exponential\n  decay_rate: 0.97\n", "schedule.decay_epochs"},
		{"schedule:\n  name: cosine\n  decay_rate: 0.5\n", "the cosine schedule has no decay rate"},
		{"schedule:\n  name: multistep\n  decay_rate: 0.1\n  milestones: [30, 20]\n", "increasing epochs"},
		{"schedule:\n  name: step\n  decay_rate: 0.1\n  decay_epochs: 30\n  staircase: true\n", "only the exponential schedule"},
		{"schedule:\n  warmup_steps: 5\n  warmup_epochs: 1\n", "not both"},
		{"loss:\n  name: focal\n", "softmax_ce, bce"},
		{"loss:\n  bce_target_threshold: 0.2\n", "bce only"},
		{"ema:\n  decay: 1\n", "ema.decay"},
	}
	for _, c := range cases {
		_, err := Load(writeConfig(t, c.body), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to mention %q", c.body, err, c.want)
		}
	}
	good := "optimizer:\n  name: rmsprop_tf\n  rho: 0.9\n  momentum: 0.9\n  eps: 0.001\n  lr_outside: true\n" +
		"schedule:\n  name: multistep\n  decay_rate: 0.1\n  milestones: [30, 60, 80]\nloss:\n  name: bce\n  bce_target_threshold: 0.2\n"
	cfg, err := Load(writeConfig(t, good), []string{"schedule.milestones=[10, 20]"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Schedule.Milestones) != 2 || cfg.Schedule.Milestones[1] != 20 {
		t.Errorf("milestones %v, want [10 20] from --set", cfg.Schedule.Milestones)
	}
}

// device_normalize: true with erasing or mixing is refused by name, with what to do instead; a
// bad value says which ones are accepted, naming the file and the key; YAML booleans and strings
// are both accepted, and the resolved config reads back.
func TestDeviceNormalizeConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		set  func(*Config)
		want []string
	}{
		{func(c *Config) { c.Data.Augment.RandomErasing = 0.25 },
			[]string{"data.device_normalize: true, but data.augment.random_erasing 0.25 erases in normalised space", "expected auto or false"}},
		{func(c *Config) { c.Data.Augment.CutmixAlpha = 1 },
			[]string{"data.device_normalize: true, but data.augment.mixup_alpha 0 / cutmix_alpha 1 blend", "expected auto or false"}},
		{func(c *Config) { c.Data.DeviceNormalize = "yes" },
			[]string{`data.device_normalize: got "yes", expected auto, true or false`}},
	} {
		c := Defaults()
		c.Name, c.Data.Source, c.Data.DeviceNormalize = "x", "imagefolder", "true"
		tc.set(&c)
		err := c.Validate()
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("Validate: %v, want %q", err, w)
			}
		}
	}
	// Under auto the same recipes are valid: training normalises on the host.
	c := Defaults()
	c.Name, c.Data.Source, c.Backend = "x", "imagefolder", "xla:cuda"
	c.Data.Augment.RandomErasing, c.Data.Augment.MixupAlpha = 0.25, 0.2
	if err := c.Validate(); err != nil {
		t.Errorf("auto with erasing and mixup: %v", err)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "r.yaml")
	load := func(yaml string, sets ...string) (Config, error) {
		if err := os.WriteFile(path, []byte("net: {name: linear}\ndata:\n  "+yaml+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return Load(path, sets)
	}
	for _, tc := range []struct {
		yaml string
		sets []string
		want string
	}{
		{"device_normalize: maybe", nil, path + `: data.device_normalize: got "maybe", expected auto, true or false`},
		{"device_normalize: 1", nil, path + ": data.device_normalize: expected auto, true or false, got int 1"},
		{"device_normalize: auto", []string{"data.device_normalize=[1]"}, "--set data.device_normalize: expected auto, true or false"},
	} {
		if _, err := load(tc.yaml, tc.sets...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: %v, want %q", tc.yaml, tc.sets, err, tc.want)
		}
	}
	for yaml, want := range map[string]Switch{"device_normalize: true": "true", `device_normalize: "false"`: "false",
		"device_normalize: auto": "auto", "workers: 1": "auto"} {
		cfg, err := load(yaml)
		if err != nil || cfg.Data.DeviceNormalize != want {
			t.Errorf("%s: %q, %v; want %q", yaml, cfg.Data.DeviceNormalize, err, want)
			continue
		}
		// The resolved config.yaml of a run reads back (as resume and eval read it).
		if err := os.WriteFile(path, cfg.YAML(), 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := Load(path, nil)
		if err != nil || again.Data.DeviceNormalize != want || again.Hash() != cfg.Hash() {
			t.Errorf("%s: read back as %q (%v)", yaml, again.Data.DeviceNormalize, err)
		}
	}
}

// TestReplicasOnKnownDevices: a caller that knows the backend's devices bounds replicas by them, and
// the batch must still split evenly.
func TestReplicasOnKnownDevices(t *testing.T) {
	c := Defaults()
	c.Name, c.Replicas, c.Data.BatchSize = "r", 2, 8
	if err := c.ValidateWithDevices(1); err == nil || !strings.Contains(err.Error(), "the backend has 1 device(s)") {
		t.Errorf("2 replicas on 1 known device: %v", err)
	}
	if err := c.ValidateWithDevices(2); err != nil {
		t.Errorf("2 replicas on 2 known devices: %v", err)
	}
	c.Data.BatchSize = 7
	if err := c.ValidateWithDevices(2); err == nil || !strings.Contains(err.Error(), "expected a multiple of 2") {
		t.Errorf("batch 7 over 2 replicas: %v", err)
	}
}

// TestChoiceListsAgree: every optimizer name has its defaults, and every default names an optimizer.
func TestChoiceListsAgree(t *testing.T) {
	if len(optimizerDefaults) != len(Optimizers) {
		t.Errorf("%d optimizers with defaults, %d names", len(optimizerDefaults), len(Optimizers))
	}
	for _, name := range Optimizers {
		if _, ok := optimizerDefaults[name]; !ok {
			t.Errorf("optimizer %s has no defaults", name)
		}
	}
	for _, name := range []string{Defaults().Optimizer.Name, Defaults().Schedule.Name, Defaults().Loss.Name,
		Defaults().Loss.BCEDivisor, Defaults().Checkpoint.Best, Defaults().Guard.NonFinite, Defaults().Net.Precision,
		Defaults().Data.Augment.RandomErasingMode, string(Defaults().Data.DeviceNormalize),
		Defaults().DataParallel.Mode} { // data.source's list is data's (recipe.DataSources)
		found := false
		for _, list := range [][]string{Optimizers, Schedules, Losses, BCEDivisors, BestMetrics, GuardPolicies,
			Precisions, ErasingModes, Switches, DataParallelModes} {
			found = found || slices.Contains(list, name)
		}
		if !found {
			t.Errorf("default %q is in no choice list", name)
		}
	}
}
