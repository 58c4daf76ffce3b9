package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "recipe.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfigAppliesFileDefaultsAndOverrides(t *testing.T) {
	path := writeConfig(t, "epochs: 3\noptimizer:\n  lr: 0.2\nnet:\n  name: mlp\n")
	cfg, err := Load(path, []string{"optimizer.lr=0.05", "epochs=2", "optimizer.nesterov=true"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Optimizer.LR != 0.05 || cfg.Epochs != 2 || !cfg.Optimizer.Nesterov {
		t.Errorf("overrides not applied: lr=%g epochs=%d nesterov=%v", cfg.Optimizer.LR, cfg.Epochs, cfg.Optimizer.Nesterov)
	}
	if cfg.Net.Name != "mlp" {
		t.Errorf("net.name = %q, want mlp from the file", cfg.Net.Name)
	}
	d := Defaults()
	if cfg.Data.BatchSize != d.Data.BatchSize || cfg.Optimizer.Momentum != d.Optimizer.Momentum {
		t.Errorf("defaults lost: batch %d momentum %g", cfg.Data.BatchSize, cfg.Optimizer.Momentum)
	}
	if cfg.Name != "recipe" {
		t.Errorf("name = %q, want the file's base name", cfg.Name)
	}
}

func TestLoadConfigErrorsNameFileKeyAndExpectation(t *testing.T) {
	cases := []struct {
		name, body string
		sets       []string
		want       []string // substrings of the error
	}{
		{"unknown key", "optimizer:\n  lrr: 0.1\n", nil, []string{"recipe.yaml", "optimizer.lrr", "unknown key", "optimizer.lr"}},
		{"unknown section", "optimiser:\n  lr: 0.1\n", nil, []string{"recipe.yaml", "optimiser", "unknown key"}},
		{"wrong type", "optimizer:\n  lr: fast\n", nil, []string{"recipe.yaml", "optimizer.lr", "expected a number", "fast"}},
		{"fraction for an int", "epochs: 2.5\n", nil, []string{"recipe.yaml", "epochs", "expected an integer"}},
		{"section as scalar", "data: mnist\n", nil, []string{"recipe.yaml", "data", "mapping"}},
		{"out of range", "optimizer:\n  momentum: 1.5\n", nil, []string{"recipe.yaml", "optimizer.momentum", "[0, 1)"}},
		{"negative batch", "data:\n  batch_size: 0\n", nil, []string{"data.batch_size", "[1, 65536]"}},
		{"unknown net", "net:\n  name: resnet999\n", nil, []string{"net.name", "resnet999", "mnist_cnn"}},
		{"unknown source", "data:\n  source: imagenet21k\n", nil, []string{"data.source", "mnist, fashion-mnist"}},
		{"bad --set key", "seed: 1\n", []string{"optimizer.lrr=0.1"}, []string{"--set optimizer.lrr", "unknown key"}},
		{"bad --set type", "seed: 1\n", []string{"epochs=two"}, []string{"--set epochs", "expected an integer"}},
		{"bad --set form", "seed: 1\n", []string{"epochs"}, []string{"--set", "key=value"}},
		{"unknown padding", "net:\n  padding: diagonal\n", nil, []string{"net.padding", "diagonal", "symmetric or same"}},
		{"unknown gelu", "seed: 1\n", []string{"net.gelu=relu"}, []string{"net.gelu", "erf or tanh"}},
		{"dropout out of range", "net:\n  dropout: 1.5\n", nil, []string{"net.dropout", "[0, 1) or -1"}},
		{"unknown precision", "net:\n  precision: float8\n", nil, []string{"net.precision", "float32, bfloat16"}},
		{"nothing to train", "epochs: 0\nsteps: 0\n", nil, []string{"epochs", "nothing to train"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), c.sets)
			if err == nil {
				t.Fatal("accepted a bad config")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestLoadConfigRefusesWhatWouldSilentlyDoNothing: an empty recipe would train the default net, and a
// --set without a value would leave the key as it was; each is one error naming what is wrong.
func TestLoadConfigRefusesWhatWouldSilentlyDoNothing(t *testing.T) {
	cases := []struct {
		name, body string
		sets       []string
		want       []string
	}{
		{"empty file", "", nil, []string{"recipe.yaml", "holds no settings", "net: {name: mnist_cnn}"}},
		{"only comments", "# a recipe\n\n", nil, []string{"recipe.yaml", "holds no settings"}},
		{"only keys without values", "net:\n  name:\n", nil, []string{"recipe.yaml", "holds no settings"}},
		{"empty mapping", "{}\n", nil, []string{"recipe.yaml", "holds no settings"}},
		{"--set without a value", "seed: 1\n", []string{"epochs="}, []string{"--set epochs", "no value", `got ""`}},
		{"--set null", "seed: 1\n", []string{"optimizer.lr=null"}, []string{"--set optimizer.lr", "no value", `got "null"`}},
		{"--set tilde", "seed: 1\n", []string{"optimizer.lr= ~"}, []string{"--set optimizer.lr", "no value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), c.sets)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "empty.yaml"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "top.yaml"), []byte("base: empty.yaml\nepochs: 2\n"), 0o644)
	_, err := Load(filepath.Join(dir, "top.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "top.yaml -> "+filepath.Join(dir, "empty.yaml")+": the file holds no settings") {
		t.Errorf("empty base: %v, want an error naming the chain", err)
	}
}

// TestLoadConfigErrorsQuoteValuesBriefly: a 10 MB value (the run name, any string, a list, a key) is
// refused in an error of a few hundred bytes that quotes its start and gives its length.
func TestLoadConfigErrorsQuoteValuesBriefly(t *testing.T) {
	big := strings.Repeat("n", 10<<20)
	list := "[" + strings.Repeat("0.5, ", 1<<20) + "0.5]"
	cases := []struct {
		name, body string
		sets       []string
		want       []string
	}{
		{"run name", "name: " + big + "\n", nil, []string{"recipe.yaml: name", `"nnnn`, "(10485760 bytes)"}},
		{"run name by --set", "seed: 1\n", []string{"name=" + big}, []string{"--set name", "(10485760 bytes)"}},
		{"run name past NAME_MAX", "name: " + big[:300] + "\n", nil, []string{"name", "at most 255 bytes", "(300 bytes)"}},
		{"net name", "net:\n  name: " + big + "\n", nil, []string{"net.name", "(10485760 bytes)"}},
		{"source", "data:\n  source: " + big[:4000] + "\n", nil, []string{"data.source", "(4000 bytes)", "expected one of"}},
		{"rand augment", "data:\n  source: imagefolder\n  augment:\n    rand_augment: " + big[:4000] + "\n", nil,
			[]string{"data.augment.rand_augment", "(4000 bytes)"}},
		{"list", "data:\n  source: imagefolder\n  augment:\n    random_resized_crop_scale: " + list + "\n", nil,
			[]string{"data.augment.random_resized_crop_scale", "got [0.5 0.5", "bytes), expected"}},
		{"unknown key", "seed: 1\n", []string{big + "=1"}, []string{"--set nnnn", "(10485760 bytes): unknown key"}},
		{"wrong type", "epochs: " + big + "\n", nil, []string{"epochs", "expected an integer", "(10485760 bytes)"}},
		{"unparsable --set", "seed: 1\n", []string{"epochs=[" + big}, []string{"--set epochs", "cannot parse", "(10485761 bytes)"}},
		{"--set without =", "seed: 1\n", []string{big}, []string{"--set", "key=value", "(10485760 bytes)"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeConfig(t, c.body), c.sets)
			if err == nil {
				t.Fatal("accepted")
			}
			if len(err.Error()) > 2000 {
				t.Errorf("a %d-byte error", len(err.Error()))
			}
			msg := err.Error()[:min(len(err.Error()), 2000)]
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("error %v should name the missing file", err)
	}
}

func TestShippedConfigsAreValid(t *testing.T) {
	paths, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	for _, p := range paths {
		if _, err := Load(p, nil); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
