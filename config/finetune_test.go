package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
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

func TestFineTuneKeysRefused(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	cases := []struct {
		name, want string
		mutate     func(*Config)
	}{
		{"plain http", "net.pretrained: weights URL http://example.com/r-0676ba61.pth: plain http is refused",
			func(c *Config) { c.Net.Pretrained = "http://example.com/r-0676ba61.pth" }},
		{"a URL without a hash", "net.pretrained: https://example.com/r.pth: its file name carries no hash prefix",
			func(c *Config) { c.Net.Pretrained = "https://example.com/r.pth" }},
		{"a bad digest", "net.pretrained_sha256: got \"ABC\", expected 64 lower-case hex digits",
			func(c *Config) { c.Net.Pretrained, c.Net.PretrainedSHA256 = "w.pth", "ABC" }},
		{"a digest without weights", "net.pretrained_sha256: set without net.pretrained",
			func(c *Config) { c.Net.PretrainedSHA256 = sha }},
		{"a bad freeze pattern", "optimizer.freeze: pattern \"layer[\": expected a glob",
			func(c *Config) { c.Optimizer.Freeze = []string{"layer["} }},
		{"a repeated freeze pattern", "optimizer.freeze: pattern \"fc\" listed twice",
			func(c *Config) { c.Optimizer.Freeze = []string{"fc", "fc"} }},
		{"a zero factor", "optimizer.lr_mult: \"fc\": factor 0, expected in (0, 1000] (to train nothing there, use optimizer.freeze)",
			func(c *Config) { c.Optimizer.LRMult = map[string]float64{"fc": 0} }},
		{"a bad lr_mult pattern", "optimizer.lr_mult: pattern \"[\": expected a glob",
			func(c *Config) { c.Optimizer.LRMult = map[string]float64{"[": 1} }},
	}
	for _, tc := range cases {
		c := Defaults()
		c.Name = "ft"
		tc.mutate(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	c := Defaults()
	c.Name, c.Net.Pretrained, c.Net.PretrainedSHA256 = "ft", "https://example.com/r.pth", sha
	if err := c.Validate(); err != nil {
		t.Errorf("a URL with a digest: %v", err)
	}
	c.Net.Pretrained, c.Net.PretrainedSHA256 = "http://127.0.0.1:8080/r-0676ba61.pth", ""
	if err := c.Validate(); err != nil {
		t.Errorf("http to the loopback address: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(path, []byte("optimizer:\n  lr_mult: {fc: fast}\n  freeze: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path, nil)
	for _, want := range []string{"optimizer.lr_mult.fc: expected a number, got string \"fast\"", "optimizer.freeze: expected a list of strings, got int 3"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad types: %v, want %q", err, want)
		}
	}
}
