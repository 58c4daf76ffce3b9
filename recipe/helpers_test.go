package recipe

import (
	"path/filepath"
	"testing"
)

// writeConfig writes one recipe under a fresh directory and returns its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	return write(t, filepath.Join(t.TempDir(), "recipe.yaml"), body)
}

// writeRecipes writes name -> body under a fresh directory and returns it.
func writeRecipes(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		write(t, filepath.Join(dir, name), body)
	}
	return dir
}
