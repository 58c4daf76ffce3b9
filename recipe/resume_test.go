package recipe

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/trainer/trainer/config"
)

// TestResolvedConfigLoadsBack: a run's config.yaml (Config.YAML) loads back as the same config, for
// every shipped recipe plain and in smoke mode: `trainer run --resume` continues with it.
func TestResolvedConfigLoadsBack(t *testing.T) {
	paths, err := filepath.Glob("../configs/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no configs: %v", err)
	}
	for _, path := range paths {
		plain, err := Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		smoke, _, err := LoadSmoke(path, nil, "smoke-data")
		if err != nil {
			t.Fatal(err)
		}
		for _, cfg := range []config.Config{plain, smoke} {
			stored := filepath.Join(t.TempDir(), "config.yaml")
			if err := os.WriteFile(stored, cfg.YAML(), 0o644); err != nil {
				t.Fatal(err)
			}
			back, err := Load(stored, nil)
			if err != nil {
				t.Fatalf("%s (%s): %v", path, cfg.Name, err)
			}
			if changes := config.Changes(cfg, back); len(changes) > 0 || back.Hash() != cfg.Hash() {
				t.Errorf("%s (%s): config.yaml loads back changed: %v", path, cfg.Name, changes)
			}
		}
	}
}
