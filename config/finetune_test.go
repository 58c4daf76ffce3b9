package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The fine-tuning keys: net.pretrained (+ _sha256), optimizer.freeze and optimizer.lr_mult load from
// YAML and --set, and each bad value is refused naming its key.
func TestFineTuneKeysLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ft.yaml")
	recipe := `net:
  name: resnet50
  pretrained: https://download.pytorch.org/models/resnet50-0676ba61.pth
optimizer:
  freeze: [conv1, bn1, "layer1.*"]
  lr_mult: {"*": 0.1, fc: 1}
`
	if err := os.WriteFile(path, []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, []string{"optimizer.lr_mult.layer4=0.5", "net.num_classes=10"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Optimizer.Freeze, []string{"conv1", "bn1", "layer1.*"}) {
		t.Errorf("freeze = %v", c.Optimizer.Freeze)
	}
	if m := c.Optimizer.LRMult; len(m) != 3 || m["*"] != 0.1 || m["fc"] != 1 || m["layer4"] != 0.5 {
		t.Errorf("lr_mult = %v", m)
	}
	// The resolved config reads back as the same config (checkpoints carry it).
	back, err := Load(writeResolved(t, c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if changes := Changes(c, back); len(changes) > 1 { // name differs: the file's base name
		t.Errorf("resolved config reads back with changes %v", changes)
	}
	for _, key := range []string{"optimizer.freeze", "optimizer.lr_mult", "net.pretrained", "net.pretrained_sha256"} {
		if Resumable(key) {
			t.Errorf("%s may change on resume: it changes what the run trains", key)
		}
	}
}

func writeResolved(t *testing.T, c Config) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "resolved.yaml")
	if err := os.WriteFile(p, c.YAML(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
