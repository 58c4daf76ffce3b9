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
		{"negative batch", "data:\n  batch_size: 0\n", nil, []string{"data.batch_size", ">= 1"}},
		{"unknown net", "net:\n  name: resnet999\n", nil, []string{"net.name", "resnet999", "mnist_cnn"}},
		{"unknown source", "data:\n  source: imagenet21k\n", nil, []string{"data.source", "mnist, fashion-mnist"}},
		{"bad --set key", "", []string{"optimizer.lrr=0.1"}, []string{"--set optimizer.lrr", "unknown key"}},
		{"bad --set type", "", []string{"epochs=two"}, []string{"--set epochs", "expected an integer"}},
		{"bad --set form", "", []string{"epochs"}, []string{"--set", "key=value"}},
		{"unknown padding", "net:\n  padding: diagonal\n", nil, []string{"net.padding", "diagonal", "symmetric or same"}},
		{"unknown gelu", "", []string{"net.gelu=relu"}, []string{"net.gelu", "erf or tanh"}},
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
