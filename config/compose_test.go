package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/resolved from the shipped configs")

// TestShippedConfigsResolveAsGolden: every recipe in configs/ loads to the resolved config in
// testdata/resolved (first written by the loader before recipes composed, so rewriting a recipe as
// `base:` plus its differences changed nothing), and no golden is left without its recipe. After a
// deliberate change to a recipe: go test ./config -run TestShippedConfigsResolveAsGolden -update. The recipes'
// ${TRAINER_DATA} resolves to /datasets here.
func TestShippedConfigsResolveAsGolden(t *testing.T) {
	t.Setenv(DataEnv, "/datasets") // the goldens hold the recipes' paths resolved, independent of the machine
	paths, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		name := filepath.Base(p)
		seen[name] = true
		cfg, err := Load(p, nil)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		golden := filepath.Join("testdata", "resolved", name)
		if *update {
			if err := os.WriteFile(golden, cfg.YAML(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if got := string(cfg.YAML()); got != string(want) {
			t.Errorf("%s resolves to\n%s\nwant (%s)\n%s", p, got, golden, want)
		}
		if strings.Contains(string(cfg.YAML()), baseKey+":") {
			t.Errorf("%s: the resolved config names a base", p)
		}
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "resolved", "*.yaml"))
	for _, g := range goldens {
		if !seen[filepath.Base(g)] {
			t.Errorf("%s has no recipe in configs/", g)
		}
	}
}

// writeRecipes writes name -> body under a fresh directory and returns it.
func writeRecipes(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestBaseComposes: a chain of bases (paths relative to the file naming them) resolves base first;
// mappings merge key by key, lists and scalars replace, --set comes last; the name defaults to the
// top file's.
func TestBaseComposes(t *testing.T) {
	dir := writeRecipes(t, map[string]string{
		"bases/root.yaml": "epochs: 7\nnet: {name: mlp, width: 2}\n" +
			"data:\n  batch_size: 32\n  mean: [0.1, 0.2, 0.3]\n  std: [1, 1, 1]\n  source: imagefolder\n" +
			"optimizer: {name: sgd, lr: 0.2, momentum: 0.5}\n",
		"bases/mid.yaml": "base: root.yaml\nnet: {width: 0.5}\ndata: {mean: [0.5], std: [2]}\n",
		"top.yaml":       "base: bases/mid.yaml\noptimizer: {lr: 0.05}\nData: {Batch_Size: 16}\n",
	})
	cfg, err := Load(filepath.Join(dir, "top.yaml"), []string{"optimizer.momentum=0.8"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "top" || cfg.Epochs != 7 || cfg.Net.Name != "mlp" || cfg.Net.Width != 0.5 {
		t.Errorf("name %q epochs %d net %+v: want top, 7 from root, mlp from root, width 0.5 from mid", cfg.Name, cfg.Epochs, cfg.Net)
	}
	if cfg.Data.BatchSize != 16 || cfg.Data.Source != "imagefolder" || len(cfg.Data.Mean) != 1 || cfg.Data.Mean[0] != 0.5 {
		t.Errorf("data %+v: want batch 16 from top, source from root, mean [0.5] replacing root's list", cfg.Data)
	}
	if cfg.Optimizer.LR != 0.05 || cfg.Optimizer.Momentum != 0.8 || cfg.Optimizer.Name != "sgd" {
		t.Errorf("optimizer %+v: want lr 0.05 from top, momentum 0.8 from --set, sgd from root", cfg.Optimizer)
	}
}

// TestBaseErrorsNameTheFile: a bad key or value set in a base is reported with the base's path; one
// set by the including file or --set names that.
func TestBaseErrorsNameTheFile(t *testing.T) {
	dir := writeRecipes(t, map[string]string{
		"base_key.yaml":   "optimizer: {lrr: 0.1}\n",
		"base_value.yaml": "optimizer: {momentum: 1.5}\nnet: {width: 2}\n",
		"top_key.yaml":    "base: base_key.yaml\nepochs: 2\n",
		"top_value.yaml":  "base: base_value.yaml\nnet: {width: 99}\n",
	})
	base := func(name string) string { return filepath.Join(dir, name) }
	_, err := Load(base("top_key.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), base("base_key.yaml")+": optimizer.lrr: unknown key") {
		t.Errorf("unknown key in a base: %v", err)
	}
	_, err = Load(base("top_value.yaml"), []string{"optimizer.lr=500"})
	for _, want := range []string{
		"config " + base("top_value.yaml") + ": net.width: got 99", // set by the top file itself
		base("base_value.yaml") + ": optimizer.momentum: got 1.5, expected in [0, 1)",
		"--set optimizer.lr: got 500",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad values in a base, the file and --set: %v; want %q", err, want)
		}
	}
}

// TestBaseCycleAndMissingRefused: a base chain that comes back to a file, a missing base and a base
// that is not a file name are refused naming the chain.
func TestBaseCycleAndMissingRefused(t *testing.T) {
	dir := writeRecipes(t, map[string]string{
		"a.yaml":       "base: b.yaml\n",
		"b.yaml":       "base: sub/../a.yaml\n",
		"self.yaml":    "base: self.yaml\n",
		"missing.yaml": "base: nowhere.yaml\n",
		"number.yaml":  "base: 3\n",
	})
	at := func(name string) string { return filepath.Join(dir, name) }
	cases := map[string]string{
		"a.yaml": "config " + at("a.yaml") + ": base cycle: " + at("a.yaml") + " -> " + at("b.yaml") + " -> " +
			filepath.Join(dir, "sub/../a.yaml"),
		"self.yaml":    "base cycle: " + at("self.yaml") + " -> " + at("self.yaml"),
		"missing.yaml": "base " + at("missing.yaml") + " -> " + at("nowhere.yaml") + ": open " + at("nowhere.yaml"),
		"number.yaml":  at("number.yaml") + ": base: expected the file name of the base recipe",
	}
	for name, want := range cases {
		if _, err := Load(at(name), nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error containing %q", name, err, want)
		}
	}
	// base is a key of the top level only.
	path := writeConfig(t, "net: {base: x.yaml}\n")
	if _, err := Load(path, nil); err == nil || !strings.Contains(err.Error(), "net.base: unknown key") {
		t.Errorf("nested base: %v", err)
	}
}

// TestDerivedRecipeSwitchesOptimizer: a recipe deriving from configs/mnist_fast.yaml (SGD with
// Nesterov momentum and a warmup from 0.004) that only says `optimizer: {name: adamw, lr: 0.001}`
// loads: the base's momentum and nesterov are dropped and its warmup start, above the new peak, reset,
// each with a note. The same switch by --set drops them too; a key the switching layer writes itself
// is still refused.
func TestDerivedRecipeSwitchesOptimizer(t *testing.T) {
	dir := t.TempDir()
	base, _ := filepath.Abs(filepath.Join("..", "configs", "mnist_fast.yaml"))
	derived := filepath.Join(dir, "adamw.yaml")
	os.WriteFile(derived, []byte("base: "+base+"\noptimizer:\n  name: adamw\n  lr: 0.001\n"), 0o644)
	cfg, notes, err := LoadNotes(derived, nil)
	if err != nil {
		t.Fatalf("derived AdamW recipe refused: %v", err)
	}
	o := cfg.Optimizer
	if o.Name != "adamw" || o.Momentum != -1 || o.Nesterov || cfg.Schedule.WarmupStartLR != 0 || o.WeightDecay != 0.0005 {
		t.Errorf("resolved optimizer %+v, warmup_start_lr %g: want adamw without momentum or nesterov, warmup from 0, the base's weight decay",
			o, cfg.Schedule.WarmupStartLR)
	}
	joined := strings.Join(notes, "\n")
	for _, want := range []string{
		"note: " + derived + " switches the optimizer to adamw: dropped optimizer.momentum 0.9, which " + base + " set and adamw has not",
		"dropped optimizer.nesterov true",
		"note: schedule.warmup_start_lr 0.004, which " + base + " set, exceeds the peak lr 0.001 that " + derived + " sets: reset to 0",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("notes lack %q:\n%s", want, joined)
		}
	}
	if len(notes) != 3 {
		t.Errorf("want 3 notes, got %d:\n%s", len(notes), joined)
	}

	// The same switch with --set.
	cfg, notes, err = LoadNotes(base, []string{"optimizer.name=lamb", "optimizer.lr=0.002"})
	if err != nil || cfg.Optimizer.Nesterov || cfg.Optimizer.Momentum != -1 || len(notes) != 3 {
		t.Errorf("--set optimizer.name=lamb on mnist_fast: %v, %+v\n%s", err, cfg.Optimizer, strings.Join(notes, "\n"))
	}
	// rmsprop_tf has momentum: the base's is kept; nesterov is not.
	cfg, notes, err = LoadNotes(base, []string{"optimizer.name=rmsprop_tf", "optimizer.lr=0.01"})
	if err != nil || cfg.Optimizer.Momentum != 0.9 || cfg.Optimizer.Nesterov || len(notes) != 1 {
		t.Errorf("--set optimizer.name=rmsprop_tf on mnist_fast: %v, %+v\n%s", err, cfg.Optimizer, strings.Join(notes, "\n"))
	}
	// A switching layer that writes a key the new optimizer lacks is refused, not corrected.
	own := filepath.Join(dir, "own.yaml")
	os.WriteFile(own, []byte("base: "+base+"\noptimizer:\n  name: adamw\n  lr: 0.001\n  nesterov: true\n"), 0o644)
	if _, err := Load(own, nil); err == nil || !strings.Contains(err.Error(), "optimizer.nesterov: only sgd has a Nesterov form") {
		t.Errorf("nesterov written beside the switch: %v", err)
	}
	// Without a switch nothing is dropped.
	if _, notes, err := LoadNotes(base, []string{"optimizer.lr=0.2"}); err != nil || len(notes) != 0 {
		t.Errorf("no switch: %v, notes %v", err, notes)
	}
}

// TestKeyWithoutValueResets: `key:` with no value in a derived recipe takes the key back to its
// default (a whole section too), and a reset of a key the schema does not have is refused naming the
// file.
func TestKeyWithoutValueResets(t *testing.T) {
	dir := t.TempDir()
	base, _ := filepath.Abs(filepath.Join("..", "configs", "mnist_fast.yaml"))
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte("base: "+base+"\n"+body), 0o644)
		return p
	}
	def := Defaults()
	cfg, err := Load(write("reset.yaml", "optimizer:\n  nesterov:\n  momentum:\nloss:\nschedule:\n  warmup_start_lr:\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Optimizer.Nesterov || cfg.Optimizer.Momentum != def.Optimizer.Momentum || cfg.Loss.LabelSmoothing != def.Loss.LabelSmoothing ||
		cfg.Schedule.WarmupStartLR != 0 || cfg.Schedule.WarmupEpochs != 0.3 || cfg.Optimizer.LR != 0.1 {
		t.Errorf("after resets: optimizer %+v, loss %+v, schedule %+v", cfg.Optimizer, cfg.Loss, cfg.Schedule)
	}
	typo := write("typo.yaml", "optimizer:\n  momentun:\n")
	if _, err := Load(typo, nil); err == nil || !strings.Contains(err.Error(), typo+": optimizer.momentun: unknown key") {
		t.Errorf("reset of an unknown key: %v", err)
	}
	// A later layer's value wins over an earlier reset.
	cfg, err = Load(write("again.yaml", "loss:\n  label_smoothing:\n"), []string{"loss.label_smoothing=0.2"})
	if err != nil || cfg.Loss.LabelSmoothing != 0.2 {
		t.Errorf("--set after a reset: %v, %g", err, cfg.Loss.LabelSmoothing)
	}
}
