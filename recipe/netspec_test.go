package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
)

const specLayers = `- input: {size: 8, channels: 1, classes: 3}
- conv: {filters: 4, kernel: 3, stride: 2}
- relu
- globalavgpool
- dense: {units: classes}
`

func write(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestNetSpecFileResolves: net.spec_file is read relative to the recipe that names it (a base in
// another directory included) or through ${TRAINER_DATA}, recorded inline as net.spec with no name,
// and the run's config.yaml loads back to the same config (and hash).
func TestNetSpecFileResolves(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "bases", "nets", "small.yaml"), specLayers)
	write(t, filepath.Join(dir, "bases", "base.yaml"), "net: {spec_file: nets/small.yaml}\nsteps: 2\n")
	top := write(t, filepath.Join(dir, "top.yaml"), "base: bases/base.yaml\ndata: {batch_size: 4}\n")
	cfg, err := Load(top, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net.Name != "" || cfg.Net.SpecFile != "" || len(cfg.Net.Spec) != 5 || cfg.Net.Label() != config.SpecNetLabel {
		t.Fatalf("resolved net: name %q spec_file %q, %d layers, label %q; want the 5 layers inline, no name or file, label %s",
			cfg.Net.Name, cfg.Net.SpecFile, len(cfg.Net.Spec), cfg.Net.Label(), config.SpecNetLabel)
	}
	spec, err := Net(cfg.Net)
	if err != nil || spec.InputShape != [3]int{8, 8, 1} || spec.NumClasses != 3 || spec.Name != config.SpecNetLabel {
		t.Fatalf("Net(): %+v, %v", spec, err)
	}
	stored := write(t, filepath.Join(dir, "run", "config.yaml"), string(cfg.YAML()))
	again, err := Load(stored, nil)
	if err != nil {
		t.Fatalf("the run's config.yaml does not load back: %v\n%s", err, cfg.YAML())
	}
	again.Name = cfg.Name
	if again.Hash() != cfg.Hash() || len(config.Changes(cfg, again)) != 0 {
		t.Errorf("config.yaml loads back changed: %v", config.Changes(cfg, again))
	}

	t.Setenv(config.DataEnv, filepath.Join(dir, "bases"))
	viaEnv := write(t, filepath.Join(dir, "env.yaml"), "net:\n  spec_file: ${TRAINER_DATA}/nets/small.yaml\n")
	if cfg, err := Load(viaEnv, nil); err != nil || len(cfg.Net.Spec) != 5 {
		t.Errorf("spec_file through ${TRAINER_DATA}: %v", err)
	}
	// --set net.spec_file is relative to the working directory; an inline --set net.spec works too.
	if cfg, err := Load(viaEnv, []string{"net.spec_file=" + filepath.Join(dir, "bases", "nets", "small.yaml")}); err != nil || len(cfg.Net.Spec) != 5 {
		t.Errorf("--set net.spec_file: %v", err)
	}
	plain := write(t, filepath.Join(dir, "plain.yaml"), "steps: 1\n")
	if cfg, err := Load(plain, []string{`net.spec=[{input: {size: 4, channels: 1, classes: 2}}, flatten, {dense: {units: classes}}]`}); err != nil || len(cfg.Net.Spec) != 3 || cfg.Net.Name != "" {
		t.Errorf("--set net.spec: %v", err)
	}
	// A recipe without a spec writes no spec keys: the hashes of existing runs stay what they were.
	if cfg, err := Load(plain, nil); err != nil || strings.Contains(string(cfg.YAML()), "spec") {
		t.Errorf("a registered net's config.yaml mentions a spec: %v\n%s", err, cfg.YAML())
	}
}

// TestNetSpecErrors: net.name with a spec, spec with spec_file, a bad spec file (named, with the layer
// and field), a missing or non-list file, and the net keys a spec does not take.
func TestNetSpecErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "nets", "good.yaml"), specLayers)
	write(t, filepath.Join(dir, "nets", "bad.yaml"), strings.Replace(specLayers, "kernel: 3", "kernel: 9, padding: valid", 1))
	write(t, filepath.Join(dir, "nets", "map.yaml"), "input: {size: 8}\n")
	write(t, filepath.Join(dir, "nets", "pool.yaml"), "- input: {size: 8, channels: 1, classes: 3}\n- maxpool: {kernel: 4}\n- flatten\n- dense: {units: classes}\n")
	for _, c := range []struct {
		recipe string
		sets   []string
		want   []string
	}{
		{"net: {name: mnist_cnn, spec_file: nets/good.yaml}", nil,
			[]string{"r.yaml: net.name: set together with net.spec_file; expected one of them"}},
		{"net: {spec_file: nets/good.yaml}", []string{"net.spec=[relu]"},
			[]string{"net.spec_file: set together with net.spec"}},
		{"net: {spec_file: nets/bad.yaml}", nil,
			[]string{"r.yaml: net.spec_file: " + filepath.Join(dir, "nets", "bad.yaml") + ": layer 1 (conv): kernel: 9 is larger than the 8-cell input"}},
		{"net: {spec_file: nets/none.yaml}", nil, []string{"net.spec_file: open " + filepath.Join(dir, "nets", "none.yaml")}},
		{"net: {spec_file: nets/map.yaml}", nil, []string{"net.spec_file: ", "map.yaml: expected a YAML list of layers"}},
		{"net: {spec: [{input: {size: 8, channels: 1, classes: 3}}, {dense: {units: 3}}]}", nil,
			[]string{"r.yaml: net.spec: layer 1 (dense): expected a vector or tokens, got the image [8, 8, 1]"}},
		{"net: {spec: [relu]}", nil, []string{"net.spec: layer 0 (relu): expected the first entry to be `input"}},
		{"net: {spec: relu}", nil, []string{"net.spec: expected a list of layers"}},
		{"net: {spec_file: nets/good.yaml, width: 0.5, dropout: 0.1, padding: same}", nil,
			[]string{"net.width: got 0.5 with net.spec", "net.dropout: got 0.1 with net.spec", "net.padding: got \"same\" with net.spec"}},
		{"net: {spec_file: nets/good.yaml, num_classes: 7}", nil, nil}, // `classes` follows num_classes
		{"net: {spec_file: nets/pool.yaml, image_size: 3}", nil, []string{"layer 1 (maxpool): kernel: 4 is larger than the 3-cell input"}},
		{"net: {spec_file: nets/pool.yaml}\ndata: {eval_image_size: 16}", nil, []string{"data.eval_image_size: got 16, but net netspec only takes the resolution"}},
	} {
		path := write(t, filepath.Join(dir, "r.yaml"), c.recipe+"\nsteps: 1\n")
		_, err := Load(path, c.sets)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.recipe, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: loaded, want an error", c.recipe)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s:\n%v\nwant it to say %q", c.recipe, err, w)
			}
		}
	}
}
