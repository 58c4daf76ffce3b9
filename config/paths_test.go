package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExpandPath: ${TRAINER_DATA} and $TRAINER_DATA become the variable (~/datasets when unset), a
// leading ~ the home directory; any other variable is refused, and nothing else changes.
func TestExpandPath(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home directory")
	}
	for _, c := range []struct{ env, in, want, err string }{
		{"/data", "${TRAINER_DATA}/imagenet", "/data/imagenet", ""},
		{"/data", "$TRAINER_DATA/imagenet", "/data/imagenet", ""},
		{"/data", "$TRAINER_DATA", "/data", ""},
		{"", "${TRAINER_DATA}/imagenet", filepath.Join(home, "datasets", "imagenet"), ""},
		{"~/mine", "${TRAINER_DATA}/x", filepath.Join(home, "mine", "x"), ""},
		{"/data", "~/x", filepath.Join(home, "x"), ""},
		{"/data", "~", home, ""},
		{"/data", "a/~/b", "a/~/b", ""},
		{"/data", "relative/dir", "relative/dir", ""},
		{"/data", "", "", ""},
		{"/data", "$TRAINER_DATAX/y", "", "other than ${TRAINER_DATA}"},
		{"/data", "$HOME/y", "", "other than ${TRAINER_DATA}"},
		{"/data", "${TRAINER_DATA}/$x", "", "other than ${TRAINER_DATA}"},
	} {
		t.Setenv(DataEnv, c.env)
		got, err := ExpandPath(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ExpandPath(%q) = %q, %v; want an error containing %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("TRAINER_DATA=%q: ExpandPath(%q) = %q, %v; want %q", c.env, c.in, got, err, c.want)
		}
	}
}

// TestLoadExpandsDataPaths: the path keys are expanded when a recipe loads (from the file or --set),
// the resolved config holds the result and loads back unchanged; a refused path names the key and
// who set it.
func TestLoadExpandsDataPaths(t *testing.T) {
	t.Setenv(DataEnv, "/store")
	dir := writeRecipes(t, map[string]string{"r.yaml": "data:\n  source: shards\n  dir: ${TRAINER_DATA}/imagenet\n"})
	cfg, err := Load(filepath.Join(dir, "r.yaml"), []string{"data.eval=$TRAINER_DATA/other/val"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Data.Dir != "/store/imagenet" || cfg.Data.Eval != "/store/other/val" {
		t.Errorf("dir %q, eval %q", cfg.Data.Dir, cfg.Data.Eval)
	}
	resolved := filepath.Join(dir, "resolved.yaml")
	os.WriteFile(resolved, cfg.YAML(), 0o644)
	t.Setenv(DataEnv, "/elsewhere")
	again, err := Load(resolved, nil)
	if err != nil || again.Data.Dir != "/store/imagenet" {
		t.Errorf("the resolved config loads back with dir %q (%v), want the path it recorded", again.Data.Dir, err)
	}
	_, err = Load(filepath.Join(dir, "r.yaml"), []string{"data.train=$HOME/train"})
	if err == nil || !strings.Contains(err.Error(), "data.train") || !strings.Contains(err.Error(), "--set") {
		t.Errorf("$HOME: %v, want an error naming data.train and --set", err)
	}
}
