package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecipeFilesAreBounded: a recipe, a base or a spec file that is a device (/dev/zero,
// /dev/urandom, directly or through a link) is refused at once as no regular file, and one over
// MaxRecipeBytes by its size, before anything is read into memory.
func TestRecipeFilesAreBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	huge := write("huge.yaml", "name: x\n# "+strings.Repeat("x", MaxRecipeBytes)+"\n")
	cases := []struct{ recipe, want string }{
		{"/dev/zero", "/dev/zero is a device"},
		{"/dev/urandom", "/dev/urandom is a device"},
		{link, "is a device"},
		{write("base-zero.yaml", "base: /dev/zero\nname: x\n"), "base"},
		{write("base-link.yaml", "base: zero.yaml\nname: x\n"), "is a device"},
		{huge, "more than the 1048576 allowed"},
		{write("spec.yaml", "name: x\nnet: {spec_file: /dev/urandom}\n"), "/dev/urandom is a device"},
	}
	for _, c := range cases {
		start := time.Now()
		_, err := Load(c.recipe, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%s): %v; want an error containing %q", c.recipe, err, c.want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("Load(%s) took %v", c.recipe, d)
		}
	}
}
