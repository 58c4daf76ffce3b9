package recipe

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
)

// TestDataDataset: data.dataset takes the known names, and not one the source contradicts.
func TestDataDataset(t *testing.T) {
	dir := writeRecipes(t, map[string]string{"r.yaml": "data:\n  source: shards\n  dir: /x\n"})
	for _, c := range []struct {
		sets []string
		want string // "" : accepted
	}{
		{[]string{"data.dataset=imagenet"}, ""},
		{[]string{"data.dataset=imagenette"}, ""},
		{[]string{"data.dataset=imagenet21k"}, "data.dataset"},
		{[]string{"data.source=cifar10", "data.dataset=imagenet"}, "holds cifar10"},
		{[]string{"data.source=cifar10", "data.dataset=cifar10"}, ""},
	} {
		cfg, err := Load(filepath.Join(dir, "r.yaml"), c.sets)
		if c.want == "" {
			if err != nil {
				t.Errorf("%v: %v", c.sets, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.sets, err, c.want)
		}
		_ = cfg
	}
	d := config.Defaults().Data
	if DatasetName(d) != "mnist" {
		t.Errorf("the default source's dataset %q, want mnist", DatasetName(d))
	}
	d.Source = "shards"
	if DatasetName(d) != "" {
		t.Errorf("shards without data.dataset: %q, want none", DatasetName(d))
	}
}
