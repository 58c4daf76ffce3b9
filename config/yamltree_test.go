package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestAmbiguousRecipesRefused: keys of one mapping that differ only in case (at the top, in a
// section, in a NetSpec layer's arguments, in a --set value), a second YAML document and a merge key
// are refused with an error naming the file and the line, instead of a winner chosen by map order.
func TestAmbiguousRecipesRefused(t *testing.T) {
	spec := "net:\n  spec:\n    - input: {size: 8, channels: 1, classes: 4}\n" +
		"    - dense_block: {ic: 1, GrowthRate: 2, growthrate: 4, n_layers: 1}\n"
	cases := []struct {
		name, body string
		sets       []string
		want       []string
	}{
		{"top-level case", "steps: 5\nSTEPS: 6\n", nil, []string{"recipe.yaml", "line 2", `"STEPS"`, `"steps"`, "differ only in case"}},
		{"section case", "optimizer:\n  lr: 0.1\n  LR: 0.2\n", nil, []string{"recipe.yaml", "line 3", "differ only in case"}},
		{"a null and a value", "epochs:\nEpochs: 3\n", nil, []string{"differ only in case"}},
		{"spec argument case", spec, nil, []string{"recipe.yaml", "line 4", "differ only in case"}},
		{"--set value", "seed: 1\n", []string{"optimizer.lr_mult={fc: 1, FC: 2}"}, []string{"--set optimizer.lr_mult", "differ only in case"}},
		{"second document", "epochs: 2\n---\nepochs: 3\n", nil, []string{"recipe.yaml", "line 2", "second YAML document", "one document"}},
		{"merge key", "a: &a {lr: 0.1}\noptimizer:\n  <<: *a\n", nil, []string{"recipe.yaml", "line 3", "merge key"}},
		{"a list", "- epochs: 2\n", nil, []string{"recipe.yaml", "expected a mapping of keys"}},
	}
	for _, c := range cases {
		_, err := Load(writeConfig(t, c.body), c.sets)
		if err == nil {
			t.Errorf("%s: loaded, want an error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", c.name, err, w)
			}
		}
	}
}

// TestRecipeAliasesExpandWithinABound: an alias is its anchor's value; an alias inside its own anchor
// is refused, and aliases nested into a "billion laughs" are refused once the values they would build
// pass maxYAMLNodes.
func TestRecipeAliasesExpandWithinABound(t *testing.T) {
	cfg, err := Load(writeConfig(t, "data:\n  mean: &m [0.5]\n  std: *m\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Data.Std) != 1 || cfg.Data.Std[0] != 0.5 {
		t.Errorf("data.std = %v, want the anchor's [0.5]", cfg.Data.Std)
	}
	var b strings.Builder
	b.WriteString("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	if _, err := parseYAML([]byte("a: &a [1, *a]\n")); err == nil || !strings.Contains(err.Error(), "inside its own") {
		t.Errorf("an alias inside its anchor: %v, want a refusal", err)
	}
	_, err = parseYAML([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("nested aliases of 10^10 values: %v, want a refusal naming the bound", err)
	}
}

// recipeWithPatterns is a recipe with n distinct optimizer.lr_mult patterns.
func recipeWithPatterns(n int) string {
	var b strings.Builder
	b.WriteString("net: {name: mlp}\noptimizer:\n  lr_mult:\n")
	for i := range n {
		fmt.Fprintf(&b, "    layer%d.*: 0.5\n", i)
	}
	return b.String()
}

// manyPatterns is about as many lr_mult patterns as a recipe file of MaxRecipeBytes holds.
const manyPatterns = 45_000

// TestManyLRMultPatternsLoad: a recipe of 45,000 patterns (about 1 MB, near the bound on a recipe's
// size) loads, every one with its factor (the duplicate-key check is one map lookup per key, where
// yaml.v3's compared every pair; BenchmarkLoadManyPatterns times it).
func TestManyLRMultPatternsLoad(t *testing.T) {
	n := manyPatterns
	if testing.Short() {
		n = 10_000
	}
	cfg, err := Load(writeConfig(t, recipeWithPatterns(n)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Optimizer.LRMult) != n || cfg.Optimizer.LRMult[fmt.Sprintf("layer%d.*", n-1)] != 0.5 {
		t.Errorf("%d patterns loaded, want %d each with factor 0.5", len(cfg.Optimizer.LRMult), n)
	}
}

func BenchmarkLoadManyPatterns(b *testing.B) {
	path := filepath.Join(b.TempDir(), "recipe.yaml")
	if err := os.WriteFile(path, []byte(recipeWithPatterns(manyPatterns)), 0o644); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := Load(path, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParseYAML: parseYAML never panics, refuses or returns the same tree on a second parse, and every
// mapping key it returns is lower case and unique once folded.
func FuzzParseYAML(f *testing.F) {
	for _, seed := range []string{"steps: 5\nSTEPS: 6\n", "a: &a [1, *a]\n", "x: 1\n---\ny: 2\n", "a: &a {b: 1}\nc:\n  <<: *a\n",
		"{? [1]: 2}", "lr_mult: {fc: 1, Fc.*: 2}\n", "- input: {size: 8}\n- conv: {filters: 3}\n", "~: 1\n", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := parseYAML([]byte(text))
		if err != nil {
			return
		}
		again, _ := parseYAML([]byte(text))
		if !reflect.DeepEqual(v, again) {
			t.Fatalf("two parses differ: %v and %v", v, again)
		}
		var walk func(any)
		walk = func(v any) {
			switch v := v.(type) {
			case map[string]any:
				for k, e := range v {
					if k != strings.ToLower(k) {
						t.Fatalf("key %q not lower-cased", k)
					}
					walk(e)
				}
			case []any:
				for _, e := range v {
					walk(e)
				}
			}
		}
		walk(v)
	})
}
