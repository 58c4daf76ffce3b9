package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/trainer/trainer/config"
	"github.com/trainer/trainer/recipe"
	"github.com/trainer/trainer/trainer"
)

// loadRunConfig is loadConfig, or with smoke the recipe under trainer's smoke overrides (a few steps at
// reduced width and resolution on a generated ImageFolder under run_dir/smoke-data, pure-Go backend),
// the user's --set and --backend still applying on top. It prints the overrides it applied.
func loadRunConfig(path string, sets []string, backend string, smoke bool, stdout io.Writer) (config.Config, error) {
	if !smoke {
		return loadConfig(path, sets, backend, stdout)
	}
	full, err := loadConfig(path, sets, backend, stdout)
	if err != nil {
		return config.Config{}, err
	}
	dataDir := filepath.Join(full.RunDir, "smoke-data")
	if err := trainer.WriteSmokeData(dataDir); err != nil {
		return config.Config{}, err
	}
	if backend != "" {
		sets = append(sets, "backend="+backend)
	}
	cfg, applied, err := recipe.LoadSmoke(path, sets, dataDir)
	if err != nil {
		return config.Config{}, err
	}
	fmt.Fprintf(stdout, "smoke mode: --set %s\n", strings.Join(applied, " --set "))
	return cfg, nil
}
