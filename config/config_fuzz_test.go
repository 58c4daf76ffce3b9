package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadConfig feeds arbitrary YAML and --set overrides to Load: it must refuse or
// return a config that validates and whose run directory stays inside run_dir (no path tricks through
// the name). `go test` runs the seeds (every shipped config); `-fuzz FuzzLoadConfig` explores. The
// input is a file beside copies of the shipped recipes, so the seeds' `base:` keys resolve.
func FuzzLoadConfig(f *testing.F) {
	dir := f.TempDir()
	shipped, _ := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	for _, path := range shipped {
		body, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(path)), body, 0o644); err != nil {
			f.Fatal(err)
		}
		f.Add(string(body), "epochs=2")
	}
	f.Add("base: resnet50_sgd.yaml\nepochs: 3\n", "")
	f.Add("base: fuzz.yaml\n", "")
	f.Add("name: ../../etc\n", "")
	f.Add("net:\n  name: resnet50\n", "name=..")
	f.Add("optimizer: [1, 2]\n", "optimizer.lr=fast")
	f.Add("data:\n  mean: [0.5, 0.5]\n", "data.std=0")
	f.Fuzz(func(t *testing.T, body, set string) {
		path := filepath.Join(dir, "fuzz.yaml")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		var sets []string
		if set != "" {
			sets = []string{set}
		}
		cfg, err := Load(path, sets)
		if err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("Load accepted a config that does not validate: %v", err)
		}
		rel, err := filepath.Rel(cfg.RunDir, cfg.Dir())
		if err != nil || rel == "." || strings.HasPrefix(rel, "..") || strings.ContainsRune(rel, filepath.Separator) {
			t.Fatalf("run directory %q escapes run_dir %q", cfg.Dir(), cfg.RunDir)
		}
	})
}
