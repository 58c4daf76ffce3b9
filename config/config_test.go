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
