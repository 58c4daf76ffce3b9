package recipe

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trainer/trainer/config"
)

func TestFineTuneKeysRefused(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	cases := []struct {
		name, want string
		mutate     func(*config.Config)
	}{
		{"plain http", "net.pretrained: weights URL http://example.com/r-0676ba61.pth: plain http is refused",
			func(c *config.Config) { c.Net.Pretrained = "http://example.com/r-0676ba61.pth" }},
		{"a URL without a hash", "net.pretrained: https://example.com/r.pth: its file name carries no hash prefix",
			func(c *config.Config) { c.Net.Pretrained = "https://example.com/r.pth" }},
		{"a bad digest", "net.pretrained_sha256: got \"ABC\", expected 64 lower-case hex digits",
			func(c *config.Config) { c.Net.Pretrained, c.Net.PretrainedSHA256 = "w.pth", "ABC" }},
		{"a digest without weights", "net.pretrained_sha256: set without net.pretrained",
			func(c *config.Config) { c.Net.PretrainedSHA256 = sha }},
		{"a bad freeze pattern", "optimizer.freeze: pattern \"layer[\": expected a glob",
			func(c *config.Config) { c.Optimizer.Freeze = []string{"layer["} }},
		{"a repeated freeze pattern", "optimizer.freeze: pattern \"fc\" listed twice",
			func(c *config.Config) { c.Optimizer.Freeze = []string{"fc", "fc"} }},
		{"a zero factor", "optimizer.lr_mult: \"fc\": factor 0, expected in (0, 1000] (to train nothing there, use optimizer.freeze)",
			func(c *config.Config) { c.Optimizer.LRMult = map[string]float64{"fc": 0} }},
		{"a bad lr_mult pattern", "optimizer.lr_mult: pattern \"[\": expected a glob",
			func(c *config.Config) { c.Optimizer.LRMult = map[string]float64{"[": 1} }},
	}
	for _, tc := range cases {
		c := config.Defaults()
		c.Name = "ft"
		tc.mutate(&c)
		if err := Validate(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	c := config.Defaults()
	c.Name, c.Net.Pretrained, c.Net.PretrainedSHA256 = "ft", "https://example.com/r.pth", sha
	if err := Validate(c); err != nil {
		t.Errorf("a URL with a digest: %v", err)
	}
	c.Net.Pretrained, c.Net.PretrainedSHA256 = "http://127.0.0.1:8080/r-0676ba61.pth", ""
	if err := Validate(c); err != nil {
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
