package recipe

import (
	"strings"
	"testing"
)

// TestZeroInitLastOnlyForResNets: net.zero_init_last reaches the ResNets' options, is refused for a net
// whose blocks do not end in a BatchNorm, and is left out of the resolved YAML when false (so recipes
// without it keep their config hashes).
func TestZeroInitLastOnlyForResNets(t *testing.T) {
	cfg, err := Load(writeConfig(t, "seed: 1\nnet:\n  name: resnet50\n  zero_init_last: true\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := NetOptions(cfg.Net, 1)
	if err != nil || !opts.ZeroInitLast || !strings.Contains(string(cfg.YAML()), "zero_init_last: true") {
		t.Errorf("resnet50 with zero_init_last: options %+v, %v", opts, err)
	}
	_, err = Load(writeConfig(t, "seed: 1\nnet:\n  name: mobilenet_v2\n"), []string{"net.zero_init_last=true"})
	if err == nil || !strings.Contains(err.Error(), "net.zero_init_last: true for mobilenet_v2") {
		t.Errorf("mobilenet_v2 with zero_init_last: %v", err)
	}
	plain, err := Load(writeConfig(t, "seed: 1\nnet:\n  name: resnet50\n"), nil)
	if err != nil || strings.Contains(string(plain.YAML()), "zero_init_last") {
		t.Errorf("resnet50 without zero_init_last: %v\n%s", err, plain.YAML())
	}
}

// TestRandAugmentInterpolationKey: the key takes timm's three resamplings and nothing else.
func TestRandAugmentInterpolationKey(t *testing.T) {
	for _, c := range []struct{ value, want string }{
		{"bicubic", ""}, {"random", ""}, {"bilinear", ""},
		{"nearest", `data.augment.rand_augment_interpolation: got "nearest", expected bilinear, bicubic or random`},
	} {
		_, err := Load(writeConfig(t, "seed: 1\n"), []string{"data.augment.rand_augment_interpolation=" + c.value})
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.value, err, c.want)
		}
	}
}

// TestFP32HeadOnlyForResNets: net.fp32_head reaches the ResNets' options and is refused elsewhere.
func TestFP32HeadOnlyForResNets(t *testing.T) {
	cfg, err := Load(writeConfig(t, "seed: 1\nnet:\n  name: resnet34\n  fp32_head: true\n  precision: bfloat16\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if opts, err := NetOptions(cfg.Net, 1); err != nil || !opts.FP32Head {
		t.Errorf("resnet34 with fp32_head: options %+v, %v", opts, err)
	}
	_, err = Load(writeConfig(t, "seed: 1\nnet:\n  name: vit_tiny\n"), []string{"net.fp32_head=true"})
	if err == nil || !strings.Contains(err.Error(), "net.fp32_head: true for vit_tiny") {
		t.Errorf("vit_tiny with fp32_head: %v", err)
	}
}
